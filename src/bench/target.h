// Where a benchmark's requests go: the in-process engine or an OpenAI-compatible server. Both
// stream, so TTFT is the time from sending a request to its first generated token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reprise/engine.h"

namespace reprise::bench {

struct BenchRequest {
  std::string prompt;                  // text, tokenized by the target (BOS added as it adds it)
  std::vector<int32_t> prompt_tokens;  // in process only: these ids instead of the text
  int max_tokens = 16;
  bool ignore_eos = true;  // generate exactly max_tokens (greedy either way)
  // The request's cache salt (over HTTP, vLLM's `cache_salt`): its blocks match only requests
  // with the same.
  std::string cache_salt;
};

struct BenchResult {
  double ttft_seconds = 0;   // submission to first token
  double total_seconds = 0;  // submission to the last token
  size_t prompt_tokens = 0;
  std::optional<size_t> cached_tokens;  // unset when a server does not report it
  // In process only: the forward time of the steps that computed the uncached prompt suffix
  // (TTFT minus queueing, matching, scheduling and sampling).
  std::optional<double> prefill_compute_seconds;
  // In process only: CPU time the process spent from submission to the end (all threads). Time
  // the machine gave to other work does not count, so on a shared machine it varies less than
  // total_seconds; with one engine busy at a time it is that engine's work.
  std::optional<double> cpu_seconds;
  size_t completion_tokens = 0;
  std::string text;

  // prompt_tokens / TTFT: the prefill rate as a user sees it (cached tokens count as prefilled).
  double PrefillTokensPerSecond() const;
  // (completion_tokens - 1) / (total - TTFT): the first token belongs to the prefill. NaN when
  // fewer than two tokens came back.
  double DecodeTokensPerSecond() const;
};

// Where an in-process engine's step thread has spent its time so far (EngineStats).
struct EngineTimes {
  double scheduling_seconds = 0;  // scheduler and prefix cache bookkeeping
  double forward_seconds = 0;     // model forward passes
  double tier_load_seconds = 0;   // loads from the tiers beyond memory (sum of their latencies)
  uint64_t tier_bytes_read = 0;   // bytes those loads read
};

class BenchTarget {
 public:
  virtual ~BenchTarget() = default;
  // Runs one request to its end. Thread-safe: the concurrent workload calls it from many client
  // threads at once. Throws Error when the request fails.
  virtual BenchResult Run(const BenchRequest& request) = 0;
  // The prompt tokens `text` makes on this target (BOS included when it adds one), to size
  // prompts. A server without a tokenizer at hand may estimate.
  virtual size_t CountTokens(const std::string& text) = 0;
  // Token ids of `text`, in process only (empty elsewhere).
  virtual std::vector<int32_t> Tokenize(const std::string& text) = 0;
  // Drops every cached block not in use, from memory, or from every tier (disk, remote) when
  // `every_tier`; false where the target cannot (a server without POST /v1/cache/clear).
  virtual bool ClearCache(bool every_tier) = 0;
  // In process only: the engine's step-thread times, once every request Run has returned is
  // accounted. Unset for a server.
  virtual std::optional<EngineTimes> Times() { return std::nullopt; }
  // In process only: the model and KV settings (what a decoded token reads). Unset for a server.
  virtual std::optional<ModelInfo> Info() { return std::nullopt; }
  virtual bool in_process() const = 0;
  // "engine (reuse on, 2 threads, 512 MiB KV)" or "http://127.0.0.1:8080".
  virtual std::string Describe() const = 0;
};

}  // namespace reprise::bench
