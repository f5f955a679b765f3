// Limits and per-target entry points of PagedAttention. Internal to kernels/.
#pragma once

#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/paged_attention.h"

namespace reprise::kernels {

inline constexpr int kMaxAttentionBlockSize = 256;
inline constexpr int kMaxAttentionGroup = 64;
inline constexpr int kMaxAttentionHeadDim = 512;
// Query rows (tokens x group heads) one kernel call keeps state for; PagedAttentionTokensOnTarget
// splits longer runs into calls of at most this many rows.
inline constexpr int kMaxAttentionRows = 64;

// Asks for `block`'s K and V planes of (layer, kv_head), `plane_bytes` each, ahead of their use:
// keys are the next thing read (into L1), values are read after the block's scores (into L2: a
// large block's planes together would not fit L1).
inline void PrefetchBlockPlanes(const PagedKv& kv, int32_t block, int layer, int kv_head,
                                size_t plane_bytes) {
  const uint8_t* k = kv.Plane(block, layer, 0, kv_head);
  const uint8_t* v = kv.Plane(block, layer, 1, kv_head);
  for (size_t line = 0; line < plane_bytes; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(k + line), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(v + line), _MM_HINT_T1);
  }
}

// Arguments already checked by PagedAttentionTokensOnTarget; num_tokens * group <=
// kMaxAttentionRows. Token t of the run is at position first_position + t (see
// PagedAttentionTokens). A single query of n positions is the run of one token at n - 1.
using PagedAttentionKernel = void (*)(const PagedKv& kv, int layer, int kv_head, const float* q,
                                      int64_t q_stride, int group,
                                      std::span<const int32_t> block_table, int first_position,
                                      int num_tokens, float scale, float* out, int64_t out_stride);
void PagedAttentionScalar(const PagedKv& kv, int layer, int kv_head, const float* q,
                          int64_t q_stride, int group, std::span<const int32_t> block_table,
                          int first_position, int num_tokens, float scale, float* out,
                          int64_t out_stride);
void PagedAttentionAvx2(const PagedKv& kv, int layer, int kv_head, const float* q, int64_t q_stride,
                        int group, std::span<const int32_t> block_table, int first_position,
                        int num_tokens, float scale, float* out, int64_t out_stride);
void PagedAttentionAvx512(const PagedKv& kv, int layer, int kv_head, const float* q,
                          int64_t q_stride, int group, std::span<const int32_t> block_table,
                          int first_position, int num_tokens, float scale, float* out,
                          int64_t out_stride);

}  // namespace reprise::kernels
