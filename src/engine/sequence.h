// The engine's state for one request: its tokens, how many have K/V in its blocks, its block
// table, and what it has produced so far.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/sha256.h"
#include "engine/output_text.h"
#include "kvcache/prefix_cache.h"
#include "reprise/engine.h"
#include "sampling/sampler.h"

namespace reprise {

struct Sequence {
  uint64_t id = 0;
  GenerationRequest request;
  StreamCallbacks callbacks;
  Clock::time_point submitted_at;

  std::vector<int32_t> tokens;  // [prompt..., generated...]
  size_t prompt_len = 0;
  // Positions [0, num_computed) have K/V in `blocks`. The step that brings num_computed to
  // tokens.size() yields the logits of the next token.
  size_t num_computed = 0;
  bool prefill_only = false;  // a static task prompt: compute, commit, pin, no sampling

  std::vector<BlockId> blocks;  // block table: position p lives in blocks[p / block_size]
  // Keys of the full blocks of `tokens`, rooted at the cache's fingerprint: computed once, then
  // extended as the sequence grows (matching and tier lookups read them).
  BlockKeyChain key_chain;
  // Blocks [num_computed / block_size, blocks.size()) are being filled from a tier (on an I/O
  // thread): the sequence is neither scheduled nor preempted until the load is taken.
  bool loading = false;
  bool cancel_requested = false;      // cancelled while loading: finished once the load is taken
  std::string failure;                // failed while loading (a fault): finished as an error
  bool load_counts_as_reuse = false;  // the load began at its first admission
  size_t committed_blocks = 0;        // leading full blocks registered in the prefix index
  std::optional<Digest> last_committed_key;  // key of the last of them: the next one's parent
  // Scheduling-only identity of each full block's prefix (a cheap rolling hash): lets the
  // scheduler see that two sequences are about to compute the same block.
  std::vector<uint64_t> prefix_hashes;

  CacheKeyExtras extras;
  RetentionPolicy retention;

  bool admitted_once = false;
  uint64_t admitted_step = 0;  // the scheduler step of its first admission (prefill aging)
  uint64_t arrival_step = 0;   // the scheduler step it was added in (admission aging)
  size_t cached_tokens = 0;    // reported reuse: prompt tokens whose KV came from cache
  CacheSources cache_sources;  // the same, by where it came from

  std::unique_ptr<Sampler> sampler;
  std::optional<OutputText> output;  // detokenized text, stop strings, what was streamed
  size_t generated = 0;
  bool first_token_seen = false;
  double ttft_seconds = 0;
  double prefill_compute_seconds = 0;  // forward time of the steps before the first token
  std::vector<std::vector<float>> logits;
  std::vector<SampledLogprobs> logprobs;  // when request.sampling.logprobs is set
  size_t logprobs_streamed = 0;           // how many of them went out in token events

  size_t Remaining() const { return tokens.size() - num_computed; }
};

}  // namespace reprise
