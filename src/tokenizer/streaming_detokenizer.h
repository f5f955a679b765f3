// Turns a stream of generated token ids into text pieces that are always valid UTF-8: bytes of
// a character split over several tokens are held back until the character is complete.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace reprise {

// One per generated sequence. Pieces are concatenated as generated text continues a prompt: no
// leading space is stripped, and CONTROL/UNKNOWN tokens print nothing (as Tokenizer::Decode).
// Bytes that can never form a character are replaced by U+FFFD. The tokenizer must outlive it.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // Returns the text that became complete with this token (often empty or one piece). Throws
  // Error for an id outside the vocabulary.
  std::string Push(int32_t id);

  // Returns what is still held back (an unfinished character becomes U+FFFD) and resets.
  std::string Flush();

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;  // bytes not returned yet; at most an incomplete UTF-8 sequence
};

}  // namespace reprise
