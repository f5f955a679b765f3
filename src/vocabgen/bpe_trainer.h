// A small byte-level BPE trainer: learns merges over a text, split into words as the GPT-2
// pre-tokenizer splits them, so that `reprise` can ship a vocabulary it made itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace reprise::vocabgen {

// A byte-level BPE vocabulary in GGUF's "gpt2" form: token texts use GPT-2's byte-to-character
// mapping; ids 0..255 are the single bytes in byte order, then one token per new merge result,
// then the special tokens.
struct BpeVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // GGUF token types: 1 normal, 3 control
  std::vector<std::string> merges;   // "left right", highest priority first
};

// Learns up to `max_merges` merges over `text` (fewer when no pair occurs twice any more): each
// step merges the most frequent adjacent pair, ties broken by the lower ids, so the result
// depends on nothing but the arguments. `special_tokens` are appended as control tokens.
BpeVocab TrainBpe(std::string_view text, size_t max_merges,
                  const std::vector<std::string>& special_tokens);

}  // namespace reprise::vocabgen
