// The attention of a warm request as the model runs it: a few dozen new tokens over a long cached
// context, split over KV heads and fixed position splits on the pool, timed for each KV type.
// A warm turn's excess over prefilling its new tokens alone is this attention. The same for one
// decoding token over many layers' blocks read from memory, as a decode step meets them.
#pragma once

#include <string>
#include <vector>

#include "core/thread_pool.h"

namespace reprise::bench {

// The shape: a 1B model's attention (8 KV heads of 4 query heads each, head_dim 64) for
// `new_tokens` tokens after `cached` positions.
struct WarmAttentionShape {
  int new_tokens = 64;
  int cached = 1600;
  int kv_heads = 8;
  int group = 4;
  int head_dim = 64;
  // Layers whose K/V the blocks hold (each block holds every layer, as the model's do); with
  // more than one, each run attends every layer in turn.
  int layers = 1;
  // Read a buffer larger than the caches before each layer's attention (untimed), so that its
  // K/V comes from memory as in a decode step, where the weights stream in between.
  bool from_memory = false;
};

struct WarmAttentionTiming {
  std::string kv_type;  // "f16", "q8" or "f32"
  double seconds = 0;   // best of the runs, one layer
  double gflops = 0;    // 4 x query rows x positions x head_dim (scores and values) / seconds
  double gbps = 0;      // K/V bytes of one layer / seconds
};

// Best of `runs` for each KV type, on the best CPU target.
std::vector<WarmAttentionTiming> TimeWarmAttention(const WarmAttentionShape& shape,
                                                   ThreadPool& pool, int runs);

}  // namespace reprise::bench
