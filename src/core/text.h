// Small ASCII text helpers for parsing what people type in flags, environment variables and
// configuration files.
#pragma once

#include <string>
#include <string_view>

namespace reprise {

// `text` with ASCII letters lowered; other bytes (UTF-8 included) unchanged.
std::string AsciiLower(std::string text);
// `text` without leading and trailing ASCII whitespace (" \t\n\v\f\r").
std::string TrimAsciiSpace(std::string_view text);
// `bytes` (from a file or a client) made safe to print in a message: control characters (C0,
// DEL and the C1 range) and bytes that are not valid UTF-8 become \xNN, so no
// terminal escape passes through; beyond `max_bytes` of input the rest is cut with "...".
std::string EscapeBytes(std::string_view bytes, size_t max_bytes = 256);
// How much of an error message built from untrusted bytes EscapeBytes keeps.
inline constexpr size_t kMaxMessageBytes = 1024;

}  // namespace reprise
