// Cuts input text at occurrences of special tokens, so that they become whole tokens before the
// remaining text is tokenized (llama.cpp's tokenizer_st_partition).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace reprise {

// A piece of the input: raw text to tokenize (token == -1), or a matched special token.
struct Fragment {
  int32_t token = -1;
  size_t offset = 0;  // raw text: where it starts in the input
  size_t length = 0;
};

// Splits `text` at every occurrence of each special token, longest tokens first, left to right.
// USER_DEFINED tokens are always matched; CONTROL and UNKNOWN tokens only with parse_special.
// A token with the lstrip/rstrip attribute also takes the ASCII whitespace on that side.
std::vector<Fragment> SplitOnSpecialTokens(const Vocab& vocab, std::string_view text,
                                           bool parse_special);

}  // namespace reprise
