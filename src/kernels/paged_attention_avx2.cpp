// PagedAttention with AVX2 + FMA + F16C (compiled with those flags only for this file; chosen at
// run time). The AVX-512 kernel's algorithm at 8 lanes:
//
//   for each KV block in order:
//     s[r][j] = scale * (even + odd), the fused sums of q[r][d] * k[j][d] over even and odd d,
//     8 slots j at once from the keys, stored transposed ([head_dim][block_size])
//     m' = max(m, max_j s);  c = exp(m - m');  l = l * c + sum_j exp(s - m') (the sum lane-wise
//     over 8-slot chunks, then HorizontalSum; both exps by ExpNonPositive below)
//     acc[r] = acc[r] * c;  then for j in order: acc[r] = fma(exp(s[r][j] - m'), v[j], acc[r])
//   out = acc * (1 / l)
//
// A query row (head g of token t of a run) reads only its own positions, so its bits are the
// same alone or in a run of tokens (PagedAttentionTokens). They differ from the other targets'.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/attention_score_tile.h"
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
inline __m256 LoadRow(const uint8_t* row, int offset, int n) {
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

// Keys of up to 8 slots from j0 on, widened to f32 rows: kt[d][s] = k[j0 + s][d] for s < count,
// 0 for the other slots (never read from storage). Keys are stored transposed (PagedKv), so this
// is a plain copy or widening, done once when several row tiles read the same keys.
//   k_plane: [head_dim][block_size] stored keys; kt: [head_dim][8]
template <KvType kType>
inline void WidenKeys(const uint8_t* k_plane, size_t column_bytes, int j0, int count, int head_dim,
                      float* kt) {
  for (int d = 0; d < head_dim; ++d) {
    _mm256_store_ps(kt + d * 8, LoadRow<kType>(k_plane + d * column_bytes, j0, count));
  }
}

constexpr int kGroupStep = 4;  // query rows whose dot products are accumulated together

// ScoreRowTile's vector operations at 8 lanes.
struct Lanes8 {
  using Vec = __m256;
  static Vec Zero() { return _mm256_setzero_ps(); }
  static Vec Broadcast(const float* value) { return _mm256_broadcast_ss(value); }
  static Vec MultiplyAdd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
};
constexpr int kValueHeads = 4;   // query rows x
constexpr int kValueChunks = 2;  //   8-wide chunks of V accumulated in registers

// Scores of kRows query rows (the rows present: a group of 3 heads computes no padded fourth
// one) for one chunk of 8 slots: out[i * out_stride + s] = scale * sum. keys(d, 0) gives key
// dimension d of the chunk's slots. A row's sums are its own whatever tile it is in.
template <int kRows, typename Keys, typename EachPair>
inline __attribute__((always_inline)) void ScoreTile(const float* const* q_rows, int head_dim,
                                                     const Keys& keys, EachPair& each_pair,
                                                     float scale, float* out, int out_stride) {
  const float* rows[kRows];
  for (int i = 0; i < kRows; ++i) rows[i] = q_rows[i];
  __m256 sums[kRows][1];
  ScoreRowTile<Lanes8>(rows, head_dim, keys, each_pair, sums);
  const __m256 scale8 = _mm256_set1_ps(scale);
  for (int i = 0; i < kRows; ++i)
    _mm256_store_ps(out + i * out_stride, _mm256_mul_ps(sums[i][0], scale8));
}

// Where a value tile reads values: up to 8 dimensions from d of slot j's value as f32 (`width`
// lanes, +0 in the others). StoredValues reads the block's stored values; StagedValues reads them
// widened to f32 once per block ([slots][head_dim]) for every tile, which saves each tile its
// conversions (for head dimensions of whole chunks only).
template <KvType kType>
struct StoredValues {
  const uint8_t* plane;
  size_t row_bytes;
  __m256 Load(int j, int d, int width) const {
    return LoadRow<kType>(plane + j * row_bytes, d, width);
  }
};
struct StagedValues {
  const float* values;
  int head_dim;
  __m256 Load(int j, int d, int) const { return _mm256_load_ps(values + j * head_dim + d); }
};

// The value pass of one block for the kRows rows from r0 (the rows present):
// out_rows[r][d] = fma(p[r][j], v[j][d], out_rows[r][d]) for j < filled[r] in order, with
// p[r][j] = scores[r * scores_stride + j], a tile of kRows rows x 16 dimensions held in registers
// across the block's slots. kWholeChunks: head_dim is a multiple of 8 * kValueChunks, so no chunk
// needs a width test (with them, a decoding token's value pass spent more instructions on tests
// and branches than on its fused multiply-adds).
template <int kRows, bool kWholeChunks, typename Values>
void ValueTile(const Values& values, int head_dim, int r0, const int* filled, const float* scores,
               int scores_stride, float* const* out_rows) {
  const int common = filled[r0];  // slots every row of the tile reads
  const int tile_filled = filled[r0 + kRows - 1];
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
    for (int j = 0; j < common; ++j) {
      __m256 p[kRows];
      for (int i = 0; i < kRows; ++i)
        p[i] = _mm256_broadcast_ss(scores + (r0 + i) * scores_stride + j);
      for (int c = 0; c < kValueChunks; ++c) {
        const __m256 v =
            widths[c] > 0 ? values.Load(j, d0 + 8 * c, widths[c]) : _mm256_setzero_ps();
        for (int i = 0; i < kRows; ++i) acc[i][c] = _mm256_fmadd_ps(p[i], v, acc[i][c]);
      }
    }
    for (int j = common; j < tile_filled; ++j) {
      for (int c = 0; c < kValueChunks; ++c) {
        const __m256 v =
            widths[c] > 0 ? values.Load(j, d0 + 8 * c, widths[c]) : _mm256_setzero_ps();
        for (int i = 0; i < kRows; ++i) {
          if (j < filled[r0 + i]) {
            acc[i][c] = _mm256_fmadd_ps(_mm256_broadcast_ss(scores + (r0 + i) * scores_stride + j),
                                        v, acc[i][c]);
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

// Values staged as f32 (StagedValues), on the stack: up to this many floats (16 slots of
// 512 dimensions, or 64 of 128).
constexpr int kStagedValueFloats = 8192;

// As the AVX-512 kernel's Attention (paged_attention_avx512.cpp), at 8 lanes.
template <KvType kType>
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
  // [num_rows][block_size rounded up to 8]; whole 8-lane chunks are stored.
  alignas(32) float scores[kMaxAttentionRows][kMaxAttentionBlockSize];
  alignas(32) float kt[kMaxAttentionHeadDim][8];        // [head_dim][8 slots] keys
  alignas(32) float staged_values[kStagedValueFloats];  // [slots][head_dim]

  const int total_positions = first_position + num_tokens;  // of the last token
  const int num_blocks = (total_positions + block_size - 1) / block_size;
  const int end_block = std::min(num_blocks, blocks.end_block);
  for (int b = blocks.first_block; b < end_block; ++b) {
    // Rows [first_row, num_rows) reach into this block; their filled counts do not decrease.
    const int first_row = state.EnterBlock(b, block_size);
    const int max_filled = filled[num_rows - 1];
    const uint8_t* k_plane = kv.Plane(block_table[b], layer, 0, kv_head);
    const uint8_t* v_plane = kv.Plane(block_table[b], layer, 1, kv_head);
    // Scores of 8 slots at a time, one slot per lane (see the top of the file). A single row
    // tile (decode) reads the stored keys directly, asking for the next block's lines as it goes;
    // several widen them once.
    const bool stage_keys = num_rows - first_row > kGroupStep;
    const bool has_next = b + 1 < end_block;
    const uint8_t* next_k = has_next ? kv.Plane(block_table[b + 1], layer, 0, kv_head) : nullptr;
    const uint8_t* next_v = has_next ? kv.Plane(block_table[b + 1], layer, 1, kv_head) : nullptr;
    if (has_next && stage_keys) {
      PrefetchBlockPlanes(next_k, next_v, row_bytes * block_size);
    }
    for (int j0 = 0; j0 < max_filled; j0 += 8) {
      const int count = std::min(8, max_filled - j0);
      if (stage_keys) WidenKeys<kType>(k_plane, column_bytes, j0, count, head_dim, &kt[0][0]);
      // The row tiles, given where key dimension d of the 8 slots comes from (a branch-free
      // inner loop either way).
      auto score_rows = [&](auto keys, auto& each_pair) {
        // Tiles of kGroupStep rows, the last one as many as remain.
        for (int r0 = first_row; r0 < num_rows; r0 += kGroupStep) {
          float* out = scores[r0] + j0;
          constexpr int kStride = kMaxAttentionBlockSize;
          switch (std::min(kGroupStep, num_rows - r0)) {
            case 1:
              ScoreTile<1>(q_rows + r0, head_dim, keys, each_pair, scale, out, kStride);
              break;
            case 2:
              ScoreTile<2>(q_rows + r0, head_dim, keys, each_pair, scale, out, kStride);
              break;
            case 3:
              ScoreTile<3>(q_rows + r0, head_dim, keys, each_pair, scale, out, kStride);
              break;
            default:
              ScoreTile<kGroupStep>(q_rows + r0, head_dim, keys, each_pair, scale, out, kStride);
              break;
          }
        }
      };
      if (stage_keys) {
        NoLines no_lines;
        score_rows([&](int d, int) { return _mm256_load_ps(kt[d]); }, no_lines);
      } else if (count == 8) {
        // A whole chunk (all but a sequence's last): loads with no width test, which the loop
        // cannot hoist from a captured count (a decoding token's score loop spent most of its
        // instructions on the tests and the tail path). Captured by value: the loop then keeps
        // them in registers.
        auto stored_keys = [k_plane, column_bytes, j0](int d, int) {
          return LoadRow<kType>(k_plane + d * column_bytes, j0, 8);
        };
        ScoreStoredKeys<8, KvElementBytes(kType)>(score_rows, stored_keys, next_k, next_v, j0,
                                                  head_dim);
      } else {
        auto stored_keys = [k_plane, column_bytes, j0, count](int d, int) {
          return LoadRow<kType>(k_plane + d * column_bytes, j0, count);
        };
        ScoreStoredKeys<8, KvElementBytes(kType)>(score_rows, stored_keys, next_k, next_v, j0,
                                                  head_dim);
      }
    }
    // Softmax bookkeeping, then values.
    SoftmaxBlockStep(state, head_dim, first_row, &scores[0][0]);
    // acc[r][d] = fma(p[r][j], v[j][d], acc[r][d]) for j < filled[r] in order (ValueTile), in
    // tiles of kValueHeads rows, the last one as many as remain, over one source of values.
    const float* block_scores = &scores[0][0];
    constexpr int kStride = kMaxAttentionBlockSize;
    const auto value_tiles = [&](const auto& values, auto whole_chunks) {
      constexpr bool kWhole = decltype(whole_chunks)::value;
      for (int r0 = first_row; r0 < num_rows; r0 += kValueHeads) {
        switch (std::min(kValueHeads, num_rows - r0)) {
          case 1:
            ValueTile<1, kWhole>(values, head_dim, r0, filled, block_scores, kStride, out_rows);
            break;
          case 2:
            ValueTile<2, kWhole>(values, head_dim, r0, filled, block_scores, kStride, out_rows);
            break;
          case 3:
            ValueTile<3, kWhole>(values, head_dim, r0, filled, block_scores, kStride, out_rows);
            break;
          default:
            ValueTile<kValueHeads, kWhole>(values, head_dim, r0, filled, block_scores, kStride,
                                           out_rows);
            break;
        }
      }
    };
    const bool whole_chunks = head_dim % (8 * kValueChunks) == 0;
    // Several value tiles read the block's values: widened once (half the time of a warm turn's
    // attention, 125 tokens over 2,582 cached positions on Zen 3, where every tile converted
    // them again and tested each chunk's width per slot).
    if (num_rows - first_row > kValueHeads && whole_chunks &&
        max_filled * head_dim <= kStagedValueFloats) {
      for (int j = 0; j < max_filled; ++j) {
        for (int d = 0; d < head_dim; d += 8) {
          _mm256_store_ps(staged_values + j * head_dim + d,
                          LoadRow<kType>(v_plane + j * row_bytes, d, 8));
        }
      }
      value_tiles(StagedValues{staged_values, head_dim}, std::true_type{});
    } else if (whole_chunks) {
      value_tiles(StoredValues<kType>{v_plane, row_bytes}, std::true_type{});
    } else {
      value_tiles(StoredValues<kType>{v_plane, row_bytes}, std::false_type{});
    }
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
  } else if (kv.type == KvType::kF32) {
    Attention<KvType::kF32>(kv, layer, kv_head, q, q_stride, group, block_table, first_position,
                            num_tokens, scale, out, out_stride, blocks);
  } else {
    Attention<KvType::kF16>(kv, layer, kv_head, q, q_stride, group, block_table, first_position,
                            num_tokens, scale, out, out_stride, blocks);
  }
}

}  // namespace reprise::kernels
