// MatMul's rows in row groups (row_groups.h) as a decode step reads them: each thread's range of
// groups through the target's row-group tiles (quantized rows; F16 and BF16 by its float group
// tiles), and, for one token, through its pair tiles, two groups at once.
#include <algorithm>

#include "kernels/matmul_driver.h"
#include "kernels/row_groups.h"

namespace reprise::kernels {

namespace {

// A thread's range of rows [r_begin, r_end) of a matrix in row groups, as its tiles read it: the
// groups from `first` (the one holding r_begin) to `end` (r_end, or the last whole group's end),
// asking ahead up to `ahead_end`.
struct GroupRange {
  GroupRange(const Job& job, int64_t r_begin_, int64_t r_end_, int64_t grouped_end,
             int64_t prefetch_end)
      : r_begin(r_begin_),
        r_end(r_end_),
        first(r_begin_ / kRowGroupRows * kRowGroupRows),
        end(std::min(r_end_, grouped_end)),
        row_bytes(RowBytes(job.w->type, job.w->cols)),
        data(static_cast<const uint8_t*>(job.w->data)),
        ahead_end(At(std::max(r_end_, prefetch_end))) {}
  const uint8_t* At(int64_t row) const { return data + static_cast<size_t>(row) * row_bytes; }
  // Asks for the rows a stream of groups from `row` reads first (up to `limit`).
  void PrefetchFrom(int64_t row, int64_t limit) const {
    PrefetchRows(data, row_bytes, row,
                 std::min(limit, row + DecodePrefetchRows(row_bytes, kRowGroupRows)));
  }

  int64_t r_begin, r_end, first, end;
  size_t row_bytes;
  const uint8_t* data;
  const uint8_t* ahead_end;
};

// One token over the range's groups, its whole groups as two streams: its first half beside its
// second (pair i reads group i of each) by pair(reads) (GroupRead's y left to the caller's
// outputs: y_at(g) for group g), the rest a group at a time by one_group(g). Two streams per
// thread because memory answered them faster than one: one token over Q4_0 and Q8_0 matrices of
// a 1B model's layers, 2 threads, Zen 5, 1.13-1.35x and 1.09-1.19x as fast as a group at a time
// (the faster in the machine's faster memory spells); a third stream gained nothing over the
// second on those matrices.
template <typename OneGroup, typename Pair>
void ForGroupPairs(const GroupRange& range, float* y, const OneGroup& one_group, const Pair& pair) {
  // The whole groups [paired, paired_end): those inside the range, as [paired, second) beside
  // [second, paired_end).
  const int64_t paired = (range.r_begin + kRowGroupRows - 1) / kRowGroupRows * kRowGroupRows;
  const int64_t pairs = std::max<int64_t>(0, range.end - paired) / kRowGroupRows / 2;
  const int64_t second = paired + pairs * kRowGroupRows;
  const int64_t paired_end = second + pairs * kRowGroupRows;
  if (range.first < paired) one_group(range.first);  // a group the range's start cuts
  if (pairs > 0) range.PrefetchFrom(second, paired_end);
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t a = paired + i * kRowGroupRows, b = second + i * kRowGroupRows;
    // The first stream asks for nothing past the second's start.
    const GroupRead reads[2] = {{.group = range.At(a), .ahead_end = range.At(second), .y = y + a},
                                {.group = range.At(b), .ahead_end = range.ahead_end, .y = y + b}};
    pair(reads);
  }
  for (int64_t g = std::max(range.first, paired_end); g < range.end; g += kRowGroupRows) {
    one_group(g);
  }
}

// One token (t) over the range with the target's quantized pair tile (ForGroupPairs).
void RunRowGroupPairs(const Job& job, const GroupRange& range, int64_t t) {
  const TargetKernels& k = *job.kernels;
  const WeightView& w = *job.w;
  float* y = job.y + t * w.rows;
  ForGroupPairs(
      range, y,
      [&](int64_t g) {
        IntoGroupRows<1>(
            g, range.r_begin, range.r_end, 1, y, w.rows, [&](float* out, int64_t stride) {
              k.row_group_tile(w.type, job.qx, t, 1, range.At(g), range.ahead_end, out, stride);
            });
      },
      [&](const GroupRead(&reads)[2]) { k.row_group_pair_tile(w.type, job.qx, t, reads); });
}

}  // namespace

void RunRowGroupRange(const Job& job, int64_t r_begin, int64_t r_end, int64_t grouped_end,
                      int64_t t_begin, int64_t t_end, int64_t prefetch_end) {
  const TargetKernels& k = *job.kernels;
  const WeightView& w = *job.w;
  const GroupRange range(job, r_begin, r_end, grouped_end, prefetch_end);
  range.PrefetchFrom(range.first, range.end);
  if (t_end - t_begin == 1 && k.has_row_group_pair_tile != nullptr &&
      k.has_row_group_pair_tile(w.type)) {
    RunRowGroupPairs(job, range, t_begin);
    return;
  }
  // Each group serves every token tile of a chunk of tokens while its bytes are in L1, so more
  // tokens than one tile takes still read the matrix once per chunk; the chunk's activations
  // (kRowGroupMaxTokens rows) stay in L2 over the groups. The chunk's first tile asks for the
  // rows ahead; the others read the group again.
  for (int64_t chunk = t_begin; chunk < t_end; chunk += kRowGroupMaxTokens) {
    const int64_t chunk_end = std::min(t_end, chunk + kRowGroupMaxTokens);
    for (int64_t g = range.first; g < range.end; g += kRowGroupRows) {
      const uint8_t* group = range.At(g);
      for (int64_t t = chunk; t < chunk_end; t += kRowGroupTokens) {
        const int mt = static_cast<int>(std::min<int64_t>(kRowGroupTokens, chunk_end - t));
        const uint8_t* const ahead = t == chunk ? range.ahead_end : group;
        IntoGroupRows<kRowGroupTokens>(
            g, r_begin, r_end, mt, job.y + t * w.rows, w.rows, [&](float* out, int64_t stride) {
              k.row_group_tile(w.type, job.qx, t, mt, group, ahead, out, stride);
            });
      }
    }
  }
}

void RunFloatGroupRange(const Job& job, int64_t r_begin, int64_t r_end, int64_t t_begin,
                        int64_t t_end, int64_t prefetch_end) {
  const TargetKernels& k = *job.kernels;
  const WeightView& w = *job.w;
  const int64_t cols = w.cols;
  const GroupRange range(job, r_begin, r_end, r_end, prefetch_end);
  range.PrefetchFrom(range.first, range.end);
  const auto one_group = [&](int64_t g, int64_t t, int mt) {
    IntoGroupRows<kFloatGroupTokens>(
        g, r_begin, r_end, mt, job.y + t * w.rows, w.rows, [&](float* out, int64_t stride) {
          k.float_group_tile(w.type, job.x + t * job.x_stride, job.x_stride, mt, range.At(g), cols,
                             range.ahead_end, out, stride);
        });
  };
  if (t_end - t_begin == 1 && k.float_group_pair_tile != nullptr) {
    ForGroupPairs(
        range, job.y + t_begin * w.rows, [&](int64_t g) { one_group(g, t_begin, 1); },
        [&](const GroupRead(&reads)[2]) {
          k.float_group_pair_tile(w.type, job.x + t_begin * job.x_stride, cols, reads);
        });
    return;
  }
  for (int64_t g = range.first; g < range.end; g += kRowGroupRows) {
    for (int64_t t = t_begin; t < t_end; t += kFloatGroupTokens) {
      one_group(g, t, static_cast<int>(std::min<int64_t>(kFloatGroupTokens, t_end - t)));
    }
  }
}

}  // namespace reprise::kernels
