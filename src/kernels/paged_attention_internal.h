// Limits and per-target entry points of PagedAttention. Internal to kernels/.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/paged_attention.h"

namespace reprise::kernels {

inline constexpr int kMaxAttentionBlockSize = 256;
inline constexpr int kMaxAttentionGroup = 64;
inline constexpr int kMaxAttentionHeadDim = 512;

// Arguments already checked by PagedAttentionOnTarget.
void PagedAttentionScalar(const PagedKv& kv, int layer, int kv_head, const float* q, int group,
                          std::span<const int32_t> block_table, int num_positions, float scale,
                          float* out);
void PagedAttentionAvx512(const PagedKv& kv, int layer, int kv_head, const float* q, int group,
                          std::span<const int32_t> block_table, int num_positions, float scale,
                          float* out);

}  // namespace reprise::kernels
