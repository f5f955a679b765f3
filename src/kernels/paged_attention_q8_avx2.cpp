// PagedAttention over q8 K/V with AVX2 (compiled with those flags only for this file; chosen at
// run time). The f32/f16 kernel's softmax spans (SoftmaxSpanStep in attention_softmax_avx2.h)
// around the q8 integer sums (paged_attention_q8.h), without VNNI:
//
//   scores: per 8 slots and group of kKvQ8KeyGroup key dimensions, the exact integer sum of
//     key code x query code: the keys' bias taken off by an exclusive or, then VPMADDUBSW of the
//     keys' magnitudes (taken once per key load, for every query row of the tile) with the query
//     carrying the keys' signs (no product pair reaches the 16-bit limit: codes are within
//     +-127) and VPMADDWD to 32 bits; then s = fma(float(sum), key scale x query scale, s) over
//     the groups in order;
//   values: per softmax span (kQ8SoftmaxSpanPositions) and row, the probabilities times the value
//     scales as unsigned codes, their exact integer sums with the value codes over the whole
//     span (both widened to 16 bits, VPMADDWD, two slots per lane step), then
//     acc = fma(float(sum), the span's code scale, acc).
//
// Per span, not per block: a 16-slot block's step had each row take its maxima, correction,
// code scale and accumulators' conversion, load and store per 16 positions, a third of the
// kernel's time beside the integer sums.
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

static_assert(kQ8SoftmaxSpanPositions <= kSpanScoreStride);

constexpr int kScoreRows = 4;  // query rows whose dot products share each key load

// Scores of kRows query rows for kChunks chunks of 8 slots from j0 of a block (`count` slots;
// the lanes past it are computed from whatever is stored and never read):
// out[i * kSpanScoreStride + 8 c + s]. The float scores are kept in `out` between groups: the
// integer sums of 4 rows x 2 chunks and the keys take the registers.
template <int kRows, int kChunks>
inline void ScoreTile(const QueryQ8* const* rows, const uint8_t* key_codes, const float* key_scales,
                      int block_size, int head_dim, int j0, int count, float* out) {
  __m256i lanes[kChunks];
  for (int c = 0; c < kChunks; ++c) lanes[c] = LaneMask(count - 8 * c);
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  const int dwords = head_dim / 4;
  const int group_dwords = kKvQ8KeyGroup / 4;
  for (int g = 0; g * group_dwords < dwords; ++g) {
    const int begin = g * group_dwords;
    const int end = std::min(dwords, begin + group_dwords);
    __m256i sums[kRows][kChunks];
    for (int i = 0; i < kRows; ++i) {
      for (int c = 0; c < kChunks; ++c) sums[i][c] = _mm256_setzero_si256();
    }
    for (int e = begin; e < end; ++e) {
      __m256i keys[kChunks], magnitudes[kChunks];
      for (int c = 0; c < kChunks; ++c) {
        keys[c] = _mm256_xor_si256(
            _mm256_maskload_epi32(
                reinterpret_cast<const int*>(
                    key_codes + (static_cast<size_t>(e) * block_size + j0 + 8 * c) * 4),
                lanes[c]),
            bias);  // signed codes; masked-off lanes become -128, and stay unread
        magnitudes[c] = _mm256_abs_epi8(keys[c]);
      }
      for (int i = 0; i < kRows; ++i) {
        const __m256i query = _mm256_set1_epi32(rows[i]->codes[e]);
        for (int c = 0; c < kChunks; ++c) {
          const __m256i pairs =
              _mm256_maddubs_epi16(magnitudes[c], _mm256_sign_epi8(query, keys[c]));
          sums[i][c] = _mm256_add_epi32(sums[i][c], _mm256_madd_epi16(pairs, ones));
        }
      }
    }
    for (int c = 0; c < kChunks; ++c) {
      const __m256 scales = _mm256_maskload_ps(
          key_scales + static_cast<size_t>(g) * block_size + j0 + 8 * c, lanes[c]);
      for (int i = 0; i < kRows; ++i) {
        // The AVX-512 kernel's sum of biased keys plus the correction is this same integer.
        float* at = out + i * kSpanScoreStride + 8 * c;
        const __m256 before = g == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(at);
        _mm256_storeu_ps(
            at, _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[i][c]),
                                _mm256_mul_ps(scales, _mm256_set1_ps(rows[i]->scales[g])), before));
      }
    }
  }
}

// One row's probabilities of a span (written over its scores by SoftmaxSpanStep; its own `n`
// positions) as codes (paged_attention_q8.h), each in 16 bits as the value pass multiplies them:
// codes[j] for j < code_end (a multiple of 16), 0 from n on. The weights are written over the
// probabilities. Returns the codes' scale.
inline float SpanProbabilityCodes(float* probabilities, const float* value_scales, int n,
                                  int code_end, uint16_t* codes) {
  __m256 maxes = _mm256_setzero_ps();  // a max is exact in any order
  for (int j = 0; j < n; j += 8) {
    const __m256i lanes = LaneMask(n - j);
    const __m256 w = _mm256_mul_ps(_mm256_maskload_ps(probabilities + j, lanes),
                                   _mm256_maskload_ps(value_scales + j, lanes));
    _mm256_store_ps(probabilities + j, w);
    maxes = _mm256_max_ps(maxes, w);
  }
  float inverse;
  const float scale = ProbabilityScale(HorizontalMax(maxes), &inverse);
  const __m256 inverse8 = _mm256_set1_ps(inverse);
  const auto rounded = [&](int j) {
    const __m256 live = _mm256_castsi256_ps(LaneMask(n - j));  // none past n
    return _mm256_cvtps_epi32(
        _mm256_mul_ps(_mm256_and_ps(_mm256_load_ps(probabilities + j), live), inverse8));
  };
  for (int j = 0; j < code_end; j += 16) {
    // 16 codes in [0, 255], packed to 16-bit words (saturating; they are in range) per 128-bit
    // half, then put in order.
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packus_epi32(rounded(j), rounded(j + 8)),
                                                   _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_store_si256(reinterpret_cast<__m256i*>(codes + j), words);
  }
  return scale;
}

constexpr int kValueRows = 4;  // query rows whose sums share each value load

// The value pass of one span for rows [r0, r0 + kRows) and dimensions [d0, d0 + 8) (`width`
// of them inside head_dim): acc[r][d] = fma(float(sum_j code[r][j] x v[j][d]), scale[r],
// acc[r][d]), the integer sum over the span's blocks. A lane of `low` and `high` holds the sum
// of two slots of one dimension (d0 + lane / 2 and d0 + 4 + lane / 2); they are added pairwise
// at the end.
template <int kRows>
void ValueTile(const Q8ValueBlock* blocks, int num_blocks, int head_dim, int width,
               const uint16_t (*codes)[kSpanScoreStride], const float* code_scales,
               float* const* out_rows, int d0) {
  const __m256i lanes = LaneMask(width);
  __m256i low[kRows], high[kRows];
  for (int i = 0; i < kRows; ++i) low[i] = high[i] = _mm256_setzero_si256();
  for (int b = 0; b < num_blocks; ++b) {
    const uint8_t* plane = blocks[b].codes;
    const int column = blocks[b].column;
    for (int quad = 0; quad < blocks[b].quads; ++quad) {
      // Dimensions d0 .. d0 + 7, four slots each: 32 signed codes, widened in two halves.
      const __m256i values = _mm256_maskload_epi32(
          reinterpret_cast<const int*>(plane + (static_cast<size_t>(quad) * head_dim + d0) * 4),
          lanes);
      const __m256i values_low = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(values));
      const __m256i values_high = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(values, 1));
      for (int i = 0; i < kRows; ++i) {
        const __m256i p = _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(
            codes[i] + column + 4 * quad)));  // (p0, p1, p2, p3), repeated
        low[i] = _mm256_add_epi32(low[i], _mm256_madd_epi16(values_low, p));
        high[i] = _mm256_add_epi32(high[i], _mm256_madd_epi16(values_high, p));
      }
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
  alignas(32) float scores[kMaxAttentionRows][kSpanScoreStride];    // the span's, by position
  alignas(32) uint16_t codes[kMaxAttentionRows][kSpanScoreStride];  // its probabilities
  alignas(32) float span_value_scales[kSpanScoreStride];            // by position in the span
  float code_scales[kMaxAttentionRows];
  Q8ValueBlock value_blocks[kSpanScoreStride / 4];  // blocks of 4 slots at the least
  // Blocks of 4 or 8 slots share chunks of 16 (ShareQ8BlockKeys), scored when their last block
  // is in: one block per tile had left half of the 4-slot blocks' lanes empty and given 8-slot
  // blocks one chunk per tile, where two share each query broadcast.
  const int blocks_per_chunk = Q8BlocksPerSharedChunk(block_size);
  Q8SharedChunks shared;
  int chunk_row = 0;  // rows [chunk_row, num_rows) reach the shared chunk's first block

  // Positions [0, first_position + num_tokens): the last token's.
  const int end_block = blocks.EndFor(first_position + num_tokens, block_size);
  const int span_blocks = SoftmaxSpanBlocks(kQ8SoftmaxSpanPositions, block_size);
  // The first two blocks asked for at once: each block asks for the next one while it is
  // scored, and the first has none before it (a decoding token after 2,048 positions, run on
  // Zen 5, 2 threads: 1.06x as fast; the f16/f32 AVX2 kernel measured no change).
  for (int b = blocks.first_block; b < std::min(end_block, blocks.first_block + 2); ++b) {
    PrefetchBlockPlanes(kv.Plane(block_table[b], layer, 0, kv_head),
                        kv.Plane(block_table[b], layer, 1, kv_head), kv.PlaneBytes(0));
  }
  for (int span_first = blocks.first_block; span_first < end_block;) {
    const SoftmaxSpan span = SoftmaxSpanFrom(span_first, end_block, block_size, span_blocks);
    const int first_row = state.EnterBlock(span_first, block_size);
    for (int b = span_first; b < span.end_block; ++b) {
      const int block_row = state.EnterBlock(b, block_size);
      const int max_filled = filled[num_rows - 1];
      const int column = (b - span_first) * block_size;
      const uint8_t* k_plane = kv.Plane(block_table[b], layer, 0, kv_head);
      const uint8_t* v_plane = kv.Plane(block_table[b], layer, 1, kv_head);
      if (b + 1 < end_block) {
        PrefetchBlockPlanes(kv.Plane(block_table[b + 1], layer, 0, kv_head),
                            kv.Plane(block_table[b + 1], layer, 1, kv_head), kv.PlaneBytes(0));
      }
      const float* key_scales = Q8PlaneScales(kv, k_plane);
      if (blocks_per_chunk > 1) {
        const int chunk = (b - span_first) / blocks_per_chunk;
        const int lane = (b - span_first) % blocks_per_chunk * block_size;
        ShareQ8BlockKeys(k_plane, key_scales, block_size, head_dim, lane, shared, chunk);
        if (lane == 0) chunk_row = block_row;
        // Blocks fill a chunk in order; only the longest row's last one is partial.
        if (lane + block_size == kQ8SharedChunkSlots || b + 1 == span.end_block) {
          const int count = lane + max_filled;
          ForRowTiles<kScoreRows>(chunk_row, num_rows, [&](auto rows, int r0) {
            constexpr int kRows = decltype(rows)::value;
            float* tile_out = &scores[r0][column - lane];
            if (count > 8) {
              ScoreTile<kRows, 2>(queries + r0, shared.codes[chunk], shared.scales[chunk],
                                  kQ8SharedChunkSlots, head_dim, 0, count, tile_out);
            } else {
              ScoreTile<kRows, 1>(queries + r0, shared.codes[chunk], shared.scales[chunk],
                                  kQ8SharedChunkSlots, head_dim, 0, count, tile_out);
            }
          });
        }
      } else {
        for (int j0 = 0; j0 < max_filled; j0 += 16) {
          const int count = std::min(16, max_filled - j0);
          ForRowTiles<kScoreRows>(block_row, num_rows, [&](auto rows, int r0) {
            constexpr int kRows = decltype(rows)::value;
            float* tile_out = &scores[r0][column + j0];
            if (count > 8) {
              ScoreTile<kRows, 2>(queries + r0, k_plane, key_scales, block_size, head_dim, j0,
                                  count, tile_out);
            } else {
              ScoreTile<kRows, 1>(queries + r0, k_plane, key_scales, block_size, head_dim, j0,
                                  count, tile_out);
            }
          });
        }
      }
      value_blocks[b - span_first] = {v_plane, (max_filled + 3) / 4, column};
      std::copy_n(Q8PlaneScales(kv, v_plane), max_filled, span_value_scales + column);
    }
    SoftmaxSpanStep(state, head_dim, first_row, span, &scores[0][0]);
    // Codes up to the longest row's last quad (block columns are multiples of 4), in 16s.
    const int code_end = (state.PositionsIn(span, num_rows - 1) + 15) / 16 * 16;
    for (int r = first_row; r < num_rows; ++r) {
      code_scales[r] = SpanProbabilityCodes(scores[r], span_value_scales,
                                            state.PositionsIn(span, r), code_end, codes[r]);
    }
    const int span_blocks_here = span.end_block - span_first;
    for (int d0 = 0; d0 < head_dim; d0 += 8) {
      const int width = std::min(8, head_dim - d0);
      ForRowTiles<kValueRows>(first_row, num_rows, [&](auto rows, int r0) {
        ValueTile<decltype(rows)::value>(value_blocks, span_blocks_here, head_dim, width,
                                         codes + r0, code_scales + r0, state.out_rows + r0, d0);
      });
    }
    span_first = span.end_block;
  }
  FinishRows(state, head_dim, blocks);
}

}  // namespace reprise::kernels
