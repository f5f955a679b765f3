#include "jinja/case_mapping.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf16.h>

#include <cctype>

namespace reprise::jinja {

namespace {

bool IsAscii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

icu::UnicodeString FromUtf8(std::string_view text) {
  return icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
}

std::string ToUtf8(const icu::UnicodeString& text) {
  std::string out;
  text.toUTF8String(out);
  return out;
}

// Full mappings in the root locale: Python's str methods ignore the locale.
icu::UnicodeString Upper(icu::UnicodeString text) { return text.toUpper(icu::Locale::getRoot()); }
icu::UnicodeString Lower(icu::UnicodeString text) { return text.toLower(icu::Locale::getRoot()); }
icu::UnicodeString Title(UChar32 c) {
  icu::UnicodeString one(c);
  return one.toTitle(nullptr, icu::Locale::getRoot(),
                     U_TITLECASE_NO_BREAK_ADJUSTMENT | U_TITLECASE_NO_LOWERCASE);
}

// Python's \s and jinja's word separators ('-', '(', '{', '[', '<').
bool IsTitleSeparator(UChar32 c) {
  return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || u_isUWhiteSpace(c) ||
         (c >= 0x1c && c <= 0x1f);
}

}  // namespace

std::string UpperCase(std::string_view text) {
  if (IsAscii(text)) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
  }
  return ToUtf8(Upper(FromUtf8(text)));
}

std::string LowerCase(std::string_view text) {
  if (IsAscii(text)) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  }
  return ToUtf8(Lower(FromUtf8(text)));
}

std::string PythonTitleCase(std::string_view text) {
  const icu::UnicodeString in = FromUtf8(text);
  icu::UnicodeString out;
  bool previous_cased = false;
  for (int32_t i = 0; i < in.length();) {
    const UChar32 c = in.char32At(i);
    i += U16_LENGTH(c);
    out += previous_cased ? Lower(icu::UnicodeString(c)) : Title(c);
    previous_cased = u_hasBinaryProperty(c, UCHAR_CASED);
  }
  return ToUtf8(out);
}

std::string CapitalizeCase(std::string_view text) {
  const icu::UnicodeString in = FromUtf8(text);
  if (in.isEmpty()) return "";
  const UChar32 first = in.char32At(0);
  icu::UnicodeString out = Title(first);
  out += Lower(in.tempSubString(U16_LENGTH(first)));
  return ToUtf8(out);
}

std::string JinjaTitleCase(std::string_view text) {
  // Split into runs of separators and of other characters (jinja's re.split keeps both); each run
  // gets item[0].upper() + item[1:].lower().
  const icu::UnicodeString in = FromUtf8(text);
  icu::UnicodeString out;
  int32_t start = 0;
  while (start < in.length()) {
    const bool separator = IsTitleSeparator(in.char32At(start));
    int32_t end = start;
    while (end < in.length() && IsTitleSeparator(in.char32At(end)) == separator) {
      end += U16_LENGTH(in.char32At(end));
    }
    const UChar32 first = in.char32At(start);
    out += Upper(icu::UnicodeString(first));
    out += Lower(in.tempSubString(start + U16_LENGTH(first), end - start - U16_LENGTH(first)));
    start = end;
  }
  return ToUtf8(out);
}

}  // namespace reprise::jinja
