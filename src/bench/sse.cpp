#include "bench/sse.h"

#include <nlohmann/json.hpp>

namespace reprise::bench {

bool CompletionStreamReader::Feed(std::string_view bytes) {
  pending_.append(bytes);
  bool first = false;
  size_t start = 0;
  for (size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
    std::string_view line(pending_.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    first = HandleLine(line) || first;
  }
  pending_.erase(0, start);
  return first;
}

bool CompletionStreamReader::HandleLine(std::string_view line) {
  constexpr std::string_view kData = "data:";
  if (line.substr(0, kData.size()) != kData) {
    // A server that ignores stream=true answers with one JSON body; an error may come that way.
    if (!line.empty() && line.front() == '{') return HandleData(line);
    return false;  // blank lines, comments (": ..."), "event:" and "id:" fields
  }
  std::string_view data = line.substr(kData.size());
  while (!data.empty() && data.front() == ' ') data.remove_prefix(1);
  if (data == "[DONE]") {
    done_ = true;
    return false;
  }
  return HandleData(data);
}

bool CompletionStreamReader::HandleData(std::string_view data) {
  nlohmann::json event = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object()) return false;
  if (event.contains("error")) {
    const auto& error = event["error"];
    if (error.is_object() && error.contains("message") && error["message"].is_string()) {
      error_ = error["message"].get<std::string>();
    } else {
      error_ = error.dump();
    }
    return false;
  }
  bool first = false;
  if (event.contains("choices") && event["choices"].is_array() && !event["choices"].empty()) {
    const auto& choice = event["choices"][0];
    if (choice.contains("text") && choice["text"].is_string()) {
      text_ += choice["text"].get<std::string>();
    }
    first = choice_chunks_ == 0;
    ++choice_chunks_;
  }
  auto read_count = [](const nlohmann::json& object, const char* key, std::optional<size_t>& out) {
    if (object.is_object() && object.contains(key) && object[key].is_number_integer()) {
      out = object[key].get<size_t>();
    }
  };
  if (event.contains("usage") && event["usage"].is_object()) {
    const auto& usage = event["usage"];
    read_count(usage, "prompt_tokens", prompt_tokens_);
    read_count(usage, "completion_tokens", completion_tokens_);
    if (usage.contains("prompt_tokens_details")) {
      read_count(usage["prompt_tokens_details"], "cached_tokens", cached_tokens_);
    }
  }
  // llama.cpp's server reports the reused prompt tokens in its timings.
  if (event.contains("timings") && event["timings"].is_object() && !cached_tokens_) {
    const auto& timings = event["timings"];
    std::optional<size_t> cache_n;
    std::optional<size_t> prompt_n;
    read_count(timings, "cache_n", cache_n);
    read_count(timings, "prompt_n", prompt_n);
    if (cache_n) {
      cached_tokens_ = cache_n;
      if (prompt_n && !prompt_tokens_) prompt_tokens_ = *cache_n + *prompt_n;
    }
  }
  return first;
}

}  // namespace reprise::bench
