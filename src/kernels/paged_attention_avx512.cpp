// PagedAttention with AVX-512 + F16C (compiled with those flags only for this file; chosen at
// run time). Same algorithm and blocking as the portable version in paged_attention.cpp:
//
//   for each KV block in order:
//     s[g][j] = scale * HorizontalSum(sum over 16-wide chunks of q[g] * k[j])
//     m' = max(m, max_j s);  c = exp(m - m');  l = l * c + sum_j exp(s - m') (in j order)
//     acc[g] = acc[g] * c;  then for j in order: acc[g] = fma(exp(s[g][j] - m'), v[j], acc[g])
//   out = acc * (1 / l)
//
// Its bits differ from the portable version's (other summation trees, fused multiply-adds) but,
// like it, depend only on the stored K/V values and their order.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/paged_attention.h"
#include "kernels/paged_attention_internal.h"
#include "kernels/simd.h"

namespace reprise::kernels {

namespace {

inline float HorizontalSum(__m512 v) {
  __m256 eight = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  __m128 one = _mm_add_ss(two, _mm_movehdup_ps(two));
  return _mm_cvtss_f32(one);
}

// 16 elements (fewer under `mask`, zeros elsewhere) of a stored K or V row as f32.
template <KvType kType>
inline __m512 LoadRow(const uint8_t* row, int offset, __mmask16 mask) {
  if constexpr (kType == KvType::kF32) {
    return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(row) + offset);
  } else {
    return _mm512_cvtph_ps(
        _mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + offset));
  }
}

inline __mmask16 ChunkMask(int head_dim, int offset) {
  const int n = std::min(16, head_dim - offset);
  return static_cast<__mmask16>((1u << n) - 1);
}

constexpr int kGroupStep = 4;     // query heads whose dot products are accumulated together
constexpr int kValueHeads = 4;    // query heads x
constexpr int kValueChunks = 4;   //   16-wide chunks of V accumulated in registers

template <KvType kType>
void Attention(const PagedKv& kv, int layer, int kv_head, const float* q, int group,
               std::span<const int32_t> block_table, int num_positions, float scale, float* out) {
  const int head_dim = kv.head_dim;
  const int block_size = kv.block_size;
  const size_t row_bytes = static_cast<size_t>(head_dim) * KvElementBytes(kType);
  std::fill(out, out + static_cast<int64_t>(group) * head_dim, 0.0f);  // acc: [group][head_dim]
  if (num_positions == 0) return;
  float running_max[kMaxAttentionGroup];
  float running_sum[kMaxAttentionGroup];
  std::fill(running_max, running_max + group, -std::numeric_limits<float>::infinity());
  std::fill(running_sum, running_sum + group, 0.0f);
  float scores[kMaxAttentionGroup][kMaxAttentionBlockSize];  // [group][block_size]

  const int num_blocks = (num_positions + block_size - 1) / block_size;
  for (int b = 0; b < num_blocks; ++b) {
    const int filled = std::min(block_size, num_positions - b * block_size);
    const uint8_t* k_plane = kv.Plane(block_table[b], layer, 0, kv_head);
    const uint8_t* v_plane = kv.Plane(block_table[b], layer, 1, kv_head);
    if (b + 1 < num_blocks) {  // the next block's keys are the next thing read from memory
      const uint8_t* next = kv.Plane(block_table[b + 1], layer, 0, kv_head);
      for (size_t line = 0; line < row_bytes * block_size; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next + line), _MM_HINT_T0);
      }
    }
    // Scores.
    for (int j = 0; j < filled; ++j) {
      const uint8_t* k_row = k_plane + j * row_bytes;
      for (int g0 = 0; g0 < group; g0 += kGroupStep) {
        // A constant number of heads keeps the accumulators in registers; heads past the group
        // repeat its first one and are not stored.
        const int ng = std::min(kGroupStep, group - g0);
        const float* q_rows[kGroupStep];
        for (int g = 0; g < kGroupStep; ++g) q_rows[g] = q + (g0 + (g < ng ? g : 0)) * head_dim;
        __m512 acc[kGroupStep];
        for (int g = 0; g < kGroupStep; ++g) acc[g] = _mm512_setzero_ps();
        for (int d = 0; d < head_dim; d += 16) {
          const __mmask16 mask = ChunkMask(head_dim, d);
          const __m512 k = LoadRow<kType>(k_row, d, mask);
          for (int g = 0; g < kGroupStep; ++g) {
            acc[g] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, q_rows[g] + d), k, acc[g]);
          }
        }
        for (int g = 0; g < ng; ++g) scores[g0 + g][j] = scale * HorizontalSum(acc[g]);
      }
    }
    // Softmax bookkeeping, then values.
    for (int g = 0; g < group; ++g) {
      float block_max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < filled; ++j) block_max = std::max(block_max, scores[g][j]);
      const float new_max = std::max(running_max[g], block_max);
      const float correction = std::exp(running_max[g] - new_max);
      float sum = running_sum[g] * correction;
      for (int j = 0; j < filled; ++j) {
        scores[g][j] = std::exp(scores[g][j] - new_max);
        sum += scores[g][j];
      }
      running_max[g] = new_max;
      running_sum[g] = sum;
      float* acc = out + static_cast<int64_t>(g) * head_dim;
      const __m512 c = _mm512_set1_ps(correction);
      for (int d = 0; d < head_dim; d += 16) {
        const __mmask16 mask = ChunkMask(head_dim, d);
        _mm512_mask_storeu_ps(acc + d, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, acc + d), c));
      }
    }
    // acc[g][d] = fma(p[g][j], v[j][d], acc[g][d]) for j in order, with a tile of 4 heads x 64
    // dimensions held in registers across the block's positions.
    for (int g0 = 0; g0 < group; g0 += kValueHeads) {
      const int ng = std::min(kValueHeads, group - g0);
      for (int d0 = 0; d0 < head_dim; d0 += 16 * kValueChunks) {
        __mmask16 masks[kValueChunks];
        for (int c = 0; c < kValueChunks; ++c) {
          const int d = d0 + 16 * c;
          masks[c] = d < head_dim ? ChunkMask(head_dim, d) : static_cast<__mmask16>(0);
        }
        // Heads past the group repeat its first one and are not stored.
        int rows[kValueHeads];
        for (int g = 0; g < kValueHeads; ++g) rows[g] = g0 + (g < ng ? g : 0);
        __m512 acc[kValueHeads][kValueChunks];
        for (int g = 0; g < kValueHeads; ++g) {
          for (int c = 0; c < kValueChunks; ++c) {
            acc[g][c] = _mm512_maskz_loadu_ps(masks[c], out + rows[g] * head_dim + d0 + 16 * c);
          }
        }
        for (int j = 0; j < filled; ++j) {
          const uint8_t* v_row = v_plane + j * row_bytes;
          __m512 p[kValueHeads];
          for (int g = 0; g < kValueHeads; ++g) p[g] = _mm512_set1_ps(scores[rows[g]][j]);
          for (int c = 0; c < kValueChunks; ++c) {
            const __m512 v = LoadRow<kType>(v_row, d0 + 16 * c, masks[c]);
            for (int g = 0; g < kValueHeads; ++g) acc[g][c] = _mm512_fmadd_ps(p[g], v, acc[g][c]);
          }
        }
        for (int g = 0; g < ng; ++g) {
          for (int c = 0; c < kValueChunks; ++c) {
            _mm512_mask_storeu_ps(out + (g0 + g) * head_dim + d0 + 16 * c, masks[c], acc[g][c]);
          }
        }
      }
    }
  }
  for (int g = 0; g < group; ++g) {
    const __m512 inverse = _mm512_set1_ps(1.0f / running_sum[g]);
    float* acc = out + static_cast<int64_t>(g) * head_dim;
    for (int d = 0; d < head_dim; d += 16) {
      const __mmask16 mask = ChunkMask(head_dim, d);
      _mm512_mask_storeu_ps(acc + d, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, acc + d), inverse));
    }
  }
}

}  // namespace

void PagedAttentionAvx512(const PagedKv& kv, int layer, int kv_head, const float* q, int group,
                          std::span<const int32_t> block_table, int num_positions, float scale,
                          float* out) {
  if (kv.type == KvType::kF32) {
    Attention<KvType::kF32>(kv, layer, kv_head, q, group, block_table, num_positions, scale, out);
  } else {
    Attention<KvType::kF16>(kv, layer, kv_head, q, group, block_table, num_positions, scale, out);
  }
}

}  // namespace reprise::kernels
