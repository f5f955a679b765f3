// Benchmarks of a running server's security properties (--url only):
//   side-channel: how well a tenant can tell, from TTFT and usage.cached_tokens, whether another
//                 tenant sent a prompt (ROC AUC of hit versus miss probes);
//   soak:         many clients for a set time (plain and streamed requests, shared and unique
//                 prefixes, disconnects with and without RST, cache clears), then checks that
//                 nothing leaked: no 5xx, no KV block in use, HTTP and engine gauges at 0, and
//                 resident memory flat after warm-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace reprise::bench {

struct SideChannelOptions {
  std::string url;
  std::string victim_key;    // sends the secret prompts
  std::string attacker_key;  // probes them (and prompts nobody sent)
  std::string served_model;  // the "model" field ("": none sent)
  int probes = 40;           // probes of each kind (hit and miss)
  int prompt_words = 200;    // words per secret prompt (roughly 1.3 tokens each)
  uint64_t seed = 0;         // shifts every text, so that a rerun against the same server is fresh
  double max_auc = 0;        // > 0: exit 1 when either AUC (either direction) is above it
};

// The AUCs of one run.
struct SideChannelResult {
  double ttft_auc = 0;     // P(a hit probe is faster than a miss probe)
  double cached_auc = 0;   // P(a hit probe reports more cached tokens than a miss probe)
  double hit_ttft_ms = 0;  // medians
  double miss_ttft_ms = 0;
  double hit_cached = 0;  // mean cached_tokens
  double miss_cached = 0;
};

// Prints a table and returns the exit code (see max_auc). Throws reprise::Error when the server
// cannot be used (unreachable, a key refused).
int RunSideChannelBench(const SideChannelOptions& options);

struct SoakOptions {
  std::string url;
  std::string api_key;  // sent with every request ("": none); clears need an admin (or none)
  std::string served_model;
  double duration_seconds = 600;
  int clients = 32;
  uint64_t seed = 0;
  double warmup_share = 0.2;  // the first part of the run, after which RSS must stay flat
};

// Runs the soak, prints its figures and returns 0 when every check held, else 1.
int RunSoakBench(const SoakOptions& options);

}  // namespace reprise::bench
