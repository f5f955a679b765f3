// PagedAttention with AVX2 + FMA + F16C (compiled with those flags only for this file; chosen at
// run time; q8 K/V: paged_attention_q8_avx2.cpp). The AVX-512 kernel's spans at 8 lanes, with a
// score sum of its own:
//
//   for each softmax span (kSoftmaxSpanPositions positions in whole blocks) in order:
//     s[r][j] = scale * sum_d q[r][d] * k[j][d], one chain of fused multiply-adds in the order of
//     d, 8 slots j per vector from the keys, stored transposed ([head_dim][block_size]) m' = max(m,
//     max_j s);  c = exp(m - m');  l = l * c + sum_j exp(s - m') (the sum lane-wise over 8-slot
//     chunks, then HorizontalSum; both exps by ExpNonPositive) acc[r] = acc[r] * c;  then for j in
//     order: acc[r] = fma(exp(s[r][j] - m'), v[j], acc[r])
//   out = acc * (1 / l)
//
// One chain per slot, where the AVX-512 kernel keeps two (even and odd d): a tile of 4 query rows
// then scores 16 slots (two vectors) with 8 independent chains and one broadcast of each query
// element for both vectors, which the 16 registers would not hold at two chains each. A query row
// (head g of token t of a run) reads only its own positions, so its bits are the same alone or in a
// run of tokens (PagedAttentionTokens). They differ from the other targets'.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/attention_softmax_avx2.h"
#include "kernels/paged_attention.h"
#include "kernels/paged_attention_internal.h"
#include "kernels/reduce_avx2.h"
#include "kernels/simd.h"

namespace reprise::kernels {

namespace {

using namespace avx2;  // the AVX2 softmax and row helpers (attention_softmax_avx2.h)

// min(8, n) elements of a stored K or V row from `offset` as f32, zeros in the other lanes.
template <KvType kType>
inline __attribute__((always_inline)) __m256 LoadRow(const uint8_t* row, int offset, int n) {
  if constexpr (kType == KvType::kF32) {
    const float* p = reinterpret_cast<const float*>(row) + offset;
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, LaneMask(n));
  } else {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + offset;
    if (n >= 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    alignas(16) uint16_t tail[8] = {};
    std::memcpy(tail, p, static_cast<size_t>(n) * sizeof(uint16_t));
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tail)));
  }
}

// Slots whose scores a tile computes together: two 8-lane chunks.
constexpr int kTileSlots = 16;

// Keys of up to kTileSlots slots from j0 on, widened to f32 rows: kt[d][s] = k[j0 + s][d] for
// s < count, 0 for the other slots of the chunks read (never read from storage). Keys are stored
// transposed (PagedKv), so this is a plain copy or widening, done once when several row tiles
// read the same keys.
//   k_plane: [head_dim][block_size] stored keys; kt: [head_dim][kTileSlots]
template <KvType kType>
inline void WidenKeys(const uint8_t* k_plane, size_t column_bytes, int j0, int count, int head_dim,
                      float* kt) {
  for (int d = 0; d < head_dim; ++d) {
    const uint8_t* column = k_plane + d * column_bytes;
    _mm256_store_ps(kt + d * kTileSlots, LoadRow<kType>(column, j0, count));
    if (count > 8)
      _mm256_store_ps(kt + d * kTileSlots + 8, LoadRow<kType>(column, j0 + 8, count - 8));
  }
}

// The keys of blocks [first_block, first_block + blocks) of fewer than kTileSlots slots each,
// widened side by side into the lanes of one tile (kt[d][s], the longest row's `count` slots, 0
// in the others), after asking for the next tile's blocks. A tile per block left lanes empty,
// and keys of fewer than 8 slots were read through a copy per key dimension. Not inlined, so
// that the kernel's paths for larger blocks compile as they did.
template <KvType kType>
__attribute__((noinline)) void WidenSharedTile(const PagedKv& kv, int layer, int kv_head,
                                               std::span<const int32_t> block_table,
                                               int first_block, int blocks, int count,
                                               int end_block, float* kt) {
  const int block_size = kv.block_size;
  const int head_dim = kv.head_dim;
  const size_t column_bytes = static_cast<size_t>(block_size) * KvElementBytes(kType);
  for (int b = first_block + blocks; b < std::min(end_block, first_block + 2 * blocks); ++b) {
    PrefetchBlockPlanes(kv.Plane(block_table[b], layer, 0, kv_head),
                        kv.Plane(block_table[b], layer, 1, kv_head), column_bytes * head_dim);
  }
  for (int d = 0; d < head_dim; ++d) {
    _mm256_store_ps(kt + d * kTileSlots, _mm256_setzero_ps());
    _mm256_store_ps(kt + d * kTileSlots + 8, _mm256_setzero_ps());
  }
  for (int k = 0; k * block_size < count; ++k) {
    const uint8_t* k_plane = kv.Plane(block_table[first_block + k], layer, 0, kv_head);
    const int n = std::min(block_size, count - k * block_size);
    float* lanes = kt + k * block_size;
    for (int d = 0; d < head_dim; ++d) {
      const uint8_t* column = k_plane + d * column_bytes;
      float* to = lanes + d * kTileSlots;
      if (n == 8) {
        _mm256_storeu_ps(to, LoadRow<kType>(column, 0, 8));
      } else if constexpr (kType == KvType::kF32) {
        std::memcpy(to, column, static_cast<size_t>(n) * sizeof(float));
      } else if (n == 4) {
        _mm_storeu_ps(to, _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(column))));
      } else {
        const auto* halves = reinterpret_cast<const uint16_t*>(column);
        for (int s = 0; s < n; ++s) to[s] = _cvtsh_ss(halves[s]);
      }
    }
  }
}

constexpr int kGroupStep = 4;  // query rows whose dot products are accumulated together

// ScoreTile's work for key dimension d: acc[i][c] = fma(q_rows[i][d], keys(d, c), acc[i][c]).
template <int kRows, int kChunks, typename Keys>
inline __attribute__((always_inline)) void ScoreStep(const float* const* q_rows, const Keys& keys,
                                                     int d, __m256 (&acc)[kRows][kChunks]) {
  __m256 k[kChunks];
  for (int c = 0; c < kChunks; ++c) k[c] = keys(d, c);
  for (int i = 0; i < kRows; ++i) {
    const __m256 q = BroadcastFloat(q_rows[i] + d);
    for (int c = 0; c < kChunks; ++c) acc[i][c] = _mm256_fmadd_ps(q, k[c], acc[i][c]);
  }
}

// Scores of kRows query rows for kChunks chunks of 8 slots: out[i * kSpanScoreStride + 8 * c + s]
// = scale * sum, where sum chains q[d] * key(d, c)[s] by fused multiply-adds in the order of d
// from 0. keys(d, c) gives key dimension d of chunk c's slots; each_pair() runs before every pair
// of dimensions (a single row tile asks for the next block's lines there). A slot's sum is the
// same whichever tile and chunk it is in. kRows and kChunks are constants so that the 8
// accumulators of a full tile stay in registers.
template <int kRows, int kChunks, typename Keys, typename EachPair>
inline __attribute__((always_inline)) void ScoreTile(const float* const* q_rows, int head_dim,
                                                     const Keys& keys, EachPair& each_pair,
                                                     float scale, float* out) {
  __m256 acc[kRows][kChunks];
  for (int i = 0; i < kRows; ++i) {
    for (int c = 0; c < kChunks; ++c) acc[i][c] = _mm256_setzero_ps();
  }
  int d = 0;
  for (; d + 2 <= head_dim; d += 2) {
    each_pair();
    ScoreStep(q_rows, keys, d, acc);
    ScoreStep(q_rows, keys, d + 1, acc);
  }
  if (d < head_dim) {
    each_pair();
    ScoreStep(q_rows, keys, d, acc);
  }
  const __m256 scale8 = _mm256_set1_ps(scale);
  for (int i = 0; i < kRows; ++i) {
    for (int c = 0; c < kChunks; ++c) {
      // Unaligned where blocks are no multiple of 8 slots; chunks past a block's last slot are
      // written over by the next block's.
      _mm256_storeu_ps(out + i * kSpanScoreStride + 8 * c, _mm256_mul_ps(acc[i][c], scale8));
    }
  }
}

// ScoreTile over rows [first_row, num_rows), kGroupStep at a time, the last tile as many as
// remain (a group of 3 heads computes no padded fourth row). out: row 0's scores at the chunks'
// first slot.
template <int kChunks, typename Keys, typename EachPair>
inline __attribute__((always_inline)) void ScoreRows(const float* const* q_rows, int first_row,
                                                     int num_rows, int head_dim, const Keys& keys,
                                                     EachPair& each_pair, float scale, float* out) {
  ForRowTiles<kGroupStep>(first_row, num_rows, [&](auto rows, int r0) {
    ScoreTile<decltype(rows)::value, kChunks>(q_rows + r0, head_dim, keys, each_pair, scale,
                                              out + r0 * kSpanScoreStride);
  });
}

// ScoreRows over one or two chunks: the slots [j0, j0 + count) of a block, count <= kTileSlots.
template <typename Keys, typename EachPair>
inline __attribute__((always_inline)) void ScoreSlots(const float* const* q_rows, int first_row,
                                                      int num_rows, int head_dim, int count,
                                                      const Keys& keys, EachPair& each_pair,
                                                      float scale, float* out) {
  if (count > 8) {
    ScoreRows<2>(q_rows, first_row, num_rows, head_dim, keys, each_pair, scale, out);
  } else {
    ScoreRows<1>(q_rows, first_row, num_rows, head_dim, keys, each_pair, scale, out);
  }
}

constexpr int kValueHeads = 3;   // query rows x
constexpr int kValueChunks = 4;  //   8-wide chunks of V accumulated in registers

// Where a value tile reads values: rows of up to 8 dimensions from d of slot j as f32 (`width`
// lanes, +0 in the others), walked slot by slot. StoredValues reads a block's stored values;
// StagedValues reads a span's values widened to f32 once ([slots][head_dim]) for every tile,
// which saves each tile its conversions (for head dimensions of whole chunks only).
template <KvType kType>
struct StoredValues {
  const uint8_t* plane;
  size_t row_bytes;
  struct Cursor {
    const uint8_t* row;
    size_t row_bytes;
    __m256 Load(int d, int width) const { return LoadRow<kType>(row, d, width); }
    void Next() { row += row_bytes; }
  };
  Cursor At(int j) const { return {plane + j * row_bytes, row_bytes}; }
};
struct StagedValues {
  const float* values;
  int head_dim;
  struct Cursor {
    const float* row;
    int head_dim;
    __m256 Load(int d, int) const { return _mm256_load_ps(row + d); }
    void Next() { row += head_dim; }
  };
  Cursor At(int j) const { return {values + static_cast<size_t>(j) * head_dim, head_dim}; }
};

// The value pass of a run of slots (one block, or a span's staged values) for the kRows rows from
// r0 (the rows present): out_rows[r][d] = fma(p[r][j], v[j][d], out_rows[r][d]) for j < filled[r]
// in order, with p[r][j] = scores[r * kSpanScoreStride + j], a tile of kRows rows x 32 dimensions
// held in registers across the slots. kWholeChunks: head_dim is a multiple of 8 * kValueChunks,
// so no chunk needs a width test (with them, a decoding token's value pass spent more
// instructions on tests and branches than on its fused multiply-adds).
template <int kRows, bool kWholeChunks, typename Values>
void ValueTile(const Values& values, int head_dim, int r0, const int* filled, const float* scores,
               float* const* out_rows) {
  const int common = filled[r0];  // slots every row of the tile reads
  const int tile_filled = filled[r0 + kRows - 1];
  const float* p_rows[kRows];
  for (int i = 0; i < kRows; ++i) p_rows[i] = scores + (r0 + i) * kSpanScoreStride;
  for (int d0 = 0; d0 < head_dim; d0 += 8 * kValueChunks) {
    int widths[kValueChunks];  // lanes of each chunk inside head_dim (0: past it)
    for (int c = 0; c < kValueChunks; ++c) {
      widths[c] = kWholeChunks ? 8 : std::clamp(head_dim - (d0 + 8 * c), 0, 8);
    }
    __m256 acc[kRows][kValueChunks];
    for (int i = 0; i < kRows; ++i) {
      for (int c = 0; c < kValueChunks; ++c) {
        acc[i][c] =
            widths[c] > 0 ? LoadAcc(out_rows[r0 + i] + d0 + 8 * c, widths[c]) : _mm256_setzero_ps();
      }
    }
    // Slots every row of the tile reads, then (rows of a later token only) the rest.
    auto v_row = values.At(0);
    int j = 0;
    for (; j < common; ++j, v_row.Next()) {
      __m256 p[kRows];
      for (int i = 0; i < kRows; ++i) p[i] = BroadcastFloat(p_rows[i] + j);
      for (int c = 0; c < kValueChunks; ++c) {
        const __m256 v = widths[c] > 0 ? v_row.Load(d0 + 8 * c, widths[c]) : _mm256_setzero_ps();
        for (int i = 0; i < kRows; ++i) acc[i][c] = _mm256_fmadd_ps(p[i], v, acc[i][c]);
      }
    }
    for (; j < tile_filled; ++j, v_row.Next()) {
      for (int c = 0; c < kValueChunks; ++c) {
        const __m256 v = widths[c] > 0 ? v_row.Load(d0 + 8 * c, widths[c]) : _mm256_setzero_ps();
        for (int i = 0; i < kRows; ++i) {
          if (j < filled[r0 + i]) {
            acc[i][c] = _mm256_fmadd_ps(BroadcastFloat(p_rows[i] + j), v, acc[i][c]);
          }
        }
      }
    }
    for (int i = 0; i < kRows; ++i) {
      for (int c = 0; c < kValueChunks; ++c) {
        if (widths[c] > 0) StoreAcc(out_rows[r0 + i] + d0 + 8 * c, widths[c], acc[i][c]);
      }
    }
  }
}

// ValueTile over rows [first_row, num_rows), kValueHeads at a time, the last tile as many as
// remain. A row's operations are its own whatever tile it is in, so the tiling keeps its bits.
template <bool kWholeChunks, typename Values>
void ValuePass(const Values& values, int head_dim, int first_row, int num_rows, const int* filled,
               const float* scores, float* const* out_rows) {
  ForRowTiles<kValueHeads>(first_row, num_rows, [&](auto rows, int r0) {
    ValueTile<decltype(rows)::value, kWholeChunks>(values, head_dim, r0, filled, scores, out_rows);
  });
}

// Values staged as f32 (StagedValues), on the stack: up to this many floats (a span of 64 slots
// of 128 dimensions).
constexpr int kStagedValueFloats = 8192;

// A run of consecutive tokens; query row r = t * group + g is head g of token t, at position
// first_position + t, and reads positions [0, first_position + t]. In block b a row uses only its
// own filled slots, filled[r] = min(block_size, positions of r - b * block_size), and a row
// whose positions end before block b is left alone: every row does exactly what it does alone
// (a run of one token), whatever other rows share the call.
template <KvType kType, bool kSharedTiles>
void Attention(const PagedKv& kv, int layer, int kv_head, const float* q, int64_t q_stride,
               int group, std::span<const int32_t> block_table, int first_position, int num_tokens,
               float scale, float* out, int64_t out_stride, const AttentionBlocks& blocks) {
  const int head_dim = kv.head_dim;
  const int block_size = kv.block_size;
  const size_t row_bytes = static_cast<size_t>(head_dim) * KvElementBytes(kType);       // a value
  const size_t column_bytes = static_cast<size_t>(block_size) * KvElementBytes(kType);  // a key dim
  AttentionRows state(q, q_stride, group, head_dim, first_position, num_tokens, out, out_stride);
  const int num_rows = state.num_rows;
  const float* const* q_rows = state.q_rows;
  float* const* out_rows = state.out_rows;
  const int* filled = state.filled;
  alignas(32) float scores[kMaxAttentionRows][kSpanScoreStride];  // [num_rows][span positions]
  alignas(32) float kt[kMaxAttentionHeadDim][kTileSlots];         // [head_dim][16 slots] keys
  alignas(32) float staged_values[kStagedValueFloats];            // [span slots][head_dim]
  const bool whole_chunks = head_dim % (8 * kValueChunks) == 0;

  // Positions [0, first_position + num_tokens): the last token's.
  const int end_block = blocks.EndFor(first_position + num_tokens, block_size);
  // Softmax spans: the online softmax's max, correction and sums are taken once per span of
  // kSoftmaxSpanPositions positions (whole blocks, a fixed partition of positions that splits
  // never cut), not per block, and a value tile runs through a whole span: with 16-position
  // blocks, per-block steps spent a third of a warm turn's attention on that bookkeeping and on
  // the accumulators' loads and stores.
  const int span_blocks = SoftmaxSpanBlocks(kSoftmaxSpanPositions, block_size);
  for (int span_first = blocks.first_block; span_first < end_block;) {
    const SoftmaxSpan span = SoftmaxSpanFrom(span_first, end_block, block_size, span_blocks);
    // Rows [first_row, num_rows) reach into the span; a row's positions in it are contiguous from
    // span.start, and a row that ends inside one block reaches no later block.
    const int first_row = state.EnterBlock(span_first, block_size);
    // Scores, block by block, kTileSlots slots at a time, one slot per lane: slots up to the
    // longest row's are computed; a row reads only its own filled ones. A single row tile
    // (decode) reads the stored keys directly, asking for the next block's lines as it goes;
    // several widen them once. Blocks of fewer than kTileSlots slots share tiles, always widened.
    if constexpr (kSharedTiles) {
      const int blocks_per_tile = kTileSlots / block_size;
      for (int b = span_first; b < span.end_block; b += blocks_per_tile) {
        const int tile_row = state.EnterBlock(b, block_size);
        const int count = std::min({blocks_per_tile * block_size, (span.end_block - b) * block_size,
                                    state.positions[num_rows - 1] - b * block_size});
        WidenSharedTile<kType>(kv, layer, kv_head, block_table, b, blocks_per_tile, count,
                               end_block, &kt[0][0]);
        NoLines no_lines;
        auto staged_keys = [&](int d, int c) { return _mm256_load_ps(&kt[d][8 * c]); };
        ScoreSlots(q_rows, tile_row, num_rows, head_dim, count, staged_keys, no_lines, scale,
                   &scores[0][(b - span_first) * block_size]);
      }
    }
    for (int b = span_first; b < span.end_block && !kSharedTiles; ++b) {
      const int block_row = state.EnterBlock(b, block_size);
      const int max_filled = filled[num_rows - 1];
      const uint8_t* k_plane = kv.Plane(block_table[b], layer, 0, kv_head);
      const bool stage_keys = num_rows - block_row > kGroupStep;
      const bool has_next = b + 1 < end_block;
      const uint8_t* next_k = has_next ? kv.Plane(block_table[b + 1], layer, 0, kv_head) : nullptr;
      const uint8_t* next_v = has_next ? kv.Plane(block_table[b + 1], layer, 1, kv_head) : nullptr;
      if (has_next && stage_keys) PrefetchBlockPlanes(next_k, next_v, row_bytes * block_size);
      for (int j0 = 0; j0 < max_filled; j0 += kTileSlots) {
        const int count = std::min(kTileSlots, max_filled - j0);
        float* tile_out = &scores[0][(b - span_first) * block_size + j0];
        if (stage_keys) {
          WidenKeys<kType>(k_plane, column_bytes, j0, count, head_dim, &kt[0][0]);
          NoLines no_lines;
          auto staged_keys = [&](int d, int c) { return _mm256_load_ps(&kt[d][8 * c]); };
          ScoreSlots(q_rows, block_row, num_rows, head_dim, count, staged_keys, no_lines, scale,
                     tile_out);
          continue;
        }
        auto score_rows = [&](auto keys, auto& each_pair) {
          ScoreSlots(q_rows, block_row, num_rows, head_dim, count, keys, each_pair, scale,
                     tile_out);
        };
        if (count == kTileSlots) {
          // Whole chunks (all but a sequence's last): loads with no width test, which the loop
          // cannot hoist from a captured count (a decoding token's score loop spent most of its
          // instructions on the tests and the tail path). Captured by value: the loop then keeps
          // them in registers.
          auto stored_keys = [k_plane, column_bytes, j0](int d, int c) {
            return LoadRow<kType>(k_plane + d * column_bytes, j0 + 8 * c, 8);
          };
          ScoreStoredKeys<kTileSlots, KvElementBytes(kType)>(score_rows, stored_keys, next_k,
                                                             next_v, j0, head_dim);
        } else {
          auto stored_keys = [k_plane, column_bytes, j0, count](int d, int c) {
            return LoadRow<kType>(k_plane + d * column_bytes, j0 + 8 * c, count - 8 * c);
          };
          ScoreStoredKeys<kTileSlots, KvElementBytes(kType)>(score_rows, stored_keys, next_k,
                                                             next_v, j0, head_dim);
        }
      }
    }
    // Softmax bookkeeping over the rows' positions in the span, then values: with several value
    // tiles and a span that fits, the span's values widened once (exact) and each tile run
    // through the whole span; otherwise block by block from storage.
    SoftmaxSpanStep(state, head_dim, first_row, span, &scores[0][0]);
    int span_filled[kMaxAttentionRows];  // [num_rows] the row's positions in the span
    for (int r = first_row; r < num_rows; ++r) {
      span_filled[r] = state.PositionsIn(span, r);
    }
    const int max_span_filled = span_filled[num_rows - 1];
    // One- and two-slot blocks stage their values for a single tile too (its accumulators were
    // loaded and stored every block).
    if ((num_rows - first_row > kValueHeads || (kSharedTiles && block_size <= 2)) && whole_chunks &&
        max_span_filled * head_dim <= kStagedValueFloats) {
      for (int b = span_first, j0 = 0; j0 < max_span_filled; ++b, j0 += block_size) {
        const uint8_t* v_plane = kv.Plane(block_table[b], layer, 1, kv_head);
        const int block_filled = std::min(block_size, max_span_filled - j0);
        for (int j = 0; j < block_filled; ++j) {
          float* staged = staged_values + static_cast<size_t>(j0 + j) * head_dim;
          for (int d = 0; d < head_dim; d += 8) {
            _mm256_store_ps(staged + d, LoadRow<kType>(v_plane + j * row_bytes, d, 8));
          }
        }
      }
      ValuePass<true>(StagedValues{staged_values, head_dim}, head_dim, first_row, num_rows,
                      span_filled, &scores[0][0], out_rows);
    } else {
      for (int b = span_first; b < span.end_block; ++b) {
        const int block_row = state.EnterBlock(b, block_size);
        const float* block_scores = &scores[0][0] + (b - span_first) * block_size;
        const StoredValues<kType> values{kv.Plane(block_table[b], layer, 1, kv_head), row_bytes};
        if (whole_chunks) {
          ValuePass<true>(values, head_dim, block_row, num_rows, filled, block_scores, out_rows);
        } else {
          ValuePass<false>(values, head_dim, block_row, num_rows, filled, block_scores, out_rows);
        }
      }
    }
    span_first = span.end_block;
  }
  FinishRows(state, head_dim, blocks);
}

}  // namespace

void PagedAttentionAvx2(const PagedKv& kv, int layer, int kv_head, const float* q, int64_t q_stride,
                        int group, std::span<const int32_t> block_table, int first_position,
                        int num_tokens, float scale, float* out, int64_t out_stride,
                        const AttentionBlocks& blocks, const PreparedQueries& prepared) {
  if (kv.type == KvType::kQ8) {
    PagedAttentionQ8Avx2(kv, layer, kv_head, q, q_stride, group, block_table, first_position,
                         num_tokens, scale, out, out_stride, blocks, prepared);
  } else if (kv.type == KvType::kF32 && kv.block_size <= 8) {
    Attention<KvType::kF32, true>(kv, layer, kv_head, q, q_stride, group, block_table,
                                  first_position, num_tokens, scale, out, out_stride, blocks);
  } else if (kv.type == KvType::kF32) {
    Attention<KvType::kF32, false>(kv, layer, kv_head, q, q_stride, group, block_table,
                                   first_position, num_tokens, scale, out, out_stride, blocks);
  } else if (kv.block_size <= 8) {
    Attention<KvType::kF16, true>(kv, layer, kv_head, q, q_stride, group, block_table,
                                  first_position, num_tokens, scale, out, out_stride, blocks);
  } else {
    Attention<KvType::kF16, false>(kv, layer, kv_head, q, q_stride, group, block_table,
                                   first_position, num_tokens, scale, out, out_stride, blocks);
  }
}

}  // namespace reprise::kernels
