// Builds the statement tree of a template from its tokens (Jinja's grammar for the statements
// chat templates use). Throws jinja::Error with the line and column of the offending token.
#pragma once

#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace reprise::jinja {

Body ParseTokens(const std::vector<Token>& tokens);

}  // namespace reprise::jinja
