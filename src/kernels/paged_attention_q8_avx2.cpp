// PagedAttention over q8 K/V with AVX2 (compiled with those flags only for this file; chosen at
// run time). An online softmax step per block (SoftmaxBlockStep in attention_softmax_avx2.h;
// the f32/f16 kernel steps per span of blocks) around the q8 integer sums (paged_attention_q8.h),
// without VNNI:
//
//   scores: per 8 slots and group of kKvQ8KeyGroup key dimensions, the exact integer sum of
//     key code x query code: the keys' bias taken off by an exclusive or, then VPMADDUBSW of the
//     query's magnitudes with the keys carrying the query's signs (no product pair reaches the
//     16-bit limit: codes are within +-127) and VPMADDWD to 32 bits; then
//     s = fma(float(sum), key scale x query scale, s) over the groups in order;
//   values: per block and row, the probabilities times the value scales as unsigned codes, their
//     exact integer sums with the value codes (both widened to 16 bits, VPMADDWD, two slots per
//     lane step), then acc = fma(float(sum), the block's code scale, acc).
//
// Integer sums are the same in any order and with any number of zero terms, so a row's bits do
// not depend on the rows it shares a tile with or on slots past its own (their codes are 0).
#include <algorithm>

#include "kernels/attention_softmax_avx2.h"
#include "kernels/paged_attention.h"
#include "kernels/paged_attention_internal.h"
#include "kernels/paged_attention_q8.h"
#include "kernels/simd.h"

namespace reprise::kernels {

namespace {

using namespace avx2;  // the AVX2 softmax and row helpers (attention_softmax_avx2.h)

constexpr int kScoreRows = 4;  // query rows whose dot products share each key load

// Scores of kRows query rows for the `count` slots from j0 of a block (8 lanes; the lanes past
// count are computed from zeros and never read): out[i * kBlockScoreStride + j0 + s].
template <int kRows>
inline void ScoreTile(const QueryQ8* const* rows, const uint8_t* key_codes, const float* key_scales,
                      int block_size, int head_dim, int j0, int count, float* out) {
  const __m256i lanes = LaneMask(count);
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  const int dwords = head_dim / 4;
  const int group_dwords = kKvQ8KeyGroup / 4;
  __m256 scores[kRows];
  for (int i = 0; i < kRows; ++i) scores[i] = _mm256_setzero_ps();
  for (int g = 0; g * group_dwords < dwords; ++g) {
    const int begin = g * group_dwords;
    const int end = std::min(dwords, begin + group_dwords);
    __m256i sums[kRows];
    for (int i = 0; i < kRows; ++i) sums[i] = _mm256_setzero_si256();
    for (int e = begin; e < end; ++e) {
      const __m256i keys = _mm256_xor_si256(
          _mm256_maskload_epi32(reinterpret_cast<const int*>(
                                    key_codes + (static_cast<size_t>(e) * block_size + j0) * 4),
                                lanes),
          bias);  // signed codes; masked-off lanes become -128, and stay unread
      for (int i = 0; i < kRows; ++i) {
        const __m256i query = _mm256_set1_epi32(rows[i]->codes[e]);
        const __m256i pairs =
            _mm256_maddubs_epi16(_mm256_abs_epi8(query), _mm256_sign_epi8(keys, query));
        sums[i] = _mm256_add_epi32(sums[i], _mm256_madd_epi16(pairs, ones));
      }
    }
    const __m256 scales =
        _mm256_maskload_ps(key_scales + static_cast<size_t>(g) * block_size + j0, lanes);
    for (int i = 0; i < kRows; ++i) {
      // The AVX-512 kernel's sum of biased keys plus the correction is this same integer.
      scores[i] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[i]),
                          _mm256_mul_ps(scales, _mm256_set1_ps(rows[i]->scales[g])), scores[i]);
    }
  }
  for (int i = 0; i < kRows; ++i) _mm256_store_ps(out + i * kBlockScoreStride + j0, scores[i]);
}

// One row's probabilities of a block (written over its scores by SoftmaxBlockStep, 0 past its
// `filled` slots) as codes (paged_attention_q8.h): codes[j] for every slot of the block's
// `quads` fours, each in 16 bits as the value pass multiplies them (widened here once per row
// and block, not once per row, block and 8 dimensions: the widening had been the value pass's
// busiest instruction); returns their scale.
inline float BlockProbabilityCodes(const float* probabilities, const float* value_scales,
                                   int filled, int quads, uint16_t* codes) {
  float weights[kMaxAttentionBlockSize];
  __m256 maxes = _mm256_setzero_ps();  // a max is exact in any order
  for (int j = 0; j < filled; j += 8) {
    const __m256i lanes = LaneMask(filled - j);
    const __m256 w = _mm256_mul_ps(_mm256_maskload_ps(probabilities + j, lanes),
                                   _mm256_maskload_ps(value_scales + j, lanes));
    _mm256_storeu_ps(weights + j, w);
    maxes = _mm256_max_ps(maxes, w);
  }
  float inverse;
  const float scale = ProbabilityScale(HorizontalMax(maxes), &inverse);
  const __m256 inverse8 = _mm256_set1_ps(inverse);
  for (int j = 0; j < 4 * quads; j += 8) {
    const __m256i lanes = LaneMask(filled - j);  // none past filled
    const __m256i rounded = _mm256_cvtps_epi32(_mm256_mul_ps(
        _mm256_and_ps(_mm256_loadu_ps(weights + j), _mm256_castsi256_ps(lanes)), inverse8));
    // 8 codes in [0, 255]: packed to 16-bit words (saturating; they are in range), the first
    // four of each 128-bit half.
    const __m256i words = _mm256_packus_epi32(rounded, rounded);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + j), _mm256_castsi256_si128(words));
    if (j + 4 < 4 * quads) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + j + 4),
                       _mm256_extracti128_si256(words, 1));
    }
  }
  return scale;
}

constexpr int kValueRows = 4;  // query rows whose sums share each value load

// The value pass of one block for rows [r0, r0 + kRows) and dimensions [d0, d0 + 8) (`width`
// of them inside head_dim): acc[r][d] = fma(float(sum_j code[r][j] x v[j][d]), scale[r],
// acc[r][d]) over `quads` fours of slots. A lane of `low` and `high` holds the sum of two slots
// of one dimension (d0 + lane / 2 and d0 + 4 + lane / 2); they are added pairwise at the end.
template <int kRows>
void ValueTile(const uint8_t* value_codes, int head_dim, int quads, int width,
               const uint16_t (*codes)[kMaxAttentionBlockSize], const float* code_scales,
               float* const* out_rows, int d0) {
  const __m256i lanes = LaneMask(width);
  __m256i low[kRows], high[kRows];
  for (int i = 0; i < kRows; ++i) low[i] = high[i] = _mm256_setzero_si256();
  for (int quad = 0; quad < quads; ++quad) {
    // Dimensions d0 .. d0 + 7, four slots each: 32 signed codes, widened in two halves.
    const __m256i values = _mm256_maskload_epi32(
        reinterpret_cast<const int*>(value_codes + (static_cast<size_t>(quad) * head_dim + d0) * 4),
        lanes);
    const __m256i values_low = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(values));
    const __m256i values_high = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(values, 1));
    for (int i = 0; i < kRows; ++i) {
      const __m256i p = _mm256_broadcastq_epi64(_mm_loadl_epi64(
          reinterpret_cast<const __m128i*>(codes[i] + 4 * quad)));  // (p0, p1, p2, p3), repeated
      low[i] = _mm256_add_epi32(low[i], _mm256_madd_epi16(values_low, p));
      high[i] = _mm256_add_epi32(high[i], _mm256_madd_epi16(values_high, p));
    }
  }
  for (int i = 0; i < kRows; ++i) {
    // hadd: (d0, d1, d4, d5 | d2, d3, d6, d7); the permute puts them in order.
    const __m256i sums =
        _mm256_permute4x64_epi64(_mm256_hadd_epi32(low[i], high[i]), _MM_SHUFFLE(3, 1, 2, 0));
    float* acc = out_rows[i] + d0;
    StoreAcc(acc, width,
             _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(code_scales[i]),
                             LoadAcc(acc, width)));
  }
}

}  // namespace

// A run of consecutive tokens, as the f32/f16 AVX2 kernel's Attention: row r = t * group + g
// reads positions [0, first_position + t], in block b only its own filled slots.
void PagedAttentionQ8Avx2(const PagedKv& kv, int layer, int kv_head, const float* q,
                          int64_t q_stride, int group, std::span<const int32_t> block_table,
                          int first_position, int num_tokens, float scale, float* out,
                          int64_t out_stride, const AttentionBlocks& blocks,
                          const PreparedQueries& prepared) {
  const int head_dim = kv.head_dim;
  const int block_size = kv.block_size;
  AttentionRows state(q, q_stride, group, head_dim, first_position, num_tokens, out, out_stride);
  const int num_rows = state.num_rows;
  const int* filled = state.filled;
  QueryQ8 own_queries[kMaxAttentionRows];
  const QueryQ8* queries[kMaxAttentionRows];
  Q8QueryRows(prepared, state.q_rows, group, num_rows, head_dim, scale, QuantizeQueryQ8,
              own_queries, queries);
  alignas(32) float scores[kMaxAttentionRows][kBlockScoreStride];
  alignas(32) uint16_t codes[kMaxAttentionRows][kMaxAttentionBlockSize];
  float code_scales[kMaxAttentionRows];

  const int total_positions = first_position + num_tokens;  // of the last token
  const int num_blocks = (total_positions + block_size - 1) / block_size;
  const int end_block = std::min(num_blocks, blocks.end_block);
  for (int b = blocks.first_block; b < end_block; ++b) {
    const int first_row = state.EnterBlock(b, block_size);
    const int max_filled = filled[num_rows - 1];
    const uint8_t* k_plane = kv.Plane(block_table[b], layer, 0, kv_head);
    const uint8_t* v_plane = kv.Plane(block_table[b], layer, 1, kv_head);
    if (b + 1 < end_block) {
      PrefetchBlockPlanes(kv.Plane(block_table[b + 1], layer, 0, kv_head),
                          kv.Plane(block_table[b + 1], layer, 1, kv_head), kv.PlaneBytes(0));
    }
    const float* key_scales = Q8PlaneScales(kv, k_plane);
    for (int j0 = 0; j0 < max_filled; j0 += 8) {
      const int count = std::min(8, max_filled - j0);
      ForRowTiles<kScoreRows>(first_row, num_rows, [&](auto rows, int r0) {
        ScoreTile<decltype(rows)::value>(queries + r0, k_plane, key_scales, block_size, head_dim,
                                         j0, count, &scores[r0][0]);
      });
    }
    SoftmaxBlockStep(state, head_dim, first_row, &scores[0][0]);
    const int quads = (max_filled + 3) / 4;
    const float* value_scales = Q8PlaneScales(kv, v_plane);
    for (int r = first_row; r < num_rows; ++r) {
      code_scales[r] = BlockProbabilityCodes(scores[r], value_scales, filled[r], quads, codes[r]);
    }
    for (int d0 = 0; d0 < head_dim; d0 += 8) {
      const int width = std::min(8, head_dim - d0);
      ForRowTiles<kValueRows>(first_row, num_rows, [&](auto rows, int r0) {
        ValueTile<decltype(rows)::value>(v_plane, head_dim, quads, width, codes + r0,
                                         code_scales + r0, state.out_rows + r0, d0);
      });
    }
  }
  FinishRows(state, head_dim, blocks);
}

}  // namespace reprise::kernels
