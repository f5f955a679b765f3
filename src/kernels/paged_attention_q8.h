// The q8 KV type's rules, shared by every target: how a key, a value and a query are turned into
// 8-bit codes and scales, and how a block's probabilities are. Internal to kernels/.
//
// A q8 score is an exact integer dot product per group of kKvQ8KeyGroup dimensions between the
// key's codes and the query's, each group's sum times (key scale x query scale); the values'
// contribution of a run of slots is an exact integer sum of probability codes times value codes,
// times the run's code scale. Only the runs and the float steps around those sums differ
// between targets.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "kernels/paged_attention.h"
#include "kernels/paged_attention_internal.h"

namespace reprise::kernels {

inline constexpr int kMaxQ8Groups = (kMaxAttentionHeadDim + kKvQ8KeyGroup - 1) / kKvQ8KeyGroup;

// Positions per online-softmax step of the AVX2 and AVX-512 q8 kernels: four times the f32/f16
// kernels', since a step's fixed costs (each row's max, correction, rescaled accumulators and
// probability scale) weigh more beside integer dot products (256 against 128: a warm turn's q8
// attention 1.06x as fast on AVX-512, 1.02x on AVX2, Zen 5). A divisor of
// kAttentionSplitPositions, so no split cuts a span.
inline constexpr int kQ8SoftmaxSpanPositions = 4 * kSoftmaxSpanPositions;
static_assert(kAttentionSplitPositions % kQ8SoftmaxSpanPositions == 0);

// Where the AVX2 and AVX-512 kernels' value pass finds one block of a span: its value codes,
// `quads` fours of slots from span column `column`.
struct Q8ValueBlock {
  const uint8_t* codes;  // the block's value plane
  int quads;
  int column;
};

// Slots of the chunk that q8 blocks of fewer slots (4 or 8) share in the AVX2 and AVX-512 kernels'
// scores: their key codes and scales copied side by side into a block of this many slots of the
// span's own (the plane layout at that block size), so that each dot product fills its lanes.
// Integer sums are the same in any lane, so the bits do not change.
inline constexpr int kQ8SharedChunkSlots = 16;
inline constexpr int kQ8SharedChunks = kQ8SoftmaxSpanPositions / kQ8SharedChunkSlots;

// Blocks of `block_size` slots that share a chunk: 1 (no sharing) from 16 slots up.
inline int Q8BlocksPerSharedChunk(int block_size) {
  return block_size < kQ8SharedChunkSlots ? kQ8SharedChunkSlots / block_size : 1;
}

// The span's shared chunks: codes [dwords][16][4] and scales [groups][16] each.
struct Q8SharedChunks {
  alignas(64) uint8_t codes[kQ8SharedChunks][kMaxAttentionHeadDim * kQ8SharedChunkSlots];
  alignas(64) float scales[kQ8SharedChunks][kMaxQ8Groups * kQ8SharedChunkSlots];
};

// A block's key codes and scales (`codes`, `scales`: its plane) copied into lanes [lane, lane +
// block_size) of shared chunk `chunk`. Whole blocks: slots past the longest row's are copied and
// masked off when scored.
inline void ShareQ8BlockKeys(const uint8_t* codes, const float* scales, int block_size,
                             int head_dim, int lane, Q8SharedChunks& shared, int chunk) {
  const size_t bytes = static_cast<size_t>(block_size) * 4;  // a dword's codes, or the scales
  // Copies of constant size, which the compiler makes single vector moves.
  auto copy = [bytes](void* to, const void* from) {
    if (bytes == 32) {
      std::memcpy(to, from, 32);
    } else if (bytes == 16) {
      std::memcpy(to, from, 16);
    } else {
      std::memcpy(to, from, bytes);
    }
  };
  uint8_t* to_codes = shared.codes[chunk];
  for (int e = 0; e < head_dim / 4; ++e) {
    copy(to_codes + (e * kQ8SharedChunkSlots + lane) * 4, codes + e * bytes);
  }
  for (int g = 0; g * kKvQ8KeyGroup < head_dim; ++g) {
    copy(shared.scales[chunk] + g * kQ8SharedChunkSlots + lane, scales + g * block_size);
  }
}

// x / scale rounded to the nearest code in [-127, 127] (ties to even, as the vector conversions
// round), given 1 / scale. NaN gives 0. Rounding by adding and taking back 1.5 x 2^23, which
// leaves a float in [-127, 127] at its nearest integer, stays inline where nearbyint is a call.
inline float RoundedCode(float scaled, float limit) {
  const float clamped = scaled < -limit ? -limit : (scaled > limit ? limit : scaled);
  return (clamped + 12582912.0f) - 12582912.0f;
}
inline int8_t Q8Code(float x, float inverse_scale) {
  const float scaled = x * inverse_scale;
  if (!(scaled == scaled)) return 0;
  return static_cast<int8_t>(RoundedCode(scaled, 127.0f));
}

// The scale of a group whose largest magnitude is `absmax` (so that it maps to code 127), and
// its inverse (0 for an all-zero group, whose codes are then 0).
struct Q8Scale {
  float scale;
  float inverse;
};
inline Q8Scale ScaleOfMagnitude(float absmax) {
  if (!(absmax > 0.0f) || !std::isfinite(absmax)) return {absmax > 0.0f ? absmax : 0.0f, 0.0f};
  return {absmax / 127.0f, 127.0f / absmax};
}

// Where a q8 plane keeps its scales: after its codes.
inline const float* Q8PlaneScales(const PagedKv& kv, const uint8_t* plane) {
  return reinterpret_cast<const float*>(plane + static_cast<size_t>(kv.block_size) * kv.head_dim);
}

// Stores one slot's key (codes and one scale per group) and value (codes and one scale).
//   k, v: [head_dim]
void StoreQ8Key(const PagedKv& kv, uint8_t* key_plane, int slot, const float* k);
void StoreQ8Value(const PagedKv& kv, uint8_t* value_plane, int slot, const float* v);

// One query row as codes: four signed codes per int32 (dimensions 4e .. 4e + 3 in dword e, in
// byte order), per group the scale times the attention scale, and -128 x the sum of the group's
// codes, which takes back what the keys' +128 bias adds to an unsigned-by-signed dot product.
struct QueryQ8 {
  int32_t codes[kMaxAttentionHeadDim / 4];
  float scales[kMaxQ8Groups];
  int32_t corrections[kMaxQ8Groups];
};
void QuantizeQueryQ8(const float* q, int head_dim, float attention_scale, QueryQ8* out);
// QuantizeQueryQ8 for `num_heads` heads with AVX-512 (the same bytes). q: [num_heads][head_dim]
void PrepareQueriesQ8Avx512(const float* q, int num_heads, int head_dim, float attention_scale,
                            QueryQ8* out);

// Where a kernel call's row r = t * group + g finds its query: prepared (PreparedQueries, from
// the call's first token) or, where none were given, quantized by quantize(q, head_dim,
// attention_scale, out) into `own` ([num_rows]).
template <typename Quantize>
inline void Q8QueryRows(const PreparedQueries& prepared, const float* const* q_rows, int group,
                        int num_rows, int head_dim, float attention_scale, Quantize quantize,
                        QueryQ8* own, const QueryQ8** rows) {
  for (int r = 0; r < num_rows; ++r) {
    if (prepared.data != nullptr) {
      rows[r] = reinterpret_cast<const QueryQ8*>(prepared.data + (r / group) * prepared.stride) +
                r % group;
    } else {
      quantize(q_rows[r], head_dim, attention_scale, &own[r]);
      rows[r] = &own[r];
    }
  }
}

// One row's probabilities over a run of slots as unsigned codes (the run: a block in the portable
// and AVX2 kernels, a softmax span in the AVX-512 one): w[j] = p[j] x value scale[j] for the
// row's slots (0 beyond), codes round(w[j] x 255 / max w) in [0, 255], and the scale max w / 255
// their integer sums are multiplied by (0 when every w is 0). The AVX-512 kernel finds max w
// from the scores and the logarithms of the value scales, before the probabilities (see
// SpanSoftmaxCodes there).
inline float ProbabilityScale(float max_weight, float* inverse) {
  *inverse = max_weight > 0.0f ? 255.0f / max_weight : 0.0f;
  return max_weight / 255.0f;
}

// The portable kernel's query over q8 K/V (PagedAttentionScalar's, one query's `group` heads
// over positions [0, num_positions), blocks as AttentionBlocks says). q, out: [group][head_dim]
// `prepared`: the query's `group` heads prepared, or null (the query quantizes q itself).
void QueryScalarQ8(const PagedKv& kv, int layer, int kv_head, const float* q,
                   const QueryQ8* prepared, int group, std::span<const int32_t> block_table,
                   int num_positions, float scale, float* out, const AttentionBlocks& blocks);

}  // namespace reprise::kernels
