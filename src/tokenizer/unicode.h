// UTF-8 and Unicode helpers for the tokenizers: decoding (lossy, as llama.cpp does), character
// classes used by the pre-tokenizer splits, and GPT-2's byte <-> printable-character mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"  // Utf8SequenceLength, AppendUtf8

namespace reprise::unicode {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Decodes UTF-8; an invalid or truncated sequence costs one byte and yields U+FFFD.
std::vector<uint32_t> DecodeUtf8(std::string_view text);

std::string EncodeUtf8(uint32_t codepoint);

// Number of bytes at the end of `text` that form an incomplete (not yet invalid) UTF-8 sequence:
// 0 when the text ends on a character boundary.
size_t IncompleteUtf8Suffix(std::string_view text);

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or values above U+10FFFF).
bool IsValidUtf8(std::string_view text);

// General category classes (Unicode's \p{L}, \p{N}, ... as regexes use them) and White_Space.
enum CodepointClass : uint16_t {
  kLetter = 1 << 0,       // \p{L}
  kNumber = 1 << 1,       // \p{N}
  kPunctuation = 1 << 2,  // \p{P}
  kSymbol = 1 << 3,       // \p{S}
  kMark = 1 << 4,         // \p{M}
  kSeparator = 1 << 5,    // \p{Z}
  kControl = 1 << 6,      // \p{C}
  kWhitespace = 1 << 7,   // White_Space property (what \s matches)
};
uint16_t ClassesOf(uint32_t codepoint);

inline bool IsLetter(uint32_t c) { return (ClassesOf(c) & kLetter) != 0; }
inline bool IsNumber(uint32_t c) { return (ClassesOf(c) & kNumber) != 0; }
inline bool IsPunctuation(uint32_t c) { return (ClassesOf(c) & kPunctuation) != 0; }
inline bool IsWhitespace(uint32_t c) { return (ClassesOf(c) & kWhitespace) != 0; }

// GPT-2 byte-level BPE stores every byte as a printable character: bytes that are printable
// Latin-1 stand for themselves, the others map to U+0100 upwards in byte order.
uint32_t ByteToCodepoint(uint8_t byte);
// The byte a mapped character stands for, or -1 if the character is not in the mapping.
int CodepointToByte(uint32_t codepoint);
// Appends the UTF-8 of the mapped character of each byte of `bytes`.
void AppendByteEncoded(std::string_view bytes, std::string& out);

}  // namespace reprise::unicode
