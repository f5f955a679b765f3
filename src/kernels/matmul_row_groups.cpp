// MatMul's quantized rows in row groups (row_groups.h): each thread's range of groups through
// the target's row-group tiles, and, for one token, through its pair tiles, two groups at once.
#include <algorithm>

#include "kernels/matmul_driver.h"
#include "kernels/row_groups.h"

namespace reprise::kernels {

namespace {

// One token over rows [r_begin, r_end) (before grouped_end) with the target's pair tile: the
// whole groups of the range as two streams, its first half beside its second (pair i reads group
// i of each), the rest a group at a time. Two streams per thread because memory answered them
// faster than one: one token over Q4_0 and Q8_0 matrices of a 1B model's layers, 2 threads,
// Zen 5, 1.13-1.35x and 1.09-1.19x as fast as a group at a time (the faster in the machine's
// faster memory spells); a third stream gained nothing over the second on those matrices.
void RunRowGroupPairs(const Job& job, int64_t r_begin, int64_t r_end, int64_t grouped_end,
                      int64_t t, int64_t prefetch_end) {
  const TargetKernels& k = *job.kernels;
  const WeightView& w = *job.w;
  const size_t row_bytes = RowBytes(w.type, w.cols);
  const auto* data = static_cast<const uint8_t*>(w.data);
  const auto at = [&](int64_t row) { return data + static_cast<size_t>(row) * row_bytes; };
  const int64_t first = r_begin / kRowGroupRows * kRowGroupRows;
  const int64_t end = std::min(r_end, grouped_end);
  // The whole groups [paired, paired + 2 pairs groups): those inside the range.
  const int64_t paired = (r_begin + kRowGroupRows - 1) / kRowGroupRows * kRowGroupRows;
  const int64_t pairs = std::max<int64_t>(0, end - paired) / kRowGroupRows / 2;
  const int64_t second = paired + pairs * kRowGroupRows;
  const int64_t paired_end = second + pairs * kRowGroupRows;
  const uint8_t* ahead_end = at(std::max(r_end, prefetch_end));
  float* y = job.y + t * w.rows;
  const auto one_group = [&](int64_t g) {
    IntoGroupRows<1>(g, r_begin, r_end, 1, y, w.rows, [&](float* out, int64_t stride) {
      k.row_group_tile(w.type, job.qx, t, 1, at(g), ahead_end, out, stride);
    });
  };
  const int64_t prefetch_rows = DecodePrefetchRows(row_bytes, kRowGroupRows);
  PrefetchRows(data, row_bytes, first, std::min(end, first + prefetch_rows));
  if (first < paired) one_group(first);  // a group the range's start cuts
  if (pairs > 0) {
    PrefetchRows(data, row_bytes, second, std::min(paired_end, second + prefetch_rows));
  }
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t a = paired + i * kRowGroupRows, b = second + i * kRowGroupRows;
    // The first stream asks for nothing past the second's start.
    const GroupRead reads[2] = {{.group = at(a), .ahead_end = at(second), .y = y + a},
                                {.group = at(b), .ahead_end = ahead_end, .y = y + b}};
    k.row_group_pair_tile(w.type, job.qx, t, reads);
  }
  for (int64_t g = std::max(first, paired_end); g < end; g += kRowGroupRows) one_group(g);
}

}  // namespace

void RunRowGroupRange(const Job& job, int64_t r_begin, int64_t r_end, int64_t grouped_end,
                      int64_t t_begin, int64_t t_end, int64_t prefetch_end) {
  const TargetKernels& k = *job.kernels;
  const WeightView& w = *job.w;
  if (t_end - t_begin == 1 && k.has_row_group_pair_tile != nullptr &&
      k.has_row_group_pair_tile(w.type)) {
    RunRowGroupPairs(job, r_begin, r_end, grouped_end, t_begin, prefetch_end);
    return;
  }
  const size_t row_bytes = RowBytes(w.type, w.cols);
  const auto* data = static_cast<const uint8_t*>(w.data);
  const uint8_t* ahead_end = data + static_cast<size_t>(std::max(r_end, prefetch_end)) * row_bytes;
  const int64_t first = r_begin / kRowGroupRows * kRowGroupRows;
  const int64_t end = std::min(r_end, grouped_end);
  PrefetchRows(data, row_bytes, first,
               std::min(end, first + DecodePrefetchRows(row_bytes, kRowGroupRows)));
  // Each group serves every token tile of a chunk of tokens while its bytes are in L1, so more
  // tokens than one tile takes still read the matrix once per chunk; the chunk's activations
  // (kRowGroupMaxTokens rows) stay in L2 over the groups. The chunk's first tile asks for the
  // rows ahead; the others read the group again.
  for (int64_t chunk = t_begin; chunk < t_end; chunk += kRowGroupMaxTokens) {
    const int64_t chunk_end = std::min(t_end, chunk + kRowGroupMaxTokens);
    for (int64_t g = first; g < end; g += kRowGroupRows) {
      const uint8_t* group = data + static_cast<size_t>(g) * row_bytes;
      for (int64_t t = chunk; t < chunk_end; t += kRowGroupTokens) {
        const int mt = static_cast<int>(std::min<int64_t>(kRowGroupTokens, chunk_end - t));
        const uint8_t* const ahead = t == chunk ? ahead_end : group;
        IntoGroupRows<kRowGroupTokens>(
            g, r_begin, r_end, mt, job.y + t * w.rows, w.rows, [&](float* out, int64_t stride) {
              k.row_group_tile(w.type, job.qx, t, mt, group, ahead, out, stride);
            });
      }
    }
  }
}

}  // namespace reprise::kernels
