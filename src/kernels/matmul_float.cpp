// MatMul's float paths (F32, F16, BF16): rows as stored, read in place by decode tiles or widened
// into a panel for prefill; F16 and BF16 row groups (row_groups.h) read by the target's float
// group tile, or widened a group at a time.
#include <algorithm>
#include <cstring>

#include "kernels/matmul_driver.h"
#include "kernels/row_groups.h"

namespace reprise::kernels {

namespace {

// Columns per span of float_span_tile: a token tile's span of activations (6 x 4 KiB) stays in
// L1 while every row tile of the panel reads its span of rows from L2. Whole rows read both
// from L2 once a token tile's activations outgrow L1 (6 x 8 KiB at 2048 columns). Spans of 256
// columns cost more in carried sums than they saved.
inline constexpr int64_t kFloatSpanColumns = 1024;

// Every token tile of [t_begin, t_end) over rows [lo, hi) of a widened f32 panel (rows `stride`
// floats apart) whose row 0 is the matrix's row `first_row`.
void RunPanelTiles(const Job& job, const float* panel, int64_t stride, int64_t first_row,
                   int64_t lo, int64_t hi, int64_t t_begin, int64_t t_end) {
  const TargetKernels& k = *job.kernels;
  const int64_t rows = job.w->rows;
  const int64_t cols = job.w->cols;
  if (k.float_span_tile != nullptr && cols > kFloatSpanColumns) {
    // Each row tile's lane sums for the token tile, carried from span to span.
    const int64_t tile_sums = static_cast<int64_t>(k.float_token_tile) * k.float_row_tile;
    const int64_t row_tiles = (hi - lo + k.float_row_tile - 1) / k.float_row_tile;
    float* sums = reinterpret_cast<float*>(
        ThreadScratch(Slot::kSpanSums,
                      static_cast<size_t>(row_tiles * tile_sums) * kFloatSpanSums * sizeof(float)));
    for (int64_t t = t_begin; t < t_end; t += k.float_token_tile) {
      const int mt = static_cast<int>(std::min<int64_t>(k.float_token_tile, t_end - t));
      for (int64_t c = 0; c < cols; c += kFloatSpanColumns) {
        const int64_t c_end = std::min(cols, c + kFloatSpanColumns);
        for (int64_t r = lo; r < hi; r += k.float_row_tile) {
          const int nr = static_cast<int>(std::min<int64_t>(k.float_row_tile, hi - r));
          float* tile = sums + (r - lo) / k.float_row_tile * tile_sums * kFloatSpanSums;
          k.float_span_tile(job.x + t * job.x_stride, job.x_stride, mt, panel + r * stride, stride,
                            nr, c, c_end, cols, tile, job.y + t * rows + first_row + r, rows);
        }
      }
    }
    return;
  }
  for (int64_t t = t_begin; t < t_end; t += k.float_token_tile) {
    const int mt = static_cast<int>(std::min<int64_t>(k.float_token_tile, t_end - t));
    for (int64_t r = lo; r < hi; r += k.float_row_tile) {
      const int nr = static_cast<int>(std::min<int64_t>(k.float_row_tile, hi - r));
      k.float_tile(WeightType::kF32, job.x + t * job.x_stride, job.x_stride, mt, panel + r * stride,
                   stride, nr, job.w->cols, job.y + t * rows + first_row + r, rows);
    }
  }
}

// Rows [r_begin, r_end) of a float matrix as stored for tokens [t_begin, t_end).
void RunStoredFloatRange(const Job& job, int64_t r_begin, int64_t r_end, int64_t t_begin,
                         int64_t t_end) {
  const TargetKernels& k = *job.kernels;
  const WeightView& w = *job.w;
  const int64_t cols = w.cols;
  const size_t row_bytes = RowBytes(w.type, cols);
  if (job.decode) {
    // Each weight is used once: read rows straight from the matrix (F16/BF16 widened in the
    // tile). Widening is exact, so this gives the bits the prefill panel gives.
    // Tiles of rows shorter than the prefetch distance ask for later tiles' rows: the hardware
    // prefetcher ramps up on each row too late for them. Longer rows it follows well, and asking
    // for a whole tile at once there was slower (k = 4096 F16: 26.0 -> 24.7 GB/s).
    const bool short_rows =
        static_cast<int64_t>(row_bytes) * k.float_row_tile < kDecodePrefetchBytes;
    const int64_t ahead = short_rows ? DecodePrefetchRows(row_bytes, k.float_row_tile) : 0;
    const uint8_t* weights = static_cast<const uint8_t*>(w.data);
    PrefetchRows(weights, row_bytes, r_begin, std::min(r_end, r_begin + ahead));
    for (int64_t t = t_begin; t < t_end; t += k.float_token_tile) {
      const int mt = static_cast<int>(std::min<int64_t>(k.float_token_tile, t_end - t));
      for (int64_t r = r_begin; r < r_end; r += k.float_row_tile) {
        const int nr = static_cast<int>(std::min<int64_t>(k.float_row_tile, r_end - r));
        if (t == t_begin && ahead > 0) {
          PrefetchRows(weights, row_bytes, std::min(r_end, r + ahead),
                       std::min(r_end, r + ahead + nr));
        }
        k.float_tile(w.type, job.x + t * job.x_stride, job.x_stride, mt,
                     static_cast<const uint8_t*>(w.data) + r * row_bytes, cols, nr, cols,
                     job.y + t * w.rows + r, w.rows);
      }
    }
    return;
  }
  // Prefill: widen (or copy) a panel of rows once and reuse it for every token tile. Rows are
  // padded (PaddedStride) so that a tile's rows do not all fall into the same L1 sets.
  const int64_t stride = PaddedStride(cols);
  float* panel = reinterpret_cast<float*>(  // [panel_rows][stride]
      ThreadScratch(Slot::kPanel, job.panel_rows * stride * sizeof(float)));
  for (int64_t p = r_begin; p < r_end; p += job.panel_rows) {
    const int64_t np = std::min(job.panel_rows, r_end - p);
    for (int64_t r = 0; r < np; ++r) {
      const uint8_t* src = static_cast<const uint8_t*>(w.data) + (p + r) * row_bytes;
      if (w.type == WeightType::kF32) {
        std::memcpy(panel + r * stride, src, cols * sizeof(float));
      } else {
        k.widen(w.type, src, cols, panel + r * stride);
      }
    }
    RunPanelTiles(job, panel, stride, p, 0, np, t_begin, t_end);
  }
}

// Rows [r_begin, r_end) of an F16 or BF16 matrix in row groups, all before its last whole
// group's end, for tokens [t_begin, t_end). Decode: the target's float group tiles where it has
// them (RunFloatGroupRange), asking for rows up to prefetch_end. Else panels of whole groups
// widened to f32 rows (by the target straight from each group where it can, else read back to
// stored rows first) under every token tile: float_tile over the widened rows gives the stored
// rows' bits.
void RunFloatGroups(const Job& job, int64_t r_begin, int64_t r_end, int64_t t_begin, int64_t t_end,
                    int64_t prefetch_end) {
  const TargetKernels& k = *job.kernels;
  const WeightView& w = *job.w;
  const int64_t cols = w.cols;
  const size_t row_bytes = RowBytes(w.type, cols);
  const auto* data = static_cast<const uint8_t*>(w.data);
  const int64_t first = r_begin / kRowGroupRows * kRowGroupRows;
  const bool own_layout = w.layout == k.group_layout;
  if (job.decode && own_layout && k.float_group_tile != nullptr) {
    RunFloatGroupRange(job, r_begin, r_end, t_begin, t_end, prefetch_end);
    return;
  }
  // Panels of whole groups, as many as the prefill panel's rows (every token tile reads a panel
  // in L2; 16 rows at a time read the activations five times as often: 576 columns, 512 tokens,
  // 5% slower).
  const int64_t stride = PaddedStride(cols);
  const int64_t panel_rows = std::max<int64_t>(1, job.panel_rows / kRowGroupRows) * kRowGroupRows;
  float* panel = reinterpret_cast<float*>(  // [panel_rows][stride]
      ThreadScratch(Slot::kPanel, panel_rows * stride * sizeof(float)));
  const int64_t groups_end = (r_end + kRowGroupRows - 1) / kRowGroupRows * kRowGroupRows;
  for (int64_t p = first; p < groups_end; p += panel_rows) {
    const int64_t p_end = std::min(groups_end, p + panel_rows);
    for (int64_t g = p; g < p_end; g += kRowGroupRows) {
      const uint8_t* group = data + static_cast<size_t>(g) * row_bytes;
      float* widened = panel + (g - p) * stride;
      if (own_layout && k.widen_group != nullptr) {
        k.widen_group(w.type, group, cols, widened, stride);
      } else {
        uint8_t* rows = ThreadScratch(Slot::kUngrouped, kRowGroupRows * row_bytes);
        Ungroup(k, w, group, rows);
        for (int r = 0; r < kRowGroupRows; ++r) {
          k.widen(w.type, rows + r * row_bytes, cols, widened + r * stride);
        }
      }
    }
    RunPanelTiles(job, panel, stride, p, std::max(p, r_begin) - p, std::min(p_end, r_end) - p,
                  t_begin, t_end);
  }
}

}  // namespace

void RunFloatRange(const Job& job, int64_t r_begin, int64_t r_end, int64_t t_begin, int64_t t_end,
                   int64_t prefetch_end) {
  const WeightView& w = *job.w;
  const int64_t grouped_end =
      w.layout != WeightLayout::kRowMajor ? w.rows / kRowGroupRows * kRowGroupRows : 0;
  if (r_begin < grouped_end) {
    RunFloatGroups(job, r_begin, std::min(r_end, grouped_end), t_begin, t_end, prefetch_end);
    r_begin = grouped_end;
  }
  if (r_begin < r_end) RunStoredFloatRange(job, r_begin, r_end, t_begin, t_end);
}

}  // namespace reprise::kernels
