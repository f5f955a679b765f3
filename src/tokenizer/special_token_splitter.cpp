#include "tokenizer/special_token_splitter.h"

#include <cctype>

namespace reprise {
namespace {

bool IsAsciiSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Splits one raw-text fragment at every occurrence of `special` and appends the pieces to `out`.
void SplitFragment(const Vocab& vocab, std::string_view text, int32_t special, Fragment fragment,
                   std::vector<Fragment>& out) {
  const std::string& needle = vocab.token(special).text;
  const uint32_t attr = vocab.token(special).attr;
  size_t offset = fragment.offset;
  size_t length = fragment.length;
  while (length > 0) {
    const size_t match = text.substr(0, offset + length).find(needle, offset);
    if (match == std::string_view::npos) {
      break;
    }
    size_t left_length = match - offset;
    if (attr & kAttrLstrip) {
      while (left_length > 0 && IsAsciiSpace(text[offset + left_length - 1])) {
        --left_length;
      }
    }
    if (left_length > 0) {
      out.push_back(Fragment{-1, offset, left_length});
    }
    out.push_back(Fragment{special, match, needle.size()});
    size_t right_offset = match + needle.size();
    size_t right_length = offset + length - right_offset;
    if (attr & kAttrRstrip) {
      while (right_length > 0 && IsAsciiSpace(text[right_offset])) {
        ++right_offset;
        --right_length;
      }
    }
    offset = right_offset;
    length = right_length;
  }
  if (length > 0) {
    out.push_back(Fragment{-1, offset, length});
  }
}

}  // namespace

std::vector<Fragment> SplitOnSpecialTokens(const Vocab& vocab, std::string_view text,
                                           bool parse_special) {
  std::vector<Fragment> fragments;
  if (text.empty()) {
    return fragments;
  }
  fragments.push_back(Fragment{-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t special : vocab.special_tokens()) {
    if (!parse_special && vocab.HasAttr(special, kAttrControl | kAttrUnknown)) {
      continue;
    }
    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0) {
        next.push_back(fragment);
      } else {
        SplitFragment(vocab, text, special, fragment, next);
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace reprise
