// UTF-8 encoding basics shared by the tokenizers and the Jinja interpreter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace reprise::unicode {

// Length in bytes of the UTF-8 sequence that starts with `lead` (1 for a stray continuation byte).
size_t Utf8SequenceLength(uint8_t lead);

// Appends the UTF-8 encoding of `codepoint`.
void AppendUtf8(uint32_t codepoint, std::string& out);

}  // namespace reprise::unicode
