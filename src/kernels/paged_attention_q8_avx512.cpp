// PagedAttention over q8 K/V with AVX-512 VNNI (compiled with those flags only for this file;
// chosen at run time). The f32/f16 kernel's spans and online softmax around integer dot
// products:
//
//   scores: per 16 slots and group of kKvQ8KeyGroup key dimensions, the exact integer sum of the
//     keys' unsigned codes times the query's signed codes (VPDPBUSD, four dimensions per lane
//     step, the query's correction taking back the keys' +128 bias), then
//     s = fma(float(sum), key scale x query scale, s) over the groups in order;
//   values: per softmax span (kQ8SoftmaxSpanPositions) and row, the probabilities times the value
//     scales as unsigned codes, made by the softmax step itself (SpanSoftmaxCodes), their exact
//     integer sums with the value codes, four slots per lane step, then
//     acc = fma(float(sum), the span's code scale, acc).
//
// Integer sums are the same in any order and with any number of zero terms, so a row's bits do
// not depend on the rows it shares a tile with or on slots past its own (their codes are 0).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/attention_softmax_avx512.h"
#include "kernels/paged_attention.h"
#include "kernels/paged_attention_internal.h"
#include "kernels/paged_attention_q8.h"
#include "kernels/simd.h"

namespace reprise::kernels {

namespace {

// QuantizeQueryQ8 (paged_attention_q8.h) with 16 dimensions per step: the same codes, scales
// and corrections (the conversion rounds to nearest even, as RoundedCode does).
inline void QuantizeQuery(const float* q, int head_dim, float attention_scale, QueryQ8* out) {
  static_assert(kKvQ8KeyGroup == 32, "a group is two vectors of 16");
  for (int g = 0; g * kKvQ8KeyGroup < head_dim; ++g) {
    const int begin = g * kKvQ8KeyGroup;
    const __mmask16 low = ChunkMask(head_dim, begin);
    const __mmask16 high =
        begin + 16 < head_dim ? ChunkMask(head_dim, begin + 16) : static_cast<__mmask16>(0);
    const __m512 x0 = _mm512_maskz_loadu_ps(low, q + begin);
    const __m512 x1 = _mm512_maskz_loadu_ps(high, q + begin + 16);
    const Q8Scale q8 =
        ScaleOfMagnitude(_mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1))));
    const __m512 inverse = _mm512_set1_ps(q8.inverse);
    auto codes = [&](__m512 x) {
      const __m512 scaled = _mm512_mul_ps(x, inverse);
      const __m512 clamped =
          _mm512_min_ps(_mm512_max_ps(scaled, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
      return _mm512_cvtps_epi32(clamped);
    };
    const __m512i c0 = codes(x0);
    const __m512i c1 = codes(x1);
    auto* bytes = reinterpret_cast<int8_t*>(out->codes) + begin;
    _mm512_mask_cvtsepi32_storeu_epi8(bytes, low, c0);
    _mm512_mask_cvtsepi32_storeu_epi8(bytes + 16, high, c1);
    out->scales[g] = q8.scale * attention_scale;
    out->corrections[g] = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1));
  }
}

static_assert(kQ8SoftmaxSpanPositions <= kScoreStride);

constexpr int kScoreRows = 4;  // query rows whose dot products share each key load

// Up to 16 key slots of one block: slots [j0, j0 + 16) under `mask`, whose scores go to column
// `column` of the span's score rows.
struct KeyChunk {
  const uint8_t* codes;  // the block's key plane
  const float* scales;   // its key scales
  int j0;
  int column;
  __mmask16 mask;
};

// Scores of kRows query rows for kChunks chunks of key slots: out[i * kScoreStride + column + s]
// for each row i. Each query code broadcast feeds one dot product per chunk, so two chunks halve
// the broadcasts per dot product (the loads, not the dot products, bound one chunk at a time).
template <int kRows, int kChunks>
inline void ScoreTileQ8(const QueryQ8* const* rows, const KeyChunk* chunks, int block_size,
                        int head_dim, float* out) {
  const int dwords = head_dim / 4;
  const int group_dwords = kKvQ8KeyGroup / 4;
  __m512 scores[kRows][kChunks];
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChunks; ++c) scores[i][c] = _mm512_setzero_ps();
  }
  for (int g = 0; g * group_dwords < dwords; ++g) {
    const int begin = g * group_dwords;
    const int end = std::min(dwords, begin + group_dwords);
    __m512i sums[kRows][kChunks];
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 16
      for (int c = 0; c < kChunks; ++c) sums[i][c] = _mm512_set1_epi32(rows[i]->corrections[g]);
    }
    const auto dword = [&](int e) {
      __m512i keys[kChunks];
#pragma GCC unroll 16
      for (int c = 0; c < kChunks; ++c) {
        keys[c] = _mm512_maskz_loadu_epi32(
            chunks[c].mask,
            chunks[c].codes + (static_cast<size_t>(e) * block_size + chunks[c].j0) * 4);
      }
#pragma GCC unroll 16
      for (int i = 0; i < kRows; ++i) {
        const __m512i query = _mm512_set1_epi32(rows[i]->codes[e]);
#pragma GCC unroll 16
        for (int c = 0; c < kChunks; ++c) {
          sums[i][c] = DotBytes(sums[i][c], keys[c], query);
        }
      }
    };
    // A whole group's dwords unrolled (a constant trip count: no loop control between the dot
    // products); a head dimension's last partial group takes the loop.
    if (end - begin == kKvQ8KeyGroup / 4) {
#pragma GCC unroll 8
      for (int e = 0; e < kKvQ8KeyGroup / 4; ++e) dword(begin + e);
    } else {
      for (int e = begin; e < end; ++e) dword(e);
    }
    __m512 key_scales[kChunks];
#pragma GCC unroll 16
    for (int c = 0; c < kChunks; ++c) {
      key_scales[c] = _mm512_maskz_loadu_ps(
          chunks[c].mask, chunks[c].scales + static_cast<size_t>(g) * block_size + chunks[c].j0);
    }
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) {
      const __m512 query_scale = _mm512_set1_ps(rows[i]->scales[g]);
#pragma GCC unroll 16
      for (int c = 0; c < kChunks; ++c) {
        scores[i][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[i][c]),
                                       _mm512_mul_ps(key_scales[c], query_scale), scores[i][c]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChunks; ++c) {
      _mm512_mask_storeu_ps(out + i * kScoreStride + chunks[c].column, chunks[c].mask,
                            scores[i][c]);
    }
  }
}

// The probabilities are ExpOfDifference<4>'s (attention_softmax_avx512.h): enough for 8-bit
// codes, and the degree-5 polynomial took 1-2% longer over the kernel (Zen 5).
// exp(x), x = -inf included (a running max before the first span): below -104, 0. Where an
// argument may be infinite; -inf - -inf would make ExpOfDifference's f a NaN.
inline __m512 ExpOrZero(__m512 x) {
  return ExpOfDifference<4>(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_setzero_ps());
}

// ln(x) for x >= 0 to about 1e-5 (relative to ln 2): x = 2^e m with m in [1, 2), and
// ln m = 2 atanh(z), z = (m - 1) / (m + 1) in [0, 1/3), by four terms of its series. 0 gives
// -inf, inf gives inf. Only where a code's scale is estimated: see SpanSoftmaxCodes.
inline __m512 LogScale(__m512 x) {
  const __m512 e = _mm512_getexp_ps(x);
  const __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 z = _mm512_div_ps(_mm512_sub_ps(m, one), _mm512_add_ps(m, one));
  const __m512 z2 = _mm512_mul_ps(z, z);
  __m512 p = _mm512_set1_ps(2.0f / 7.0f);
  p = _mm512_fmadd_ps(p, z2, _mm512_set1_ps(2.0f / 5.0f));
  p = _mm512_fmadd_ps(p, z2, _mm512_set1_ps(2.0f / 3.0f));
  p = _mm512_fmadd_ps(p, z2, _mm512_set1_ps(2.0f));
  return _mm512_fmadd_ps(e, _mm512_set1_ps(0.693147180559945309f), _mm512_mul_ps(p, z));
}

// The online-softmax step of rows [first_row, num_rows) over one span (the f32/f16 kernel's
// SoftmaxSpanStep), with the probabilities coded for the value pass as they are made. Row r's
// own positions in the span are its first n = state.PositionsIn(span, r); with
// m its largest score there, M its running max before the span and M' = max(M, m):
//   w[j]       = exp(s[j] - m) x value scale[j] (the row's largest score at 1);
//   codes[j]   = round(w[j] x 255 / W), and 0 from n on: ProbabilityScale's rule, with the
//                largest weight W = exp(max_j (s[j] + ln value scale[j]) - m) found by the
//                pass that finds m, so that the codes need no second pass over the weights (an
//                estimate off by ~1e-5 at most: a code past 255 by that saturates to 255);
//   code scale = exp(m - M') x W / 255, the factor of the codes' integer sums with the values;
//   sum        = sum x exp(M - M') + exp(m - M') x sum_j exp(s[j] - m);  acc x= exp(M - M').
// Exps relative to m, not M', leave each row three exps of its own per span (taken 16 rows at
// a time), and a row's bits depend on its own positions only. `value_scales`: the span's, by
// position. `fresh`: the call's first span, whose value pass writes the out rows over (no acc to
// rescale yet).
inline void SpanSoftmaxCodes(AttentionRows& state, int head_dim, int first_row,
                             const SoftmaxSpan& span, float (*scores)[kScoreStride],
                             const float* value_scales, uint8_t (*codes)[kScoreStride],
                             float* code_scales, bool fresh) {
  const int num_rows = state.num_rows;
  alignas(64) float log_scales[kScoreStride];  // ln value scale, by position
  const int longest = state.PositionsIn(span, num_rows - 1);
  for (int j = 0; j < longest; j += 16) {
    const __mmask16 mask = ChunkMask(longest, j);
    _mm512_store_ps(log_scales + j, LogScale(_mm512_maskz_loadu_ps(mask, value_scales + j)));
  }
  int n[kMaxAttentionRows];
  alignas(64) float row_max[kMaxAttentionRows + 16];
  alignas(64) float weight_max[kMaxAttentionRows + 16];  // max_j (s[j] + ln value scale[j])
  for (int r = first_row; r < num_rows; ++r) {
    n[r] = state.PositionsIn(span, r);
    const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __m512 maxes = minus_inf;  // a max is exact in any order
    __m512 weight_maxes = minus_inf;
    int j = 0;
    for (; j + 16 <= n[r]; j += 16) {  // whole chunks: no masks (a max is exact in any order)
      const __m512 score = _mm512_loadu_ps(scores[r] + j);
      maxes = _mm512_max_ps(maxes, score);
      weight_maxes =
          _mm512_max_ps(weight_maxes, _mm512_add_ps(score, _mm512_load_ps(log_scales + j)));
    }
    for (; j < n[r]; j += 16) {
      const __mmask16 mask = ChunkMask(n[r], j);
      const __m512 score = _mm512_mask_loadu_ps(minus_inf, mask, scores[r] + j);
      maxes = _mm512_max_ps(maxes, score);
      // Masked: a slot past the row's own (an infinite scale's +inf there) never enters.
      weight_maxes = _mm512_max_ps(
          weight_maxes, _mm512_mask_add_ps(minus_inf, mask, score, _mm512_load_ps(log_scales + j)));
    }
    row_max[r] = _mm512_reduce_max_ps(maxes);
    weight_max[r] = _mm512_reduce_max_ps(weight_maxes);
  }
  // Each row's exp(M - M'), exp(m - M') and W, 16 rows per exp (the same lane operations as one
  // row's, so the same values), off each row's own chain of dependent steps.
  alignas(64) float corrections[kMaxAttentionRows + 16];
  alignas(64) float peaks[kMaxAttentionRows + 16];
  alignas(64) float largest_weights[kMaxAttentionRows + 16];
  for (int r = first_row; r < num_rows; r += 16) {
    const __mmask16 mask = ChunkMask(num_rows - r, 0);
    const __m512 old_max = _mm512_maskz_loadu_ps(mask, state.running_max + r);
    const __m512 m = _mm512_maskz_loadu_ps(mask, row_max + r);
    const __m512 new_max = _mm512_max_ps(old_max, m);
    _mm512_mask_storeu_ps(state.running_max + r, mask, new_max);
    _mm512_store_ps(corrections + (r - first_row),
                    ExpOrZero(_mm512_maskz_sub_ps(mask, old_max, new_max)));
    _mm512_store_ps(peaks + (r - first_row), ExpOrZero(_mm512_maskz_sub_ps(mask, m, new_max)));
    const __m512 top = _mm512_maskz_loadu_ps(mask, weight_max + r);
    _mm512_store_ps(largest_weights + (r - first_row),
                    ExpOrZero(_mm512_maskz_sub_ps(mask, top, m)));
  }
  for (int r = first_row; r < num_rows; ++r) {
    float inverse;
    const float weight_scale = ProbabilityScale(largest_weights[r - first_row], &inverse);
    const __m512 code_inverse = _mm512_set1_ps(inverse);
    const __m512 m_log2e = _mm512_set1_ps(row_max[r] * 1.44269504088896341f);
    __m512 sums = _mm512_setzero_ps();
    const bool whole_span = n[r] == span.length && span.length % 64 == 0;
    if (whole_span) {
      // A row over the whole span (every row but the last tokens' in the last one): the same
      // operations unmasked, and four chunks' codes packed into one store (the packing
      // saturates a code past 255 to 255, as the unsigned conversion below does).
      const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
      for (int j = 0; j < span.length; j += 64) {
        __m512i chunk_codes[4];
        for (int q = 0; q < 4; ++q) {
          const float* at = scores[r] + j + 16 * q;
          const __m512 u = ExpOfDifference<4>(_mm512_loadu_ps(at), m_log2e);
          sums = _mm512_add_ps(sums, u);
          const __m512 weights = _mm512_mul_ps(u, _mm512_load_ps(value_scales + j + 16 * q));
          chunk_codes[q] = _mm512_cvtps_epi32(_mm512_mul_ps(weights, code_inverse));
        }
        // Per 128-bit lane l, packing leaves chunk q's codes 4 l .. 4 l + 3 in dword 4 l + q.
        const __m512i packed =
            _mm512_packus_epi16(_mm512_packus_epi32(chunk_codes[0], chunk_codes[1]),
                                _mm512_packus_epi32(chunk_codes[2], chunk_codes[3]));
        _mm512_storeu_si512(codes[r] + j, _mm512_permutexvar_epi32(order, packed));
      }
    }
    for (int j = whole_span ? span.length : 0; j < span.length; j += 16) {
      const __mmask16 valid = j < n[r] ? ChunkMask(n[r], j) : static_cast<__mmask16>(0);
      const __m512 u = _mm512_maskz_mov_ps(
          valid, ExpOfDifference<4>(_mm512_maskz_loadu_ps(valid, scores[r] + j), m_log2e));
      sums = _mm512_add_ps(sums, u);
      const __m512 weights = _mm512_mul_ps(u, _mm512_maskz_loadu_ps(valid, value_scales + j));
      _mm512_mask_cvtusepi32_storeu_epi8(
          codes[r] + j, ChunkMask(span.length, j),
          _mm512_maskz_cvtps_epi32(valid, _mm512_mul_ps(weights, code_inverse)));
    }
    const float correction = corrections[r - first_row];
    const float peak = peaks[r - first_row];
    state.running_sum[r] = state.running_sum[r] * correction + peak * HorizontalSum(sums);
    code_scales[r] = peak * weight_scale;
    if (fresh || correction == 1.0f) continue;  // no acc yet, or the max held: acc as it is
    float* acc = state.out_rows[r];
    const __m512 c = _mm512_set1_ps(correction);
    for (int d = 0; d < head_dim; d += 16) {
      const __mmask16 mask = ChunkMask(head_dim, d);
      _mm512_mask_storeu_ps(acc + d, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, acc + d), c));
    }
  }
}

constexpr int kValueRows = 4;    // query rows x
constexpr int kValueChunks = 4;  //   16-wide chunks of V accumulated in registers

// The value pass of one span for rows [r0, r0 + kRows) and dimensions [d0, d0 + 64) (chunks
// under `masks`): acc[r][d] = fma(float(sum_j code[r][j] x v[j][d]), scale[r], acc[r][d]), the
// integer sum over the span's blocks, four slots per step. kFresh: the call's first span, acc
// taken as 0 rather than read (the same operations on the value the zeroed rows held).
template <int kRows, bool kFresh>
void ValueTileQ8(const Q8ValueBlock* blocks, int num_blocks, int head_dim,
                 const __mmask16 (&masks)[kValueChunks], const uint8_t* codes, size_t code_stride,
                 const float* code_scales, float* const* out_rows, int d0) {
  __m512i sums[kRows][kValueChunks];
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kValueChunks; ++c) sums[i][c] = _mm512_setzero_si512();
  }
  for (int b = 0; b < num_blocks; ++b) {
    for (int quad = 0; quad < blocks[b].quads; ++quad) {
      const uint8_t* row = blocks[b].codes + (static_cast<size_t>(quad) * head_dim + d0) * 4;
      __m512i values[kValueChunks];
#pragma GCC unroll 16
      for (int c = 0; c < kValueChunks; ++c) {
        values[c] = _mm512_maskz_loadu_epi32(masks[c], row + 64 * c);
      }
      const uint8_t* four_codes = codes + blocks[b].column + 4 * quad;
#pragma GCC unroll 16
      for (int i = 0; i < kRows; ++i) {
        int32_t four;
        std::memcpy(&four, four_codes + i * code_stride, sizeof(four));
        const __m512i p = _mm512_set1_epi32(four);
#pragma GCC unroll 16
        for (int c = 0; c < kValueChunks; ++c) {
          sums[i][c] = DotBytes(sums[i][c], p, values[c]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
    const __m512 scale = _mm512_set1_ps(code_scales[i]);
    float* acc = out_rows[i] + d0;
#pragma GCC unroll 16
    for (int c = 0; c < kValueChunks; ++c) {
      if (masks[c] == 0) continue;
      const __m512 old =
          kFresh ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(masks[c], acc + 16 * c);
      _mm512_mask_storeu_ps(acc + 16 * c, masks[c],
                            _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[i][c]), scale, old));
    }
  }
}

}  // namespace

void PrepareQueriesQ8Avx512(const float* q, int num_heads, int head_dim, float attention_scale,
                            QueryQ8* out) {
  for (int h = 0; h < num_heads; ++h) {
    QuantizeQuery(q + static_cast<int64_t>(h) * head_dim, head_dim, attention_scale, &out[h]);
  }
}

// A run of consecutive tokens, as the f32/f16 kernel's Attention (paged_attention_avx512.cpp):
// row r = t * group + g reads positions [0, first_position + t], in block b only its own filled
// slots. Rows of a span are tiled from the span's first row: a row past its own positions
// computes scores it never reads and adds value codes of 0.
void PagedAttentionQ8Avx512(const PagedKv& kv, int layer, int kv_head, const float* q,
                            int64_t q_stride, int group, std::span<const int32_t> block_table,
                            int first_position, int num_tokens, float scale, float* out,
                            int64_t out_stride, const AttentionBlocks& blocks,
                            const PreparedQueries& prepared) {
  const int head_dim = kv.head_dim;
  const int block_size = kv.block_size;
  // The out rows are written over by the first span rather than zeroed first: a split's partial
  // accumulators were last touched a layer before, and zeroing them first waited on each line
  // (a warm turn's attention, 160 tokens over 2,200 positions, 2 threads: 1.5% less time).
  // The same bits: the first span's multiply-adds take 0 where they read the zeroed rows.
  AttentionRows state(q, q_stride, group, head_dim, first_position, num_tokens, out, out_stride,
                      OutRows::kWrittenByFirstSpan);
  const int num_rows = state.num_rows;
  QueryQ8 own_queries[kMaxAttentionRows];
  const QueryQ8* queries[kMaxAttentionRows];
  Q8QueryRows(prepared, state.q_rows, group, num_rows, head_dim, scale, QuantizeQuery, own_queries,
              queries);
  float scores[kMaxAttentionRows][kScoreStride];               // [num_rows][span positions]
  alignas(64) uint8_t codes[kMaxAttentionRows][kScoreStride];  // the span's probabilities
  float code_scales[kMaxAttentionRows];
  constexpr int kMaxSpanChunks = kScoreStride / 4;  // blocks of 4 slots at the least
  KeyChunk chunks[kMaxSpanChunks];
  // Blocks of 4 or 8 slots share chunks of 16 (ShareQ8BlockKeys), where one block per chunk left
  // half or three quarters of every dot product's lanes empty.
  const int blocks_per_chunk = Q8BlocksPerSharedChunk(block_size);
  Q8SharedChunks shared;
  const int chunk_stride = blocks_per_chunk > 1 ? kQ8SharedChunkSlots : block_size;
  alignas(64) float span_value_scales[kScoreStride];  // by position in the span
  Q8ValueBlock value_blocks[kMaxSpanChunks];

  // Positions [0, first_position + num_tokens): the last token's.
  const int end_block = blocks.EndFor(first_position + num_tokens, block_size);
  const size_t key_plane_bytes = kv.PlaneBytes(0);  // the larger plane
  const int span_blocks = SoftmaxSpanBlocks(kQ8SoftmaxSpanPositions, block_size);
  // The first span's blocks asked for at once (each later span asks for the next one's): read
  // one after another as the span needs them, each scattered plane paid its own trip to memory.
  for (int b = blocks.first_block; b < std::min(end_block, blocks.first_block + span_blocks); ++b) {
    PrefetchBlockPlanes(kv.Plane(block_table[b], layer, 0, kv_head),
                        kv.Plane(block_table[b], layer, 1, kv_head), key_plane_bytes);
  }
  // Rows that reach none of the call's positions keep acc 0 (a split past a query's own).
  const int first_reaching_row =
      blocks.first_block < end_block ? state.EnterBlock(blocks.first_block, block_size) : num_rows;
  for (int r = 0; r < first_reaching_row; ++r) {
    std::fill(state.out_rows[r], state.out_rows[r] + head_dim, 0.0f);
  }
  for (int span_first = blocks.first_block; span_first < end_block;) {
    const SoftmaxSpan span = SoftmaxSpanFrom(span_first, end_block, block_size, span_blocks);
    const int first_row = state.EnterBlock(span_first, block_size);
    const bool fresh = span_first == blocks.first_block;
    // The span's key chunks and value blocks, up to the slots its longest row reads.
    int num_chunks = 0;
    const int span_blocks_here = span.end_block - span_first;
    for (int b = span_first; b < span.end_block; ++b) {
      state.EnterBlock(b, block_size);
      const int max_filled = state.filled[num_rows - 1];
      const int column = (b - span_first) * block_size;
      const uint8_t* k_plane = kv.Plane(block_table[b], layer, 0, kv_head);
      const uint8_t* v_plane = kv.Plane(block_table[b], layer, 1, kv_head);
      if (blocks_per_chunk > 1) {
        const int chunk = (b - span_first) / blocks_per_chunk;
        const int lane = (b - span_first) % blocks_per_chunk * block_size;
        ShareQ8BlockKeys(k_plane, Q8PlaneScales(kv, k_plane), block_size, head_dim, lane, shared,
                         chunk);
        if (lane == 0) {
          chunks[num_chunks++] = {shared.codes[chunk], shared.scales[chunk], 0, column,
                                  ChunkMask(max_filled, 0)};
        } else {  // blocks fill a chunk in order; only the longest row's last one is partial
          chunks[num_chunks - 1].mask = ChunkMask(lane + max_filled, 0);
        }
      } else {
        for (int j0 = 0; j0 < max_filled; j0 += 16) {
          chunks[num_chunks++] = {k_plane, Q8PlaneScales(kv, k_plane), j0, column + j0,
                                  ChunkMask(max_filled, j0)};
        }
      }
      value_blocks[b - span_first] = {v_plane, (max_filled + 3) / 4, column};
      std::copy_n(Q8PlaneScales(kv, v_plane), block_size, span_value_scales + column);
    }
    // The next span's blocks asked for while this one is scored (the planes are small: a burst).
    for (int b = span.end_block; b < std::min(end_block, span.end_block + span_blocks); ++b) {
      PrefetchBlockPlanes(kv.Plane(block_table[b], layer, 0, kv_head),
                          kv.Plane(block_table[b], layer, 1, kv_head), key_plane_bytes);
    }
    ForRowTiles<kScoreRows>(first_row, num_rows, [&](auto rows, int r0) {
      constexpr int kRows = decltype(rows)::value;
      float* tile_out = &scores[r0][0];
      int c = 0;
      for (; c + 2 <= num_chunks; c += 2) {
        ScoreTileQ8<kRows, 2>(queries + r0, chunks + c, chunk_stride, head_dim, tile_out);
      }
      if (c < num_chunks) {
        ScoreTileQ8<kRows, 1>(queries + r0, chunks + c, chunk_stride, head_dim, tile_out);
      }
    });
    SpanSoftmaxCodes(state, head_dim, first_row, span, scores, span_value_scales, codes,
                     code_scales, fresh);
    for (int d0 = 0; d0 < head_dim; d0 += 16 * kValueChunks) {
      __mmask16 masks[kValueChunks];
      for (int c = 0; c < kValueChunks; ++c) {
        const int d = d0 + 16 * c;
        masks[c] = d < head_dim ? ChunkMask(head_dim, d) : static_cast<__mmask16>(0);
      }
      ForRowTiles<kValueRows>(first_row, num_rows, [&](auto rows, int r0) {
        if (fresh) {
          ValueTileQ8<decltype(rows)::value, true>(value_blocks, span_blocks_here, head_dim, masks,
                                                   codes[r0], sizeof(codes[0]), code_scales + r0,
                                                   state.out_rows + r0, d0);
        } else {
          ValueTileQ8<decltype(rows)::value, false>(value_blocks, span_blocks_here, head_dim, masks,
                                                    codes[r0], sizeof(codes[0]), code_scales + r0,
                                                    state.out_rows + r0, d0);
        }
      });
    }
    span_first = span.end_block;
  }
  FinishRows(state, head_dim, blocks);
}

}  // namespace reprise::kernels
