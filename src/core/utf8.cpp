#include "core/utf8.h"

#include <array>

namespace reprise::unicode {

size_t Utf8SequenceLength(uint8_t lead) {
  // By the high four bits: 0xxx -> 1, 10xx (a stray continuation byte) -> 1, 110x -> 2,
  // 1110 -> 3, 1111 -> 4.
  static constexpr std::array<uint8_t, 16> kLengths = {1, 1, 1, 1, 1, 1, 1, 1,
                                                       1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

void AppendUtf8(uint32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | ((c >> 18) & 0x07));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace reprise::unicode
