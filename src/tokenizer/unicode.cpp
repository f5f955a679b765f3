#include "tokenizer/unicode.h"

#include <unicode/uchar.h>

#include <array>

namespace reprise::unicode {

namespace {

bool IsContinuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

// Decodes one character at `offset` with llama.cpp's rules (lead byte decides the length, the
// following bytes must be continuation bytes; overlongs are not rejected). Returns false for an
// invalid or truncated sequence.
bool DecodeOne(std::string_view text, size_t offset, uint32_t& codepoint, size_t& length) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[offset + i]); };
  const uint8_t lead = byte(0);
  const size_t available = text.size() - offset;
  if ((lead & 0x80) == 0) {
    codepoint = lead;
    length = 1;
    return true;
  }
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    codepoint = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    codepoint = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    codepoint = lead & 0x07;
  } else {
    return false;
  }
  if (available < length) {
    return false;
  }
  for (size_t i = 1; i < length; ++i) {
    if (!IsContinuation(byte(i))) {
      return false;
    }
    codepoint = (codepoint << 6) | (byte(i) & 0x3F);
  }
  return true;
}

}  // namespace

std::vector<uint32_t> DecodeUtf8(std::string_view text) {
  std::vector<uint32_t> result;
  result.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    uint32_t codepoint = 0;
    size_t length = 0;
    if (DecodeOne(text, offset, codepoint, length)) {
      result.push_back(codepoint);
      offset += length;
    } else {
      result.push_back(kReplacementChar);
      offset += 1;
    }
  }
  return result;
}

std::string EncodeUtf8(uint32_t codepoint) {
  std::string out;
  AppendUtf8(codepoint, out);
  return out;
}

size_t IncompleteUtf8Suffix(std::string_view text) {
  // Walk back over at most three continuation bytes to the lead byte of the last character.
  const size_t size = text.size();
  for (size_t back = 1; back <= 4 && back <= size; ++back) {
    const auto byte = static_cast<uint8_t>(text[size - back]);
    if (IsContinuation(byte)) {
      continue;
    }
    if ((byte & 0x80) == 0) {
      return 0;  // ASCII: complete
    }
    size_t expected = 0;
    if ((byte & 0xE0) == 0xC0) {
      expected = 2;
    } else if ((byte & 0xF0) == 0xE0) {
      expected = 3;
    } else if ((byte & 0xF8) == 0xF0) {
      expected = 4;
    } else {
      return 0;  // not a lead byte: invalid, holding it back would not help
    }
    return back < expected ? back : 0;
  }
  return 0;
}

bool IsValidUtf8(std::string_view text) {
  size_t offset = 0;
  while (offset < text.size()) {
    uint32_t codepoint = 0;
    size_t length = 0;
    if (!DecodeOne(text, offset, codepoint, length)) {
      return false;
    }
    static constexpr std::array<uint32_t, 5> kMinimum = {0, 0, 0x80, 0x800, 0x10000};
    if (codepoint < kMinimum[length] || codepoint > 0x10FFFF ||
        (codepoint >= 0xD800 && codepoint <= 0xDFFF)) {
      return false;
    }
    offset += length;
  }
  return true;
}

uint16_t ClassesOf(uint32_t codepoint) {
  const auto c = static_cast<UChar32>(codepoint);
  uint16_t classes = u_isUWhiteSpace(c) ? kWhitespace : 0;
  switch (static_cast<UCharCategory>(u_charType(c))) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return classes | kLetter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return classes | kNumber;
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
      return classes | kPunctuation;
    case U_MATH_SYMBOL:
    case U_CURRENCY_SYMBOL:
    case U_MODIFIER_SYMBOL:
    case U_OTHER_SYMBOL:
      return classes | kSymbol;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      return classes | kMark;
    case U_SPACE_SEPARATOR:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
      return classes | kSeparator;
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return classes | kControl;
    default:
      return classes;  // unassigned
  }
}

namespace {

// Bytes GPT-2 keeps as themselves: '!'..'~', 0xA1..0xAC, 0xAE..0xFF.
constexpr bool IsSelfMapped(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

constexpr std::array<uint16_t, 256> MakeByteToCodepoint() {
  std::array<uint16_t, 256> table{};
  uint16_t next = 256;
  for (int byte = 0; byte < 256; ++byte) {
    table[byte] = IsSelfMapped(byte) ? static_cast<uint16_t>(byte) : next++;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kByteToCodepoint = MakeByteToCodepoint();

}  // namespace

uint32_t ByteToCodepoint(uint8_t byte) { return kByteToCodepoint[byte]; }

int CodepointToByte(uint32_t codepoint) {
  if (codepoint < 256) {
    return IsSelfMapped(static_cast<int>(codepoint)) ? static_cast<int>(codepoint) : -1;
  }
  // The remapped bytes are numbered 256, 257, ... in byte order: find the one with that rank.
  if (codepoint >= 256 + 68) {
    return -1;  // 68 = 256 - 188 bytes that are not self-mapped
  }
  for (int byte = 0; byte < 256; ++byte) {
    if (kByteToCodepoint[byte] == codepoint) {
      return byte;
    }
  }
  return -1;
}

void AppendByteEncoded(std::string_view bytes, std::string& out) {
  for (char byte : bytes) {
    AppendUtf8(ByteToCodepoint(static_cast<uint8_t>(byte)), out);
  }
}

}  // namespace reprise::unicode
