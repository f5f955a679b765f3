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

}  // namespace reprise
