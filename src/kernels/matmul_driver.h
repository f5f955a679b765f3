// What MatMul's driver (matmul.cpp) shares with its float paths (matmul_float.cpp) and its row
// groups (matmul_row_groups.cpp): per-thread scratch, the job a range of rows runs, prefetching
// ahead of decode, reading groups back.
// Internal to kernels/.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/row_groups.h"

namespace reprise::kernels {

// Each thread keeps its scratch between calls so that the step loop does not allocate; a buffer
// only grows. `Slot` separates the caller's activation buffer from the panel buffer it also uses.
enum class Slot {
  kActivations,
  kPanel,
  kInterleaved,
  kUngrouped,
  kTileActivations,
  kSpanSums,
  kCount
};
uint8_t* ThreadScratch(Slot slot, size_t bytes);

// Row stride (in floats) of packed f32 rows: one cache line more than a multiple of 16, so that
// rows 4 KiB apart do not compete for the same L1 sets.
inline int64_t PaddedStride(int64_t cols) { return (cols + 15) / 16 * 16 + 16; }

// Decode reads each weight once, so it runs at the speed memory answers prefetches: tiles ask for
// rows whole tiles ahead, at least kDecodePrefetchBytes ahead. Short rows need it: a tile of 576
// Q8_0 columns is 2.4 KiB, and with only the next tile asked for, the layers of a 135M model
// streamed at 19-21 GB/s; 8 KiB ahead, 24-29 GB/s (F16: 15 -> 23 GB/s), and no better further
// (medians over 60 interleaved passes of all 210 matrices, 2 threads).
inline constexpr int64_t kDecodePrefetchBytes = 8192;
int64_t DecodePrefetchRows(size_t row_bytes, int row_tile);
// Asks for rows [first, end) of a matrix into L2 (see DecodePrefetchRows).
void PrefetchRows(const uint8_t* data, size_t row_bytes, int64_t first, int64_t end);

// One product's inputs and outputs, as each thread's range of rows runs them.
struct Job {
  const TargetKernels* kernels;
  const WeightView* w;
  const float* x;  // [tokens][x_stride] (float types)
  int64_t x_stride;
  QuantizedRows qx;  // quantized activations (quantized types)
  int64_t tokens;
  float* y;  // [tokens][rows]
  int64_t panel_rows;
  bool decode;  // few tokens: weights are streamed once
};

// Runs tile(out, out_stride), a row-group tile writing mt (<= kMaxTokens) tokens' results for
// the 16 rows of the group from row g, tokens out_stride apart: straight into y (rows `rows`
// apart per token) when the group lies inside [r_begin, r_end), else into a scratch copy of
// which only the range's rows are kept (ranges normally fall on groups).
template <int kMaxTokens, typename Tile>
void IntoGroupRows(int64_t g, int64_t r_begin, int64_t r_end, int mt, float* y, int64_t rows,
                   const Tile& tile) {
  if (g >= r_begin && g + kRowGroupRows <= r_end) {
    tile(y + g, rows);
    return;
  }
  alignas(64) float whole[kMaxTokens][kRowGroupRows];
  tile(whole[0], int64_t{kRowGroupRows});
  for (int i = 0; i < mt; ++i) {
    for (int64_t r = std::max(g, r_begin); r < std::min(g + kRowGroupRows, r_end); ++r) {
      y[i * rows + r] = whole[i][r - g];
    }
  }
}

// Rows of a matrix in row groups [r_begin, r_end) for tokens [t_begin, t_end) with the target's
// row-group tiles (matmul_row_groups.cpp); rows before `grouped_end` (the last whole group's end)
// only. A group the range cuts is computed whole and only the range's rows kept (ranges normally
// fall on groups). Tiles ask for rows up to prefetch_end (>= r_end).
void RunRowGroupRange(const Job& job, int64_t r_begin, int64_t r_end, int64_t grouped_end,
                      int64_t t_begin, int64_t t_end, int64_t prefetch_end);

// Rows [r_begin, r_end) of an F16 or BF16 matrix in row groups (all before its last whole
// group's end) for tokens [t_begin, t_end), decoding: the target's float group tiles (a group the
// range cuts computed whole and only the range's rows kept), asking for rows up to prefetch_end.
void RunFloatGroupRange(const Job& job, int64_t r_begin, int64_t r_end, int64_t t_begin,
                        int64_t t_end, int64_t prefetch_end);

// The group of w's grouped rows at `group` read back as stored into `out` (kRowGroupRows rows):
// by the target's own reader where it has one for w's layout.
void Ungroup(const TargetKernels& k, const WeightView& w, const uint8_t* group, uint8_t* out);

// Rows [r_begin, r_end) of a float matrix (F32, F16, BF16) for tokens [t_begin, t_end): rows in
// row groups, then the rest as stored; decode tiles prefetch rows up to prefetch_end (>= r_end).
void RunFloatRange(const Job& job, int64_t r_begin, int64_t r_end, int64_t t_begin, int64_t t_end,
                   int64_t prefetch_end);

}  // namespace reprise::kernels
