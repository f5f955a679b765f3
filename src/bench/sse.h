// Reads the event stream of an OpenAI-compatible POST /v1/completions with stream=true, as the
// bytes arrive: generated text, chunk count, and usage (prompt, completion and cached tokens,
// from usage.prompt_tokens_details.cached_tokens or llama.cpp's timings.cache_n).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace reprise::bench {

class CompletionStreamReader {
 public:
  // Feeds the next bytes of the body (events may be split anywhere). Returns true when the first
  // chunk with a choice (the first token) arrived in these bytes, so the caller can stamp TTFT.
  bool Feed(std::string_view bytes);

  const std::string& text() const { return text_; }
  size_t choice_chunks() const { return choice_chunks_; }  // chunks that carried a choice
  bool done() const { return done_; }                      // "data: [DONE]" seen
  const std::string& error() const { return error_; }      // an {"error": ...} event's message
  std::optional<size_t> prompt_tokens() const { return prompt_tokens_; }
  std::optional<size_t> completion_tokens() const { return completion_tokens_; }
  std::optional<size_t> cached_tokens() const { return cached_tokens_; }

 private:
  bool HandleLine(std::string_view line);  // true on the first choice
  bool HandleData(std::string_view data);  // one event's JSON

  std::string pending_;  // bytes after the last complete line
  std::string text_;
  size_t choice_chunks_ = 0;
  bool done_ = false;
  std::string error_;
  std::optional<size_t> prompt_tokens_;
  std::optional<size_t> completion_tokens_;
  std::optional<size_t> cached_tokens_;
};

}  // namespace reprise::bench
