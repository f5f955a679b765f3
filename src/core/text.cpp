#include "core/text.h"

#include <fmt/format.h>

namespace reprise {

std::string AsciiLower(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

std::string TrimAsciiSpace(std::string_view text) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return "";
  const size_t last = text.find_last_not_of(kSpace);
  return std::string(text.substr(first, last - first + 1));
}

namespace {

// The length of the valid UTF-8 sequence at the start of `bytes` (0 if none), rejecting
// overlong forms, surrogates and code points beyond U+10FFFF.
size_t Utf8SequenceLength(std::string_view bytes, char32_t& code_point) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  char32_t min = 0;
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2, min = 0x80, code_point = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, min = 0x800, code_point = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, min = 0x10000, code_point = lead & 0x07;
  } else {
    return 0;
  }
  if (bytes.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(i) & 0x3F);
  }
  if (code_point < min || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) {
    return 0;
  }
  return length;
}

}  // namespace

std::string EscapeBytes(std::string_view bytes, size_t max_bytes) {
  const bool cut = bytes.size() > max_bytes;
  if (cut) bytes = bytes.substr(0, max_bytes);
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    char32_t code_point = 0;
    size_t length = Utf8SequenceLength(bytes.substr(i), code_point);
    const bool control = code_point < 0x20 || (code_point >= 0x7F && code_point < 0xA0);
    if (length == 0 || control) {
      out += fmt::format("\\x{:02X}", static_cast<unsigned char>(bytes[i]));
      ++i;
      continue;
    }
    out.append(bytes.substr(i, length));
    i += length;
  }
  if (cut) out += "...";
  return out;
}

}  // namespace reprise
