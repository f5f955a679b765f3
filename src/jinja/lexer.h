// Splits Jinja template text into tokens, applying whitespace control as Hugging Face configures
// Jinja (trim_blocks and lstrip_blocks on, a final newline dropped).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace reprise::jinja {

struct Token {
  enum class Kind {
    kText,        // literal template text (after whitespace control)
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,
    kString,  // value: the unescaped text
    kInt,
    kFloat,
    kOperator,
    kEnd,  // end of the template
  };
  Kind kind;
  std::string value;
  int line = 1;
  int column = 1;
};

// Throws jinja::Error (with line and column) for an unclosed tag, comment or string, or a
// character that belongs to no token.
std::vector<Token> Tokenize(std::string_view source);

}  // namespace reprise::jinja
