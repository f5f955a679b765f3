// BenchTarget over any OpenAI-compatible server (--url): each request is a streaming
// POST /v1/completions, so two servers can be compared on identical requests.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "bench/target.h"

namespace reprise {
class Tokenizer;
}

namespace reprise::bench {

class BenchHttpTarget : public BenchTarget {
 public:
  // `model` is sent as the request's "model" field (empty: the first model GET /v1/models lists;
  // throws Error when the server cannot be reached). Prompts are sized with the tokenizer of
  // `tokenizer_gguf` when given, else with the server's POST /tokenize, else estimated (4 bytes
  // a token, said once on stderr).
  BenchHttpTarget(const std::string& url, std::string model, const std::string& tokenizer_gguf);
  ~BenchHttpTarget() override;

  BenchResult Run(const BenchRequest& request) override;
  size_t CountTokens(const std::string& text) override;
  std::vector<int32_t> Tokenize(const std::string&) override { return {}; }
  // POST /v1/cache/clear (Reprise's route); false where the server has none.
  bool ClearCache(bool every_tier) override;
  bool in_process() const override { return false; }
  std::string Describe() const override { return url_; }

  // The JSON body of a request (tests): model, prompt, max_tokens, temperature 0, stream with
  // usage, ignore_eos.
  static std::string RequestBody(const std::string& model, const BenchRequest& request);

 private:
  std::optional<size_t> CountWithServer(const std::string& text);
  std::string ServedModel();

  std::string url_;
  std::string host_;
  int port_;
  std::string model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::mutex mutex_;           // guards the counting mode below
  bool server_counts_ = true;  // POST /tokenize worked (or was not tried yet)
  bool warned_estimate_ = false;
  bool server_clears_ = true;  // POST /v1/cache/clear worked (or was not tried yet)
};

}  // namespace reprise::bench
