// PagedAttention over f32 and f16 K/V with AVX-512 + F16C (compiled with those flags only for
// this file; chosen at run time; q8 K/V: paged_attention_q8_avx512.cpp). The portable version's
// algorithm (paged_attention.cpp), with the online softmax taken per span of several blocks rather
// than per block:
//
//   for each softmax span (kSoftmaxSpanPositions positions in whole blocks) in order:
//     s[g][j] = scale * (even + odd), the fused sums of q[g][d] * k[j][d] over even and odd d,
//     16 or 32 slots j at once from the blocks' keys, stored transposed ([head_dim][block_size])
//     m' = max(m, max_j s);  c = exp(m - m');  l = l * c + sum_j exp(s - m') (the sum lane-wise
//     over 16-slot chunks, then HorizontalSum; c by ExpNonPositive, the probabilities by
//     ExpOfDifference<5>, each one fixed polynomial)
//     acc[g] = acc[g] * c;  then for j in order: acc[g] = fma(exp(s[g][j] - m'), v[j], acc[g])
//   out = acc * (1 / l)
//
// Several consecutive tokens of one sequence share each block's K/V loads (PagedAttentionTokens);
// every query row still does exactly its single-query operations over its own positions.
//
// Its bits differ from the portable version's (other summation trees, fused multiply-adds) but,
// like it, depend only on the stored K/V values and their order.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attention_softmax_avx512.h"
#include "kernels/paged_attention.h"
#include "kernels/paged_attention_internal.h"
#include "kernels/reduce_avx512.h"
#include "kernels/simd.h"

namespace reprise::kernels {

namespace {

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

// 16 elements of a stored K or V row as f32, all inside the row. A plain load where LoadRow's is
// masked: GCC 12 treats a masked load as an opaque memory access and keeps a loop's accumulator
// arrays in memory around it, storing all of them back after every pass (16 stores beside 16
// fused multiply-adds per slot: the value pass ran at about a third of the FMA peak, Zen 5).
template <KvType kType>
inline __m512 LoadWholeRow(const uint8_t* row, int offset) {
  if constexpr (kType == KvType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + offset);
  } else {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + offset)));
  }
}

// LoadWholeRow where kWhole, else LoadRow.
template <KvType kType, bool kWhole>
inline __m512 LoadValue(const uint8_t* row, int offset, __mmask16 mask) {
  if constexpr (kWhole) {
    return LoadWholeRow<kType>(row, offset);
  } else {
    return LoadRow<kType>(row, offset, mask);
  }
}

// Keys of up to 16 slots from j0 on, widened to f32 rows: kt[d * kt_stride + s] = k[j0 + s][d]
// for s < count, 0 for the other slots of the 16 (never read from storage). Keys are stored
// transposed (PagedKv), so this is a plain copy or widening, done once when several row tiles
// read the same keys.
//   k_plane: [head_dim][block_size] stored keys; kt: [head_dim][kt_stride]
template <KvType kType>
inline void WidenKeys(const uint8_t* k_plane, size_t column_bytes, int j0, int count, int head_dim,
                      float* kt, int kt_stride) {
  const __mmask16 mask = ChunkMask(count, 0);
  for (int d = 0; d < head_dim; ++d) {
    _mm512_store_ps(kt + d * kt_stride, LoadRow<kType>(k_plane + d * column_bytes, j0, mask));
  }
}

constexpr int kGroupStep = 4;  // query rows whose dot products are accumulated together

// For kRows query rows and kChunks chunks of key slots (one slot per lane), sums[i][c] lane s =
// even + odd, where even and odd sum rows[i][d] * keys(d, c)[s] over the even and over the odd d
// in order, by fused multiply-adds. Two chains halve the wait on the FMA latency; the fixed order
// gives a target the same bits on every call, and a slot's sum is the same whichever chunk of
// whichever tile it is in. Several chunks share each query element's broadcast (a tile of one
// chunk reads more broadcasts than keys and waits on the load ports, not the FMAs). kRows and
// kChunks are constants so that the accumulators stay in registers. Lanes: Vec, Zero(),
// Broadcast(const float*), MultiplyAdd(a, b, c) = a * b + c, Add(a, b); keys(d, c) returns
// dimension d of chunk c's slots as a Vec. each_pair() runs at the start of every pair of
// dimensions (a decode tile asks for the next block's lines there).
template <typename Lanes, int kRows, int kChunks, typename Keys, typename EachPair>
inline void ScoreRowTile(const float* const (&rows)[kRows], int head_dim, const Keys& keys,
                         EachPair& each_pair, typename Lanes::Vec (&sums)[kRows][kChunks]) {
  using Vec = typename Lanes::Vec;
  Vec even[kRows][kChunks], odd[kRows][kChunks];
  for (int i = 0; i < kRows; ++i) {
    for (int c = 0; c < kChunks; ++c) even[i][c] = odd[i][c] = Lanes::Zero();
  }
  int d = 0;
  for (; d + 2 <= head_dim; d += 2) {
    each_pair();
    Vec k0[kChunks], k1[kChunks];
    for (int c = 0; c < kChunks; ++c) {
      k0[c] = keys(d, c);
      k1[c] = keys(d + 1, c);
    }
    for (int i = 0; i < kRows; ++i) {
      const Vec q0 = Lanes::Broadcast(rows[i] + d);
      const Vec q1 = Lanes::Broadcast(rows[i] + d + 1);
      for (int c = 0; c < kChunks; ++c) {
        even[i][c] = Lanes::MultiplyAdd(q0, k0[c], even[i][c]);
        odd[i][c] = Lanes::MultiplyAdd(q1, k1[c], odd[i][c]);
      }
    }
  }
  if (d < head_dim) {
    for (int c = 0; c < kChunks; ++c) {
      const Vec k0 = keys(d, c);
      for (int i = 0; i < kRows; ++i) {
        even[i][c] = Lanes::MultiplyAdd(Lanes::Broadcast(rows[i] + d), k0, even[i][c]);
      }
    }
  }
  for (int i = 0; i < kRows; ++i) {
    for (int c = 0; c < kChunks; ++c) sums[i][c] = Lanes::Add(even[i][c], odd[i][c]);
  }
}

// ScoreRowTile's vector operations at 16 lanes.
struct Lanes16 {
  using Vec = __m512;
  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec Broadcast(const float* value) { return _mm512_set1_ps(*value); }
  static Vec MultiplyAdd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec Add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
};
// Scores of kRows query rows (the rows present: a group of 3 heads computes no padded fourth
// one) for kChunks chunks of up to 16 slots: out[i * kScoreStride + 16 * c + s] = scale * sum,
// under masks[c]. keys(d, c) gives key dimension d of chunk c's slots. A row's sums are its own
// whatever tile it is in, so the tiling never changes its bits.
template <int kRows, int kChunks, typename Keys, typename EachPair>
inline __attribute__((always_inline)) void ScoreTile(const float* const* q_rows, int head_dim,
                                                     const Keys& keys, EachPair& each_pair,
                                                     float scale, const __mmask16 (&masks)[kChunks],
                                                     float* out) {
  const float* rows[kRows];
  for (int i = 0; i < kRows; ++i) rows[i] = q_rows[i];
  __m512 sums[kRows][kChunks];
  ScoreRowTile<Lanes16>(rows, head_dim, keys, each_pair, sums);
  const __m512 scale16 = _mm512_set1_ps(scale);
  for (int i = 0; i < kRows; ++i) {
    for (int c = 0; c < kChunks; ++c) {
      _mm512_mask_storeu_ps(out + i * kScoreStride + 16 * c, masks[c],
                            _mm512_mul_ps(sums[i][c], scale16));
    }
  }
}

// ScoreTile over rows [first_row, num_rows), kGroupStep at a time, the last tile as many as
// remain. out: the scores of row 0 at the chunks' first slot (rows kScoreStride apart).
template <int kChunks, typename Keys, typename EachPair>
inline __attribute__((always_inline)) void ScoreRows(const float* const* q_rows, int first_row,
                                                     int num_rows, int head_dim, const Keys& keys,
                                                     EachPair& each_pair, float scale,
                                                     const __mmask16 (&masks)[kChunks],
                                                     float* out) {
  ForRowTiles<kGroupStep>(first_row, num_rows, [&](auto rows, int r0) {
    ScoreTile<decltype(rows)::value, kChunks>(q_rows + r0, head_dim, keys, each_pair, scale, masks,
                                              out + r0 * kScoreStride);
  });
}

// A chunk of up to 16 consecutive slots of one block whose scores a span computes together.
// Blocks of fewer than 16 slots share a chunk: `count` slots from slot 0 of `block` on, side by
// side (always widened where they span more than one block: no one plane holds them).
struct KeyChunk {
  const uint8_t* k_plane;  // the block's key plane
  int block;               // its index in the block table
  int j0, count;           // slots [j0, j0 + count) of the block (of the blocks from it)
  int first_row;           // rows [first_row, num_rows) reach into the block
  int column;              // where the slots' scores go in the span's score rows
};
// Slots of widened keys a score tile reads: up to three chunks.
inline constexpr int kStagedSlots = 48;
inline constexpr int kMaxSpanPositions = std::max(kSoftmaxSpanPositions, kMaxAttentionBlockSize);
// A span's chunks: 16 slots each (blocks of fewer slots share one), ceil(block_size / 16) per
// larger block.
inline constexpr int kMaxSpanChunks = std::max(kSoftmaxSpanPositions, kMaxAttentionBlockSize / 16);

// The keys of a chunk that small blocks share (more slots than a block), widened block by block
// into its lanes kt[d * kStagedSlots + s], those past its slots zeroed (a last chunk's; never
// read), after asking for the blocks of the next chunk. Not inlined: inside Attention it made GCC
// compile the decode tile worse (f16, 16-slot blocks, one token: 81-105 -> 59-74 GFLOP/s).
template <KvType kType>
__attribute__((noinline)) void WidenSharedChunk(const PagedKv& kv, int layer, int kv_head,
                                                std::span<const int32_t> block_table,
                                                const KeyChunk& chunk, int blocks_per_chunk,
                                                int end_block, float* kt) {
  const int block_size = kv.block_size;
  const size_t column_bytes = static_cast<size_t>(block_size) * KvElementBytes(kType);
  const size_t plane_bytes = column_bytes * kv.head_dim;
  for (int b = chunk.block + blocks_per_chunk;
       b < std::min(end_block, chunk.block + 2 * blocks_per_chunk); ++b) {
    PrefetchBlockPlanes(kv.Plane(block_table[b], layer, 0, kv_head),
                        kv.Plane(block_table[b], layer, 1, kv_head), plane_bytes);
  }
  for (int k = 0; k * block_size < chunk.count; ++k) {
    const uint8_t* k_plane = kv.Plane(block_table[chunk.block + k], layer, 0, kv_head);
    const __mmask16 mask = ChunkMask(std::min(block_size, chunk.count - k * block_size), 0);
    float* lanes = kt + k * block_size;
    for (int d = 0; d < kv.head_dim; ++d) {
      _mm512_mask_storeu_ps(lanes + d * kStagedSlots, mask,
                            LoadRow<kType>(k_plane + d * column_bytes, 0, mask));
    }
  }
  if (chunk.count < 16) {
    const __mmask16 rest = static_cast<__mmask16>(~ChunkMask(chunk.count, 0));
    for (int d = 0; d < kv.head_dim; ++d) {
      _mm512_mask_storeu_ps(kt + d * kStagedSlots, rest, _mm512_setzero_ps());
    }
  }
}

constexpr int kValueHeads = 4;   // query rows x
constexpr int kValueChunks = 4;  //   16-wide chunks of V accumulated in registers

// The value pass of a run of slots (one block, or a span's widened values) for rows
// r0 .. r0 + kRows - 1 and dimensions [d0, d0 + 64):
// out_rows[r][d] = fma(p[r][j], v[j][d], out_rows[r][d]) for j < filled[r] in order, with
// p[r][j] = scores[r * kScoreStride + j]. v[j][d0 + e] is element `offset + e` of row j of `v`
// (rows `stride` bytes apart, of type kSrc); masks: the chunks of [d0, d0 + 64) inside head_dim,
// all whole where kWhole (then every load and store is a plain one: see LoadWholeRow).
// kRows is the number of rows present (a constant keeps the accumulators in registers).
template <KvType kSrc, int kRows, bool kWhole>
inline __attribute__((always_inline)) void ValueTile(const uint8_t* v, size_t stride, int offset,
                                                     const __mmask16 (&masks)[kValueChunks], int r0,
                                                     const int* filled, const float* scores,
                                                     float* const* out_rows, int d0) {
  const int tile_filled = filled[r0 + kRows - 1];
  __m512 acc[kRows][kValueChunks];
  for (int i = 0; i < kRows; ++i) {
    for (int c = 0; c < kValueChunks; ++c) {
      float* at = out_rows[r0 + i] + d0 + 16 * c;
      acc[i][c] = kWhole ? _mm512_loadu_ps(at) : _mm512_maskz_loadu_ps(masks[c], at);
    }
  }
  // Slots every row of the tile reads, then (rows of a later token only) the rest.
  const int common = filled[r0];
  for (int j = 0; j < common; ++j) {
    const uint8_t* v_row = v + j * stride;
    __m512 p[kRows];
    for (int i = 0; i < kRows; ++i) p[i] = _mm512_set1_ps(scores[(r0 + i) * kScoreStride + j]);
    for (int c = 0; c < kValueChunks; ++c) {
      const __m512 vv = LoadValue<kSrc, kWhole>(v_row, offset + 16 * c, masks[c]);
      for (int i = 0; i < kRows; ++i) acc[i][c] = _mm512_fmadd_ps(p[i], vv, acc[i][c]);
    }
  }
  for (int j = common; j < tile_filled; ++j) {
    const uint8_t* v_row = v + j * stride;
    __m512 p[kRows];
    __mmask16 live[kRows];  // all lanes while j is one of the row's slots, else none
    for (int i = 0; i < kRows; ++i) {
      p[i] = _mm512_set1_ps(scores[(r0 + i) * kScoreStride + j]);
      live[i] = j < filled[r0 + i] ? static_cast<__mmask16>(0xFFFF) : 0;
    }
    for (int c = 0; c < kValueChunks; ++c) {
      const __m512 vv = LoadValue<kSrc, kWhole>(v_row, offset + 16 * c, masks[c]);
      for (int i = 0; i < kRows; ++i) {
        acc[i][c] = _mm512_mask3_fmadd_ps(p[i], vv, acc[i][c], live[i]);
      }
    }
  }
  for (int i = 0; i < kRows; ++i) {
    for (int c = 0; c < kValueChunks; ++c) {
      float* at = out_rows[r0 + i] + d0 + 16 * c;
      if constexpr (kWhole) {
        _mm512_storeu_ps(at, acc[i][c]);
      } else {
        _mm512_mask_storeu_ps(at, masks[c], acc[i][c]);
      }
    }
  }
}

// ValueTile over rows [first_row, num_rows), kValueHeads at a time, the last tile as many as
// remain. A row's operations are its own whatever tile it is in, so the tiling keeps its bits.
// Always inlined, with its tiles: with four instances of Attention GCC stopped inlining the
// staged values' tiles into them and called each (f16, 64 tokens over 1,600 positions, one KV
// head: 153-159 -> 145-150 GFLOP/s).
template <KvType kSrc, bool kPlainLoads>
inline __attribute__((always_inline)) void ValuePass(const uint8_t* v, size_t stride, int offset,
                                                     const __mmask16 (&masks)[kValueChunks],
                                                     int first_row, int num_rows, const int* filled,
                                                     const float* scores, float* const* out_rows,
                                                     int d0) {
  const bool whole = masks[kValueChunks - 1] == static_cast<__mmask16>(0xFFFF);
  ForRowTiles<kValueHeads>(
      first_row, num_rows, [&](auto rows, int r0) __attribute__((always_inline)) {
        if (kPlainLoads && whole) {
          ValueTile<kSrc, decltype(rows)::value, kPlainLoads>(v, stride, offset, masks, r0, filled,
                                                              scores, out_rows, d0);
        } else {  // always inlined: called, its accumulators went through memory
          ValueTile<kSrc, decltype(rows)::value, false>(v, stride, offset, masks, r0, filled,
                                                        scores, out_rows, d0);
        }
      });
}

// ValuePass over a block's stored values with masked loads (a decoding token's tile), in a
// function of its own: inlined into Attention, its accumulators competed for registers with the
// kernel's other live values and one was stored to the stack every slot (f16 decode after 1,600
// positions, 16-slot blocks: 100 -> 87 GFLOP/s).
template <KvType kType>
__attribute__((noinline)) void StoredValuePass(const uint8_t* v, size_t stride, int offset,
                                               const __mmask16 (&masks)[kValueChunks],
                                               int first_row, int num_rows, const int* filled,
                                               const float* scores, float* const* out_rows,
                                               int d0) {
  ValuePass<kType, false>(v, stride, offset, masks, first_row, num_rows, filled, scores, out_rows,
                          d0);
}

// StoredValuePass over two consecutive blocks that every row of [first_row, num_rows) fills
// (a decoding token past them): each row tile's accumulators stay in registers through both
// blocks' slots, where a pass per block loaded and stored them every 16 slots. The same
// operations in the same order as a pass per block, so the same bits. v_a, v_b: the blocks'
// value planes; scores: row r's for both blocks at scores + r * kScoreStride (a's slots, then
// b's).
template <KvType kType>
__attribute__((noinline)) void StoredValuePair(const uint8_t* v_a, const uint8_t* v_b,
                                               size_t stride, int block_size,
                                               const __mmask16 (&masks)[kValueChunks],
                                               int first_row, int num_rows, const float* scores,
                                               float* const* out_rows, int d0) {
  ForRowTiles<kValueHeads>(
      first_row, num_rows, [&](auto rows, int r0) __attribute__((always_inline)) {
        constexpr int kRows = decltype(rows)::value;
        __m512 acc[kRows][kValueChunks];
        for (int i = 0; i < kRows; ++i) {
          for (int c = 0; c < kValueChunks; ++c) {
            acc[i][c] = _mm512_maskz_loadu_ps(masks[c], out_rows[r0 + i] + d0 + 16 * c);
          }
        }
        for (int half = 0; half < 2; ++half) {
          const uint8_t* v = half == 0 ? v_a : v_b;
          const float* half_scores = scores + half * block_size;
          for (int j = 0; j < block_size; ++j) {
            const uint8_t* v_row = v + j * stride;
            __m512 p[kRows];
            for (int i = 0; i < kRows; ++i) {
              p[i] = _mm512_set1_ps(half_scores[(r0 + i) * kScoreStride + j]);
            }
            for (int c = 0; c < kValueChunks; ++c) {
              const __m512 vv = LoadRow<kType>(v_row, d0 + 16 * c, masks[c]);
              for (int i = 0; i < kRows; ++i) acc[i][c] = _mm512_fmadd_ps(p[i], vv, acc[i][c]);
            }
          }
        }
        for (int i = 0; i < kRows; ++i) {
          for (int c = 0; c < kValueChunks; ++c) {
            _mm512_mask_storeu_ps(out_rows[r0 + i] + d0 + 16 * c, masks[c], acc[i][c]);
          }
        }
      });
}

// A run of consecutive tokens; query row r = t * group + g is head g of token t, at position
// first_position + t, and reads positions [0, first_position + t]. In block b a row uses only its
// own filled slots, filled[r] = min(block_size, positions of r - b * block_size), and a row
// whose positions end before block b is left alone: every row does exactly what it does alone
// (a run of one token), whatever other rows share the call.
template <KvType kType, bool kSharedChunks>
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
  float scores[kMaxAttentionRows][kScoreStride];                   // [num_rows][span positions]
  alignas(64) float kt[kMaxAttentionHeadDim][kStagedSlots];        // [head_dim][3 chunks] keys
  alignas(64) float v_wide[kMaxSpanPositions][16 * kValueChunks];  // [slot][64] values

  // Positions [0, first_position + num_tokens): the last token's.
  const int end_block = blocks.EndFor(first_position + num_tokens, block_size);
  // Softmax spans: the online softmax's max, correction and sums are taken once per span of
  // kSoftmaxSpanPositions positions (whole blocks, a fixed partition of positions that splits
  // never cut), not per block, so small blocks do not pay that bookkeeping every 16 positions.
  const int span_blocks = SoftmaxSpanBlocks(kSoftmaxSpanPositions, block_size);
  // Blocks of fewer than 16 slots share chunks of up to 16 (their slots side by side in the
  // lanes of widened keys), where one block per chunk left lanes empty: 8-slot blocks took twice
  // the time of 16-slot ones, one-slot blocks 17 times.
  const int blocks_per_chunk = kSharedChunks ? 16 / block_size : 1;
  // The first four blocks asked for at once: a decoding token's tile asks for each pair's lines
  // while it scores the pair before, and the first pairs have none before them (after 750
  // positions, 2 threads: 1.15x as fast as without; two blocks, 1.12x).
  for (int b = blocks.first_block; b < std::min(end_block, blocks.first_block + 4); ++b) {
    PrefetchBlockPlanes(kv.Plane(block_table[b], layer, 0, kv_head),
                        kv.Plane(block_table[b], layer, 1, kv_head), row_bytes * block_size);
  }
  for (int span_first = blocks.first_block; span_first < end_block;) {
    const SoftmaxSpan span = SoftmaxSpanFrom(span_first, end_block, block_size, span_blocks);
    // Rows [first_row, num_rows) reach into the span; a row's positions in it are contiguous from
    // span.start, and a row that ends inside one block reaches no later block.
    const int first_row = state.EnterBlock(span_first, block_size);
    // The span's chunks of 16 slots, block by block: slots up to the longest row's are computed;
    // a row reads only its own filled ones.
    KeyChunk chunks[kMaxSpanChunks];
    int num_chunks = 0;
    for (int b = span_first; b < span.end_block; b += blocks_per_chunk) {
      const int block_row = state.EnterBlock(b, block_size);
      const uint8_t* k_plane = kv.Plane(block_table[b], layer, 0, kv_head);
      if constexpr (kSharedChunks) {  // the longest row's slots of the next blocks, up to 16
        const int count =
            std::min({blocks_per_chunk * block_size, (span.end_block - b) * block_size,
                      state.positions[num_rows - 1] - b * block_size});
        chunks[num_chunks++] = {k_plane, b, 0, count, block_row, (b - span_first) * block_size};
        continue;
      }
      const int max_filled = filled[num_rows - 1];
      for (int j0 = 0; j0 < max_filled; j0 += 16) {
        chunks[num_chunks++] = {k_plane,   b,
                                j0,        std::min(16, max_filled - j0),
                                block_row, (b - span_first) * block_size + j0};
      }
    }
    // Scores of 16 slots at a time, one slot per lane: lane s of a row is scale * (even + odd),
    // where even and odd sum q[d] * k[s][d] over the even and the odd d in order (fused
    // multiply-adds). A single row tile (decode) reads the stored keys directly, asking for the
    // next block's lines as it goes. Several widen them once, three chunks at a time (or two, or
    // one) where all but the last are whole and the same rows read them (their scores then lie
    // side by side), so that the tiles share each query element's broadcast between 48 slots.
    for (int i = 0; i < num_chunks;) {
      const KeyChunk& chunk = chunks[i];
      float* out = &scores[0][chunk.column];
      // A single row tile (decode) over two whole chunks of stored keys: each query element's
      // broadcast serves both (as the staged tiles' pairs do), and the next pair is asked for
      // while they are scored.
      if (num_rows - chunk.first_row <= kGroupStep && !kSharedChunks && chunk.count == 16 &&
          i + 1 < num_chunks && chunks[i + 1].count == 16 &&
          chunks[i + 1].first_row == chunk.first_row && chunks[i + 1].column == chunk.column + 16) {
        const KeyChunk& second = chunks[i + 1];
        const __mmask16 masks[2] = {ChunkMask(16, 0), ChunkMask(16, 0)};
        auto stored_keys = [a = chunk.k_plane + chunk.j0 * KvElementBytes(kType),
                            b = second.k_plane + second.j0 * KvElementBytes(kType),
                            column_bytes](int d, int c) {
          return LoadWholeRow<kType>((c == 0 ? a : b) + d * column_bytes, 0);
        };
        // The pair asks for the next pair's lines (16-slot blocks: two blocks on), or for larger
        // blocks its slots' share of the next block, as a single chunk does: with only the next
        // block asked for, a decoding token read scattered 16-slot blocks at 0.8x this speed
        // (after 2,048 positions, 2 threads, Zen 5).
        const int ahead = std::max(1, 32 / block_size);
        const int target_a = chunk.block + ahead;
        const int target_b = second.block + ahead;
        if (target_b < end_block) {
          auto each_pair = [lines_a = NextBlockLines<16, KvElementBytes(kType)>(
                                kv.Plane(block_table[target_a], layer, 0, kv_head),
                                kv.Plane(block_table[target_a], layer, 1, kv_head), chunk.j0,
                                head_dim),
                            lines_b = NextBlockLines<16, KvElementBytes(kType)>(
                                kv.Plane(block_table[target_b], layer, 0, kv_head),
                                kv.Plane(block_table[target_b], layer, 1, kv_head), second.j0,
                                head_dim)]() mutable {
            lines_a();
            lines_b();
          };
          ScoreRows<2>(q_rows, chunk.first_row, num_rows, head_dim, stored_keys, each_pair, scale,
                       masks, out);
        } else {
          NoLines no_lines;
          ScoreRows<2>(q_rows, chunk.first_row, num_rows, head_dim, stored_keys, no_lines, scale,
                       masks, out);
        }
        i += 2;
        continue;
      }
      if (num_rows - chunk.first_row <= kGroupStep && !kSharedChunks) {
        const bool has_next = chunk.block + 1 < end_block;
        const uint8_t* next_k =
            has_next ? kv.Plane(block_table[chunk.block + 1], layer, 0, kv_head) : nullptr;
        const uint8_t* next_v =
            has_next ? kv.Plane(block_table[chunk.block + 1], layer, 1, kv_head) : nullptr;
        // Captured by value: the loop then keeps them in registers.
        const __mmask16 masks[1] = {ChunkMask(chunk.count, 0)};
        auto stored_keys = [k_plane = chunk.k_plane, column_bytes, j0 = chunk.j0, mask = masks[0]](
                               int d, int) {
          return LoadRow<kType>(k_plane + d * column_bytes, j0, mask);
        };
        auto score_rows = [&](auto keys, auto& each_pair) {
          ScoreRows<1>(q_rows, chunk.first_row, num_rows, head_dim, keys, each_pair, scale, masks,
                       out);
        };
        ScoreStoredKeys<16, KvElementBytes(kType)>(score_rows, stored_keys, next_k, next_v,
                                                   chunk.j0, head_dim);
        ++i;
        continue;
      }
      const bool paired = i + 1 < num_chunks && chunk.count == 16 &&
                          chunks[i + 1].first_row == chunk.first_row &&
                          chunks[i + 1].column == chunk.column + 16;
      const bool tripled = paired && i + 2 < num_chunks && chunks[i + 1].count == 16 &&
                           chunks[i + 2].first_row == chunk.first_row &&
                           chunks[i + 2].column == chunk.column + 32;
      const int taken = tripled ? 3 : paired ? 2 : 1;
      for (int c = 0; c < taken; ++c) {
        const KeyChunk& each = chunks[i + c];
        if (kSharedChunks && each.count > block_size) {
          WidenSharedChunk<kType>(kv, layer, kv_head, block_table, each, blocks_per_chunk,
                                  end_block, &kt[0][16 * c]);
          continue;
        }
        if (each.j0 == 0 && each.block + 1 < end_block) {  // a block's first chunk
          PrefetchBlockPlanes(kv.Plane(block_table[each.block + 1], layer, 0, kv_head),
                              kv.Plane(block_table[each.block + 1], layer, 1, kv_head),
                              row_bytes * block_size);
        }
        WidenKeys<kType>(each.k_plane, column_bytes, each.j0, each.count, head_dim, &kt[0][16 * c],
                         kStagedSlots);
      }
      NoLines no_lines;
      auto staged_keys = [&](int d, int c) { return _mm512_load_ps(&kt[d][16 * c]); };
      if (tripled) {
        const __mmask16 masks[3] = {ChunkMask(16, 0), ChunkMask(16, 0),
                                    ChunkMask(chunks[i + 2].count, 0)};
        ScoreRows<3>(q_rows, chunk.first_row, num_rows, head_dim, staged_keys, no_lines, scale,
                     masks, out);
      } else if (paired) {
        const __mmask16 masks[2] = {ChunkMask(16, 0), ChunkMask(chunks[i + 1].count, 0)};
        ScoreRows<2>(q_rows, chunk.first_row, num_rows, head_dim, staged_keys, no_lines, scale,
                     masks, out);
      } else {
        const __mmask16 masks[1] = {ChunkMask(chunk.count, 0)};
        ScoreRows<1>(q_rows, chunk.first_row, num_rows, head_dim, staged_keys, no_lines, scale,
                     masks, out);
      }
      i += taken;
    }
    // Softmax bookkeeping over the rows' positions in the span, then values block by block.
    SoftmaxSpanStep(state, head_dim, first_row, span, &scores[0][0]);
    // acc[r][d] = fma(p[r][j], v[j][d], acc[r][d]) for j < filled[r] in order, with a tile of
    // 4 rows x 64 dimensions held in registers across the slots. A slot past a row's filled
    // ones leaves that row's accumulators as they are (masked fma), so garbage in later slots
    // never reaches it. Values go through v_wide (see below) or are read block by block.
    for (int d0 = 0; d0 < head_dim; d0 += 16 * kValueChunks) {
      __mmask16 masks[kValueChunks];
      for (int c = 0; c < kValueChunks; ++c) {
        const int d = d0 + 16 * c;
        masks[c] = d < head_dim ? ChunkMask(head_dim, d) : static_cast<__mmask16>(0);
      }
      // Values widened (f16, exact) or copied (f32) into v_wide once per span, then each row tile
      // runs through the whole span: with several row tiles, and for a single one with blocks
      // too small for its accumulators to be loaded and stored once per block (fewer than 8
      // slots). Otherwise block by block from storage.
      const bool several_tiles = num_rows - first_row > kValueHeads;
      if (several_tiles || (kSharedChunks && block_size < 8)) {
        int span_filled[kMaxAttentionRows];  // [num_rows] the row's positions in the span
        for (int r = first_row; r < num_rows; ++r) {
          span_filled[r] = state.PositionsIn(span, r);
        }
        const int max_filled = span_filled[num_rows - 1];
        for (int b = span_first, j0 = 0; j0 < max_filled; ++b, j0 += block_size) {
          const uint8_t* v_plane = kv.Plane(block_table[b], layer, 1, kv_head);
          const int block_filled = std::min(block_size, max_filled - j0);
          for (int j = 0; j < block_filled; ++j) {
            for (int c = 0; c < kValueChunks; ++c) {
              _mm512_store_ps(v_wide[j0 + j] + 16 * c,
                              LoadRow<kType>(v_plane + j * row_bytes, d0 + 16 * c, masks[c]));
            }
          }
        }
        ValuePass<KvType::kF32, true>(reinterpret_cast<const uint8_t*>(&v_wide[0][0]),
                                      sizeof(v_wide[0]), 0, masks, first_row, num_rows, span_filled,
                                      &scores[0][0], out_rows, d0);
        continue;
      }
      for (int b = span_first; b < span.end_block; ++b) {
        const float* block_scores = &scores[0][0] + (b - span_first) * block_size;
        const uint8_t* v_plane = kv.Plane(block_table[b], layer, 1, kv_head);
        const int block_row = state.EnterBlock(b, block_size);
        // Rows that read block b and all of b + 1 (a decoding token's, before its last block).
        if (b + 1 < span.end_block && state.positions[block_row] >= (b + 2) * block_size) {
          StoredValuePair<kType>(v_plane, kv.Plane(block_table[b + 1], layer, 1, kv_head),
                                 row_bytes, block_size, masks, block_row, num_rows, block_scores,
                                 out_rows, d0);
          ++b;
          continue;
        }
        // Masked loads here: with plain ones as well, GCC compiled the one-token pass (then
        // inlined into this function) worse, 117 -> 86 GFLOP/s (f16, group of 4, Zen 5).
        StoredValuePass<kType>(v_plane, row_bytes, d0, masks, block_row, num_rows, filled,
                               block_scores, out_rows, d0);
      }
    }
    span_first = span.end_block;
  }
  FinishRows(state, head_dim, blocks);
}

}  // namespace

// 16 elements per step, the last under a mask. Built, as this whole file is, without FMA
// contraction: x * keep + src * add stays a multiply, a multiply and an add.
void MergeRowAvx512(const float* start, const float* const* sources, const float* keeps,
                    const float* adds, int first, int end, float inverse, int head_dim,
                    float* dst) {
  const __m512 scale = _mm512_set1_ps(inverse);
  for (int d0 = 0; d0 < head_dim; d0 += 16) {
    const __mmask16 mask = ChunkMask(head_dim, d0);
    __m512 x = _mm512_maskz_loadu_ps(mask, start + d0);
    for (int s = first; s < end; ++s) {
      const __m512 src = _mm512_maskz_loadu_ps(mask, sources[s] + d0);
      x = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(keeps[s])),
                        _mm512_mul_ps(src, _mm512_set1_ps(adds[s])));
    }
    _mm512_mask_storeu_ps(dst + d0, mask, _mm512_mul_ps(x, scale));
  }
}

void PagedAttentionAvx512(const PagedKv& kv, int layer, int kv_head, const float* q,
                          int64_t q_stride, int group, std::span<const int32_t> block_table,
                          int first_position, int num_tokens, float scale, float* out,
                          int64_t out_stride, const AttentionBlocks& blocks,
                          const PreparedQueries& prepared) {
  if (kv.type == KvType::kQ8) {
    PagedAttentionQ8Avx512(kv, layer, kv_head, q, q_stride, group, block_table, first_position,
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
