// The text one request produces: its sampled tokens detokenized, cut at the first stop string,
// and streamed in deltas that never end inside a UTF-8 character or inside what could still
// become a stop string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace reprise {

class OutputText {
 public:
  // The tokenizer must outlive this. Empty stop strings are ignored.
  OutputText(const Tokenizer& tokenizer, std::vector<std::string> stop);

  // Appends the text of a sampled token. Returns true when a stop string now appears: the text
  // is cut just before it, and nothing more may be pushed.
  bool Push(int32_t token);
  // Appends what the detokenizer still holds (an unfinished character becomes U+FFFD): the
  // sequence ends without a stop string.
  void Flush();

  // The text not streamed yet that is safe to stream. Unless `final`, the last bytes that could
  // begin a stop string are held back; a UTF-8 character is never cut either way.
  std::string TakeDelta(bool final);

  const std::string& text() const { return text_; }
  // The whole text, moved out (at the end of the request).
  std::string TakeText() { return std::move(text_); }

 private:
  StreamingDetokenizer detokenizer_;
  std::vector<std::string> stop_;
  size_t longest_stop_ = 0;   // bytes of the longest stop string: how much text to hold back
  std::string text_;          // output so far (a stop string cuts it)
  size_t emitted_bytes_ = 0;  // how much of text_ has been streamed
};

}  // namespace reprise
