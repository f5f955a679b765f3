// Python's case mappings of str (upper, lower, title, capitalize) and jinja's title filter, with
// Unicode's full mappings (ß -> SS, final sigma, ǆ -> ǅ) as Python applies them.
#pragma once

#include <string>
#include <string_view>

namespace reprise::jinja {

std::string UpperCase(std::string_view text);
std::string LowerCase(std::string_view text);
// str.title(): a cased character after an uncased one is title case, other cased ones lower case.
std::string PythonTitleCase(std::string_view text);
// str.capitalize(): the first character title case, the rest lower case.
std::string CapitalizeCase(std::string_view text);
// jinja's title filter: each word (split at '-', whitespace and opening brackets) gets its first
// character upper case and the rest lower case.
std::string JinjaTitleCase(std::string_view text);

}  // namespace reprise::jinja
