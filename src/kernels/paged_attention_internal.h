// Limits and per-target entry points of PagedAttention. Internal to kernels/.
#pragma once

#include <xmmintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

#include "kernels/paged_attention.h"

namespace reprise::kernels {

inline constexpr int kMaxAttentionBlockSize = 256;
// Positions over which the AVX-512 kernel takes one online-softmax step (whole blocks: one block
// when blocks are larger). A divisor of kAttentionSplitPositions, so no split cuts a span.
inline constexpr int kSoftmaxSpanPositions = 64;
static_assert(kAttentionSplitPositions % kSoftmaxSpanPositions == 0);
inline constexpr int kMaxAttentionGroup = 64;
inline constexpr int kMaxAttentionHeadDim = 512;
// Query rows (tokens x group heads) one kernel call keeps state for; PagedAttentionTokensOnTarget
// splits longer runs into calls of at most this many rows.
inline constexpr int kMaxAttentionRows = 64;

// One online-softmax span of a kernel call: blocks [first_block, end_block) of the block table,
// positions [start, start + length).
struct SoftmaxSpan {
  int first_block;
  int end_block;
  int start;
  int length;
};

// Blocks per softmax span of `span_positions` positions: whole blocks, one at the least.
inline int SoftmaxSpanBlocks(int span_positions, int block_size) {
  return std::max(1, span_positions / block_size);
}

// The softmax span that starts at block `first_block`: up to the next multiple of `span_blocks`
// (SoftmaxSpanBlocks), cut at end_block. Taken one after another from a call's first block, spans
// follow a fixed partition of the block table, whatever the call's rows.
inline SoftmaxSpan SoftmaxSpanFrom(int first_block, int end_block, int block_size,
                                   int span_blocks) {
  const int end = std::min(end_block, (first_block / span_blocks + 1) * span_blocks);
  return {first_block, end, first_block * block_size, (end - first_block) * block_size};
}

// How a kernel call's out rows start: zeroed here, or left for the kernel to write over in its
// first span (it then zeroes the rows that span does not reach itself).
enum class OutRows { kZeroed, kWrittenByFirstSpan };

// The query rows of one kernel call and their online-softmax state. Row r = t * group + g is
// head g of token t of the run, at position first_position + t; it attends over positions
// [0, positions[r]) and accumulates into its out row, which starts at zero.
struct AttentionRows {
  AttentionRows(const float* q, int64_t q_stride, int group_size, int head_dim,
                int first_position_of_run, int num_tokens, float* out, int64_t out_stride,
                OutRows start = OutRows::kZeroed)
      : group(group_size), first_position(first_position_of_run), num_rows(num_tokens * group) {
    for (int r = 0; r < num_rows; ++r) {
      const int t = r / group, g = r % group;
      q_rows[r] = q + t * q_stride + g * head_dim;
      out_rows[r] = out + t * out_stride + g * head_dim;
      positions[r] = first_position + t + 1;
      if (start == OutRows::kZeroed) std::fill(out_rows[r], out_rows[r] + head_dim, 0.0f);
      running_max[r] = -std::numeric_limits<float>::infinity();
      running_sum[r] = 0.0f;
    }
  }

  // Sets filled[r] = min(block_size, positions[r] - b * block_size), the slots of block b that
  // row r reads, for the rows that reach into block b: [first row, num_rows), returned. Their
  // filled counts do not decrease with r.
  int EnterBlock(int b, int block_size) {
    const int first_token = std::max(0, b * block_size - first_position);
    const int first_row = first_token * group;
    for (int r = first_row; r < num_rows; ++r) {
      filled[r] = std::min(block_size, positions[r] - b * block_size);
    }
    return first_row;
  }

  // Row r's positions in `span`: its first ones from span.start (a row reaching into a span).
  int PositionsIn(const SoftmaxSpan& span, int r) const {
    return std::min(span.length, positions[r] - span.start);
  }

  int group;
  int first_position;
  int num_rows;
  const float* q_rows[kMaxAttentionRows];  // [num_rows] -> [head_dim]
  float* out_rows[kMaxAttentionRows];      // [num_rows] -> [head_dim], the accumulators
  int positions[kMaxAttentionRows];        // [num_rows] positions each row attends over
  float running_max[kMaxAttentionRows];
  float running_sum[kMaxAttentionRows];
  int filled[kMaxAttentionRows];  // [num_rows] in the current block (EnterBlock)
};

// ForRowTiles' last tile: tile(std::integral_constant<int, rows>{}, r0) for 1 <= rows <= kRows.
template <int kRows, typename Tile>
inline __attribute__((always_inline)) void RemainderRowTile(int rows, int r0, const Tile& tile) {
  if constexpr (kRows >= 1) {
    if (rows == kRows) {
      tile(std::integral_constant<int, kRows>{}, r0);
      return;
    }
    RemainderRowTile<kRows - 1>(rows, r0, tile);
  }
}
// Calls tile(std::integral_constant<int, n>{}, r0) for query rows [first, end) in tiles of kTile
// (at most 8) rows from r0, the last one as many as remain: a constant row count keeps a tile's
// accumulators in registers.
template <int kTile, typename Tile>
inline __attribute__((always_inline)) void ForRowTiles(int first, int end, const Tile& tile) {
  static_assert(kTile >= 1 && kTile <= 8, "tiles of 1 to 8 rows");
  int r0 = first;
  for (; r0 + kTile <= end; r0 += kTile) tile(std::integral_constant<int, kTile>{}, r0);
  RemainderRowTile<kTile - 1>(end - r0, r0, tile);
}

// Asks for a block's K and V planes (of one layer and KV head), `plane_bytes` each, into L2
// ahead of their use. Into L2, not L1: a prefetch into L1 holds one of the core's few L1 miss
// buffers until its line arrives from memory, and a block's 64 of them left the kernel's own loads
// waiting for buffers (decode attention after 2,048 positions, one Zen 4 thread: 5.5 -> 4.7 ms).
// Always inlined, as every helper that only asks for lines must be: GCC 12's mod/ref analysis
// counts a prefetch as no effect, so a call it does not inline is dropped with its requests.
inline __attribute__((always_inline)) void PrefetchBlockPlanes(const uint8_t* k, const uint8_t* v,
                                                               size_t plane_bytes) {
  for (size_t line = 0; line < plane_bytes; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(k + line), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(v + line), _MM_HINT_T1);
  }
}

// The same requests spread over a block's score loop (a single row tile, decode), a line or two
// of each plane per pair of key dimensions, rather than in one burst at the block's start, which
// stalled issue while the memory queues were full. The chunk of kLanes slots from slot j0 asks
// for its share of the next block's planes, bytes [j0, j0 + kLanes) * head_dim elements, in
// order: together the chunks of a full block ask for every line. One object per chunk, called
// once per pair of key dimensions (a score tile's each_pair).
template <int kLanes, size_t kElementBytes>
class NextBlockLines {
 public:
  NextBlockLines(const uint8_t* next_k, const uint8_t* next_v, int j0, int head_dim)
      : k_(next_k + static_cast<size_t>(j0) * head_dim * kElementBytes),
        v_(next_v + static_cast<size_t>(j0) * head_dim * kElementBytes) {}
  void operator()() {
    // A pair of dimensions covers 2 * kLanes elements of the share: 32 to 128 bytes. Below a
    // line, a line is asked for twice (cheaper than tracking which pair starts one).
    for (size_t line = 0; line < kPairBytes; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(k_ + line), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(v_ + line), _MM_HINT_T1);
    }
    k_ += kPairBytes;
    v_ += kPairBytes;
  }

 private:
  static constexpr size_t kPairBytes = 2 * kLanes * kElementBytes;
  const uint8_t* k_;
  const uint8_t* v_;
};

// A score tile's each_pair where nothing is asked for.
struct NoLines {
  void operator()() const {}
};

// score_rows(keys, each_pair) for the chunk of kLanes slots from j0 of a single row tile, whose
// keys come straight from storage: asking for the chunk's share of the next block's lines where
// there is a next block (next_k and next_v not null), nothing otherwise.
template <int kLanes, size_t kElementBytes, typename ScoreRows, typename Keys>
inline void ScoreStoredKeys(const ScoreRows& score_rows, const Keys& keys, const uint8_t* next_k,
                            const uint8_t* next_v, int j0, int head_dim) {
  if (next_k != nullptr) {
    NextBlockLines<kLanes, kElementBytes> next_lines(next_k, next_v, j0, head_dim);
    score_rows(keys, next_lines);
  } else {
    NoLines no_lines;
    score_rows(keys, no_lines);
  }
}

// Which of a run's KV blocks one kernel call reads, and what it leaves in its out rows: blocks
// [first_block, end_block) of the table (clipped to those the run reaches). With `max` null the
// out rows are normalized (acc / sum) at the end; otherwise row r's running max and sum go to
// max[r] and sum[r] (r = t * group + g) and its out row keeps acc unnormalized: one split's
// partial state. A row that does not reach the blocks keeps (acc 0, max -inf, sum 0).
struct AttentionBlocks {
  // The end of the blocks a call over `num_positions` positions reads: end_block, or the block
  // past the last position where that comes first.
  int EndFor(int num_positions, int block_size) const {
    return std::min((num_positions + block_size - 1) / block_size, end_block);
  }

  int first_block = 0;
  int end_block = std::numeric_limits<int>::max();
  float* max = nullptr;
  float* sum = nullptr;
};

// The end of the portable kernels' query: its `group` heads' running max and sum handed out
// for a split (blocks.max set, acc left unnormalized), or each out row times 1 / sum.
//   out: [group][head_dim] accumulators
inline void FinishScalarQuery(const float* running_max, const float* running_sum, int group,
                              int head_dim, const AttentionBlocks& blocks, float* out) {
  if (blocks.max != nullptr) {  // a split's partial state, merged later
    std::copy(running_max, running_max + group, blocks.max);
    std::copy(running_sum, running_sum + group, blocks.sum);
    return;
  }
  for (int g = 0; g < group; ++g) {
    const float inverse = 1.0f / running_sum[g];
    float* acc = out + static_cast<int64_t>(g) * head_dim;
    for (int d = 0; d < head_dim; ++d) acc[d] *= inverse;
  }
}

// Arguments already checked by PagedAttentionTokensOnTarget; num_tokens * group <=
// kMaxAttentionRows; `prepared` (its data may be null) starts at the call's first token. Token t of
// the run is at position first_position + t (see PagedAttentionTokens). A single query of n
// positions is the run of one token at n - 1.
using PagedAttentionKernel = void (*)(const PagedKv& kv, int layer, int kv_head, const float* q,
                                      int64_t q_stride, int group,
                                      std::span<const int32_t> block_table, int first_position,
                                      int num_tokens, float scale, float* out, int64_t out_stride,
                                      const AttentionBlocks& blocks,
                                      const PreparedQueries& prepared);
// One row of a merge of split partials (MergeAttentionPartials), its elements through splits
// [first, end) of a batch: from x = start[d], x = x * keeps[s] + sources[s][d] * adds[s] in
// split order (a multiply, a multiply and an add: no fused step), then dst[d] = x * inverse.
// Each element's operations are the same on every target, so are its bits.
using MergeRowFunction = void (*)(const float* start, const float* const* sources,
                                  const float* keeps, const float* adds, int first, int end,
                                  float inverse, int head_dim, float* dst);
void MergeRowAvx512(const float* start, const float* const* sources, const float* keeps,
                    const float* adds, int first, int end, float inverse, int head_dim, float* dst);

void PagedAttentionScalar(const PagedKv& kv, int layer, int kv_head, const float* q,
                          int64_t q_stride, int group, std::span<const int32_t> block_table,
                          int first_position, int num_tokens, float scale, float* out,
                          int64_t out_stride, const AttentionBlocks& blocks,
                          const PreparedQueries& prepared);
void PagedAttentionAvx2(const PagedKv& kv, int layer, int kv_head, const float* q, int64_t q_stride,
                        int group, std::span<const int32_t> block_table, int first_position,
                        int num_tokens, float scale, float* out, int64_t out_stride,
                        const AttentionBlocks& blocks, const PreparedQueries& prepared);
void PagedAttentionAvx512(const PagedKv& kv, int layer, int kv_head, const float* q,
                          int64_t q_stride, int group, std::span<const int32_t> block_table,
                          int first_position, int num_tokens, float scale, float* out,
                          int64_t out_stride, const AttentionBlocks& blocks,
                          const PreparedQueries& prepared);
void PagedAttentionQ8Avx2(const PagedKv& kv, int layer, int kv_head, const float* q,
                          int64_t q_stride, int group, std::span<const int32_t> block_table,
                          int first_position, int num_tokens, float scale, float* out,
                          int64_t out_stride, const AttentionBlocks& blocks,
                          const PreparedQueries& prepared);
void PagedAttentionQ8Avx512(const PagedKv& kv, int layer, int kv_head, const float* q,
                            int64_t q_stride, int group, std::span<const int32_t> block_table,
                            int first_position, int num_tokens, float scale, float* out,
                            int64_t out_stride, const AttentionBlocks& blocks,
                            const PreparedQueries& prepared);

}  // namespace reprise::kernels
