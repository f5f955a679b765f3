// MatMul's driver: prepares activations, then walks the weight matrix in tiles with the target's
// kernels (matmul_kernels.h).
//
//   quantized types: activations -> int8 per block of 32 (QuantizeActivationRow), or per
//     super-block of 256 where the target's tiles take that form (TargetKernels::activation_form:
//     then the raw tile serves prefill too, a panel of stored rows at a time)
//   for each thread's range of rows (or of tokens, when rows are too few to share):
//     decode (tokens <= one token tile): tiles read rows in place (float types widen in
//       registers; quantized tiles unpack 512 columns at a time, or a small panel on targets
//       without a raw tile; matrices in row groups, row_groups.h, by the row-group tile, 16
//       rows per call, and so up to kRowGroupMaxTokens tokens, each group serving every token
//       tile in turn; at any count where activations come per super-block, kRowGroupMaxTokens
//       tokens at a time)
//     prefill: for each panel of `panel_rows` rows (~192 KiB, L2): unpack / widen once into
//       padded rows (quantized, on targets with interleaved tiles: then rearranged into blocks
//       of kInterleavedRows, or straight from the matrix where the target can; grouped rows are
//       otherwise first read back a group at a time), then for each tile of tokens, for each
//       tile of rows: the tile kernel
//
// Every output is computed by one tile call over the whole reduction (or, for long float rows in
// prefill, by span calls that carry the tile's lane sums from one to the next: the same
// operations in the same order), with an operation sequence that does not depend on the tile's
// size or on where its weights were read from, so the split into threads, panels, tiles and the
// decode/prefill choice never changes its bits.
#include "kernels/matmul.h"

#include <xmmintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "kernels/matmul_driver.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/row_groups.h"
#include "kernels/unpacked.h"

namespace reprise::kernels {

// The driver's shared pieces (matmul_driver.h).

uint8_t* ThreadScratch(Slot slot, size_t bytes) {
  thread_local AlignedBuffer<uint8_t> buffers[static_cast<int>(Slot::kCount)];
  AlignedBuffer<uint8_t>& buffer = buffers[static_cast<int>(slot)];
  // Buffers sized for L2 (a prefill panel) in whole huge pages: physically contiguous, so a
  // panel covers L2's sets evenly, where from 4 KiB pages it lands on whatever sets its pages'
  // physical addresses pick (the same for the whole life of the thread).
  constexpr size_t kHuge = AlignedBuffer<uint8_t>::kHugePageBytes;
  if (bytes >= (256 << 10)) bytes = (bytes + kHuge - 1) / kHuge * kHuge;
  if (buffer.size() < bytes) buffer.Resize(bytes);
  return buffer.data();
}

int64_t DecodePrefetchRows(size_t row_bytes, int row_tile) {
  const int64_t tile_bytes = static_cast<int64_t>(row_bytes) * row_tile;
  return row_tile * std::max<int64_t>(1, (kDecodePrefetchBytes + tile_bytes - 1) / tile_bytes);
}

void PrefetchRows(const uint8_t* data, size_t row_bytes, int64_t first, int64_t end) {
  const uint8_t* start = data + static_cast<size_t>(first) * row_bytes;
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(0, end - first)) * row_bytes;
  for (size_t line = 0; line < bytes; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(start + line), _MM_HINT_T1);
  }
}

void Ungroup(const TargetKernels& k, const WeightView& w, const uint8_t* group, uint8_t* out) {
  if (k.ungroup_rows != nullptr && w.layout == k.group_layout) {
    k.ungroup_rows(w.type, group, w.cols, out);
  } else {
    UngroupRows(w.type, w.layout, group, w.cols, out);
  }
}

namespace {

size_t RoundUp64(size_t bytes) { return (bytes + 63) / 64 * 64; }

const TargetKernels& KernelsFor(CpuTarget target) {
  switch (target) {
#if defined(REPRISE_KERNELS_AVX2)
    case CpuTarget::kAvx2:
      return Avx2Kernels();
#endif
#if defined(REPRISE_KERNELS_AVX512)
    case CpuTarget::kAvx512:
      return Avx512Kernels();
#endif
    default:
      break;
  }
  return ScalarKernels();
}

// Rows per panel: an unpacked panel of about `budget` bytes, a whole number of row tiles.
int64_t PanelRows(int64_t bytes_per_row, int64_t budget, int row_tile) {
  int64_t rows = std::max<int64_t>(1, budget / std::max<int64_t>(1, bytes_per_row));
  rows = std::clamp<int64_t>(rows / row_tile * row_tile, row_tile, 512);
  return rows;
}

// Decode streams weights once: a panel it needs (rows no tile reads in place) stays in L1.
constexpr int64_t kDecodePanelBytes = 24 << 10;
// Prefill reads a panel once per token tile: it stays in L2 (1 MiB a core on Zen 4 and 5, 2 MiB
// on recent Intel cores).
constexpr int64_t kPrefillPanelBytes = 192 << 10;
constexpr int64_t kSpanPanelBytes = 768 << 10;

// Rows per call of the target's quant_tile_raw.
int RawRowTile(const TargetKernels& k) {
  return k.raw_row_tile > 0 ? k.raw_row_tile : k.quant_row_tile;
}

// Decode splits rows over threads in chunks that a thread which finishes early takes from
// another's share. Decode streams weights from memory, and two threads streaming equal halves
// finish at different times (the machine's other work, memory channels): with fixed halves a
// thread waited for the other at every matmul.
constexpr int kChunksPerShare = 4;
constexpr int kMaxChunkedThreads = 64;

// Runs task(lo, hi, prefetch_end) over [0, count) cut into chunks of whole `grain` units: each
// thread of `pool` owns about count / threads of them (kChunksPerShare chunks) and runs its own
// from the front, then takes others' chunks from their back. prefetch_end is where the running
// thread may prefetch up to: its share's end for its own chunks, the chunk's end for another's.
// Every index runs exactly once; which thread runs it does not matter to the task's results.
template <typename Task>
void ParallelChunks(ThreadPool& pool, int64_t count, int64_t grain, const Task& task) {
  const int threads = pool.num_threads();
  const int64_t units = (count + grain - 1) / grain;
  if (threads <= 1 || threads > kMaxChunkedThreads || units < 2 * threads) {
    pool.ParallelFor(
        static_cast<size_t>(count),
        [&](size_t begin, size_t end) {
          task(static_cast<int64_t>(begin), static_cast<int64_t>(end), static_cast<int64_t>(end));
        },
        static_cast<size_t>(grain));
    return;
  }
  // A share's chunks not yet taken: [front, back) packed as front << 32 | back, claimed by
  // compare-and-swap (a few per share and matmul); one cache line each.
  struct alignas(64) Share {
    std::atomic<uint64_t> bounds{0};
    int64_t first_unit = 0;
    int64_t units = 0;
    int chunks = 0;
  };
  std::array<Share, kMaxChunkedThreads> shares;
  for (int t = 0; t < threads; ++t) {
    Share& share = shares[static_cast<size_t>(t)];
    share.first_unit = units * t / threads;
    share.units = units * (t + 1) / threads - share.first_unit;
    share.chunks = static_cast<int>(std::min<int64_t>(kChunksPerShare, share.units));
    share.bounds.store(static_cast<uint64_t>(share.chunks), std::memory_order_relaxed);
  }
  auto row = [&](const Share& share, int chunk) {  // first index of a chunk (or the share's end)
    const int64_t unit = share.first_unit + share.units * chunk / share.chunks;
    return std::min(count, unit * grain);
  };
  auto claim = [](Share& share, bool from_front, int* chunk) {
    uint64_t bounds = share.bounds.load(std::memory_order_relaxed);
    for (;;) {
      const auto front = static_cast<uint32_t>(bounds >> 32);
      const auto back = static_cast<uint32_t>(bounds);
      if (front >= back) return false;
      const uint64_t next =
          from_front ? (uint64_t{front + 1} << 32 | back) : (uint64_t{front} << 32 | (back - 1));
      if (share.bounds.compare_exchange_weak(bounds, next, std::memory_order_acq_rel)) {
        *chunk = static_cast<int>(from_front ? front : back - 1);
        return true;
      }
    }
  };
  pool.ParallelFor(static_cast<size_t>(threads), [&](size_t begin, size_t end) {
    for (size_t self = begin; self < end; ++self) {
      Share& own = shares[self];
      const int64_t own_end = row(own, own.chunks);
      int chunk = 0;
      while (claim(own, true, &chunk)) task(row(own, chunk), row(own, chunk + 1), own_end);
      for (int k = 1; k < threads; ++k) {
        Share& other = shares[(self + static_cast<size_t>(k)) % static_cast<size_t>(threads)];
        while (claim(other, false, &chunk)) {
          const int64_t hi = row(other, chunk + 1);
          task(row(other, chunk), hi, hi);
        }
      }
    }
  });
}

// A target's optional kernel, or the portable function it stands in for (the same output).
template <typename Function>
Function* OrPortable(Function* target_kernel, Function* portable) {
  return target_kernel != nullptr ? target_kernel : portable;
}

// The activation form w's tiles take on this target (TargetKernels::activation_form).
ActivationForm FormFor(const TargetKernels& k, const WeightView& w) {
  const bool raw_tiles =
      k.activation_form != nullptr && k.quant_tile_raw != nullptr && w.cols <= kMaxRawCols;
  return raw_tiles ? k.activation_form(w.type) : ActivationForm::kPerBlock;
}

// Quantized activations in the calling thread's scratch, in one form (QuantizedRows' layout).
struct ActivationBuffers {
  int8_t* q;
  float* d;
  float* sum;
  int16_t* group_sum;
  int32_t* zero8_lanes;  // both null where no tile reads them
  int32_t* zero16_lanes;
  int32_t* negated_group_sums;  // null where no tile reads them
  int64_t cols;
  ActivationForm form;

  QuantizedRows View() const {
    return {.q = q,
            .d = d,
            .sum = sum,
            .group_sum = group_sum,
            .zero8_lanes = zero8_lanes,
            .zero16_lanes = zero16_lanes,
            .negated_group_sums = negated_group_sums,
            .cols = cols,
            .form = form};
  }
  // Rows [begin, end) of x ([tokens][cols]).
  void Quantize(const TargetKernels& k, const float* x, int64_t begin, int64_t end) const {
    const auto quantize_row = OrPortable(k.quantize_row, QuantizeActivationRow);
    const auto quantize_row_per_super_block =
        OrPortable(k.quantize_row_per_super_block, QuantizeActivationRowPerSuperBlock);
    const auto zero_point_lanes = OrPortable(k.zero_point_lanes_row, ZeroPointLanesRow);
    for (int64_t t = begin; t < end; ++t) {
      if (form == ActivationForm::kPerSuperBlock) {
        quantize_row_per_super_block(x + t * cols, cols, q + t * cols, d + t * (cols / kQkK),
                                     group_sum + t * (cols / 16));
      } else {
        quantize_row(x + t * cols, cols, q + t * cols, d + t * (cols / 16), sum + t * (cols / 32));
        if (zero8_lanes != nullptr) {
          zero_point_lanes(q + t * cols, cols, zero8_lanes + t * (cols / 8),
                           zero16_lanes + t * (cols / 8));
        }
        if (negated_group_sums != nullptr) {
          k.negated_group_sums_row(q + t * cols, cols, negated_group_sums + t * (cols / 16));
        }
      }
    }
  }
};

ActivationBuffers ActivationScratch(const TargetKernels& k, ActivationForm form, int64_t tokens,
                                    int64_t cols) {
  // The per-block form's arrays are the larger: d per 16 (not per 256), and a float per 32 takes
  // as many bytes as an int16 per 16.
  const bool per_block = form == ActivationForm::kPerBlock;
  const bool lanes = per_block && k.zero_point_lanes;
  const size_t q_bytes = RoundUp64(tokens * cols);
  const size_t d_bytes = RoundUp64(tokens * (cols / 16) * sizeof(float));
  const size_t sum_bytes = RoundUp64(tokens * (cols / 32) * sizeof(float));
  const size_t lane_bytes = lanes ? RoundUp64(tokens * (cols / 8) * sizeof(int32_t)) : 0;
  const bool group_sums = per_block && k.negated_group_sums_row != nullptr;
  const size_t group_sum_bytes = group_sums ? RoundUp64(tokens * (cols / 16) * sizeof(int32_t)) : 0;
  uint8_t* scratch = ThreadScratch(
      Slot::kActivations, q_bytes + d_bytes + sum_bytes + 2 * lane_bytes + group_sum_bytes);
  uint8_t* const sums = scratch + q_bytes + d_bytes;
  return {
      .q = reinterpret_cast<int8_t*>(scratch),
      .d = reinterpret_cast<float*>(scratch + q_bytes),
      .sum = per_block ? reinterpret_cast<float*>(sums) : nullptr,
      .group_sum = per_block ? nullptr : reinterpret_cast<int16_t*>(sums),
      .zero8_lanes = lanes ? reinterpret_cast<int32_t*>(sums + sum_bytes) : nullptr,
      .zero16_lanes = lanes ? reinterpret_cast<int32_t*>(sums + sum_bytes + lane_bytes) : nullptr,
      .negated_group_sums =
          group_sums ? reinterpret_cast<int32_t*>(sums + sum_bytes + 2 * lane_bytes) : nullptr,
      .cols = cols,
      .form = form};
}

// MatMuls fuses at most this many matrices into one pass (Q, K and V; gate and up).
constexpr size_t kMaxFusedOutputs = 4;

// Whether the target has a row-group tile for `type` in the grouped `layout`.
bool HasRowGroupTile(const TargetKernels& k, WeightType type, WeightLayout layout) {
  return k.has_row_group_tile != nullptr && k.group_layout == layout && k.has_row_group_tile(type);
}

// Whether the row-group tiles read w's grouped rows: w is in the target's grouped layout, of a
// type the target has a tile for, with rows short enough for a tile (else the panel path reads
// them back).
bool TilesReadRowGroups(const TargetKernels& k, const WeightView& w) {
  return w.layout != WeightLayout::kRowMajor && w.cols <= kMaxRawCols &&
         HasRowGroupTile(k, w.type, w.layout);
}

// The raw tile over rows [r_begin, r_end) of the matrix (row r is row r - row_offset of `raw`)
// for tokens [t_begin, t_end): every token tile over every tile of rows.
void RunRawTiles(const Job& job, const RawRows& raw, int64_t row_offset, int64_t r_begin,
                 int64_t r_end, int64_t t_begin, int64_t t_end) {
  const TargetKernels& k = *job.kernels;
  const int64_t rows = job.w->rows;
  for (int64_t t = t_begin; t < t_end; t += k.quant_token_tile) {
    const int mt = static_cast<int>(std::min<int64_t>(k.quant_token_tile, t_end - t));
    for (int64_t r = r_begin; r < r_end; r += RawRowTile(k)) {
      const int nr = static_cast<int>(std::min<int64_t>(RawRowTile(k), r_end - r));
      k.quant_tile_raw(job.qx, t, mt, raw, r - row_offset, nr, job.y + t * rows + r, rows);
    }
  }
}

// Rows [r_begin, r_end) of a matrix in row groups, all before its last whole group's end, for
// tokens [t_begin, t_end) with the target's raw tile: each group read back to stored rows first.
// For the activation forms no other tile takes.
void RunGroupsOnRawTile(const Job& job, int64_t r_begin, int64_t r_end, int64_t t_begin,
                        int64_t t_end) {
  const TargetKernels& k = *job.kernels;
  const WeightView& w = *job.w;
  const size_t row_bytes = RowBytes(w.type, w.cols);
  uint8_t* rows = ThreadScratch(Slot::kUngrouped, kRowGroupRows * row_bytes);
  const RawRows raw{.type = w.type,
                    .data = rows,
                    .row_bytes = row_bytes,
                    .zero_point = ZeroPoint(w.type),
                    .has_min = HasMin(w.type),
                    .prefetch_rows = 0,
                    .prefetch_end = 0};  // the group is in L1
  for (int64_t g = r_begin / kRowGroupRows * kRowGroupRows; g < r_end; g += kRowGroupRows) {
    Ungroup(k, w, static_cast<const uint8_t*>(w.data) + static_cast<size_t>(g) * row_bytes, rows);
    RunRawTiles(job, raw, g, std::max(g, r_begin), std::min(g + kRowGroupRows, r_end), t_begin,
                t_end);
  }
}

// Rows [r_begin, r_end) for tokens [t_begin, t_end). Decode tiles prefetch rows ahead of them up
// to prefetch_end (>= r_end): a thread that goes on with the next rows lets them stream on.
void RunQuantRange(const Job& job, int64_t r_begin, int64_t r_end, int64_t t_begin, int64_t t_end,
                   int64_t prefetch_end) {
  const TargetKernels& k = *job.kernels;
  const WeightView& w = *job.w;
  const int64_t cols = w.cols;
  const bool has_min = HasMin(w.type);
  const size_t row_bytes = RowBytes(w.type, cols);
  // Rows before grouped_end are in row groups; the rest (all of a row-major matrix) as stored.
  const int64_t grouped_end =
      w.layout != WeightLayout::kRowMajor ? w.rows / kRowGroupRows * kRowGroupRows : 0;
  if (job.decode && r_begin < grouped_end && TilesReadRowGroups(k, w)) {
    RunRowGroupRange(job, r_begin, r_end, grouped_end, t_begin, t_end, prefetch_end);
    r_begin = std::max(r_begin, grouped_end);
    if (r_begin >= r_end) return;
  }
  const bool super_blocks = job.qx.form == ActivationForm::kPerSuperBlock;
  if (super_blocks && r_begin < grouped_end) {
    RunGroupsOnRawTile(job, r_begin, std::min(r_end, grouped_end), t_begin, t_end);
    r_begin = grouped_end;
    if (r_begin >= r_end) return;
  }
  if ((job.decode || super_blocks) && k.quant_tile_raw != nullptr && cols <= kMaxRawCols &&
      r_begin >= grouped_end) {
    // Decode: the tile unpacks each stretch of its rows just before using it. Prefill where the
    // raw tile is the only one (super-block activations): a panel of rows at a time (in L2 after
    // the first token tile) under every token tile.
    const RawRows raw{.type = w.type,
                      .data = static_cast<const uint8_t*>(w.data),
                      .row_bytes = row_bytes,
                      .zero_point = ZeroPoint(w.type),
                      .has_min = has_min,
                      .prefetch_rows = DecodePrefetchRows(row_bytes, RawRowTile(k)),
                      .prefetch_end = std::max(r_end, prefetch_end)};
    // The tiles ask for rows prefetch_rows ahead of their own: ask for the first ones here.
    PrefetchRows(raw.data, row_bytes, r_begin,
                 std::min(raw.prefetch_end, r_begin + raw.prefetch_rows));
    const int64_t panel_rows = job.decode ? r_end - r_begin : job.panel_rows;
    for (int64_t p = r_begin; p < r_end; p += panel_rows) {
      RunRawTiles(job, raw, 0, p, std::min(r_end, p + panel_rows), t_begin, t_end);
    }
    return;
  }
  const size_t q_bytes = RoundUp64(job.panel_rows * cols);
  const size_t scale_bytes = RoundUp64(job.panel_rows * (cols / kScaleGroup) * sizeof(float));
  const size_t min_bytes = RoundUp64(job.panel_rows * (cols / kMinGroup) * sizeof(float));
  uint8_t* scratch = ThreadScratch(Slot::kPanel, q_bytes + scale_bytes + min_bytes);
  uint8_t* q = scratch;                                                    // [panel_rows][cols]
  float* scale = reinterpret_cast<float*>(scratch + q_bytes);              // [panel_rows][cols/16]
  float* min = reinterpret_cast<float*>(scratch + q_bytes + scale_bytes);  // [panel_rows][cols/32]
  const int64_t blocks = cols / static_cast<int64_t>(BlockElements(w.type));
  // Grouped rows are read back in their stored order a group at a time (into `ungrouped`).
  uint8_t* ungrouped =
      grouped_end > 0 ? ThreadScratch(Slot::kUngrouped, kRowGroupRows * row_bytes) : nullptr;
  int64_t ungrouped_group = -1;
  // Rows [from, to) unpacked into the panel that starts at row p.
  const auto unpack_rows = [&](int64_t p, int64_t from, int64_t to) {
    for (int64_t row = from; row < to; ++row) {
      const uint8_t* src = static_cast<const uint8_t*>(w.data) + row * row_bytes;
      if (row < grouped_end) {
        const int64_t group = row / kRowGroupRows;
        if (group != ungrouped_group) {
          Ungroup(k, w, static_cast<const uint8_t*>(w.data) + group * kRowGroupRows * row_bytes,
                  ungrouped);
          ungrouped_group = group;
        }
        src = ungrouped + (row % kRowGroupRows) * row_bytes;
      }
      const int64_t r = row - p;
      k.unpack(w.type, src, 0, blocks, q + r * cols, scale + r * (cols / kScaleGroup),
               has_min ? min + r * (cols / kMinGroup) : nullptr);
    }
  };
  const UnpackedRows panel{.q = q,
                           .scale = scale,
                           .min = has_min ? min : nullptr,
                           .cols = cols,
                           .zero_point = ZeroPoint(w.type),
                           .scales_per_32 = ScalesPer32(w.type)};
  // Whether the target rearranges rows [r, r + nr), laid out as `layout`, straight from the
  // matrix without unpacking them first: a whole row group, or rows as stored.
  const auto interleaves_weights = [&](WeightLayout layout, int64_t r, int nr) {
    const bool whole_group = r % kRowGroupRows == 0 && nr == kRowGroupRows;
    return k.interleaves_weights != nullptr && (layout == WeightLayout::kRowMajor || whole_group) &&
           k.interleaves_weights(w.type, layout);
  };
  for (int64_t p = r_begin; p < r_end; p += job.panel_rows) {
    const int64_t np = std::min(job.panel_rows, r_end - p);
    if (k.interleaved_tile != nullptr) {
      // Rearranged once per panel, then every token tile over every block of rows.
      const size_t block_bytes = k.interleaved_block_bytes(cols);
      const int64_t num_blocks = (np + kInterleavedRows - 1) / kInterleavedRows;
      uint8_t* interleaved = ThreadScratch(Slot::kInterleaved, num_blocks * block_bytes);
      for (int64_t b = 0; b < num_blocks; ++b) {
        const int64_t r = b * kInterleavedRows;
        const int nr = static_cast<int>(std::min<int64_t>(kInterleavedRows, np - r));
        const WeightLayout layout = p + r < grouped_end ? w.layout : WeightLayout::kRowMajor;
        if (interleaves_weights(layout, p + r, nr)) {
          k.interleave_weights(w.type, layout,
                               static_cast<const uint8_t*>(w.data) + (p + r) * row_bytes, row_bytes,
                               cols, nr, interleaved + b * block_bytes);
          continue;
        }
        unpack_rows(p, p + r, p + r + nr);
        k.interleave(panel, r, nr, interleaved + b * block_bytes);
      }
      // The next panel's bytes are asked for into L2 a share at a time between tile calls, so
      // that rearranging it reads L2, not memory (Q4_K at 82 tokens: the rearrangement 9.9% ->
      // 5.4% of the product's time, the product 2% faster).
      const int64_t next_np = std::min(job.panel_rows, r_end - (p + np));
      const char* next = reinterpret_cast<const char*>(w.data) + (p + np) * row_bytes;
      const int64_t next_lines =
          next_np > 0 ? (next_np * static_cast<int64_t>(row_bytes) + 63) / 64 : 0;
      const int64_t calls =
          (t_end - t_begin + kInterleavedTokenTile - 1) / kInterleavedTokenTile * num_blocks;
      int64_t asked = 0, call = 0;
      for (int64_t t = t_begin; t < t_end; t += kInterleavedTokenTile) {
        const int mt = static_cast<int>(std::min<int64_t>(kInterleavedTokenTile, t_end - t));
        for (int64_t b = 0; b < num_blocks; ++b) {
          for (const int64_t until = next_lines * ++call / calls; asked < until; ++asked) {
            _mm_prefetch(next + 64 * asked, _MM_HINT_T1);
          }
          const int64_t r = b * kInterleavedRows;
          const int nr = static_cast<int>(std::min<int64_t>(kInterleavedRows, np - r));
          k.interleaved_tile(job.qx, t, mt, interleaved + b * block_bytes, has_min, nr,
                             job.y + t * w.rows + p + r, w.rows);
        }
      }
      continue;
    }
    unpack_rows(p, p, p + np);
    for (int64_t t = t_begin; t < t_end; t += k.quant_token_tile) {
      const int mt = static_cast<int>(std::min<int64_t>(k.quant_token_tile, t_end - t));
      k.quant_tile(job.qx, t, mt, panel, 0, static_cast<int>(np), job.y + t * w.rows + p, w.rows);
    }
  }
}

}  // namespace

void MatMulOnTarget(CpuTarget target, const WeightView& w, const float* x, int64_t tokens, float* y,
                    ThreadPool& pool) {
  REPRISE_CHECK(CpuTargetSupported(target), "CPU target {} is not supported here",
                CpuTargetName(target));
  REPRISE_CHECK(IsSupportedWeightType(static_cast<uint32_t>(w.type)), "unsupported weight type");
  REPRISE_CHECK(w.rows >= 0 && w.cols >= 0 && tokens >= 0, "negative shape");
  REPRISE_CHECK(w.cols % static_cast<int64_t>(BlockElements(w.type)) == 0,
                "cols {} not a multiple of the {} block", w.cols, WeightTypeName(w.type));
  if (tokens == 0 || w.rows == 0) return;
  if (w.cols == 0) {
    std::fill(y, y + tokens * w.rows, 0.0f);
    return;
  }
  const TargetKernels& kernels = KernelsFor(target);
  const int64_t cols = w.cols;
  Job job{.kernels = &kernels,
          .w = &w,
          .x = x,
          .x_stride = w.cols,
          .qx = {},
          .tokens = tokens,
          .y = y,
          .panel_rows = 0,
          .decode = false};
  const bool quantized = IsQuantized(w.type);
  const int token_tile = quantized ? kernels.quant_token_tile : kernels.float_token_tile;
  const int row_tile = quantized ? kernels.quant_row_tile : kernels.float_row_tile;
  // Matrices in row groups take the row-group tiles up to kRowGroupMaxTokens: below that they
  // beat the prefill panels, both where those would first read each group back to stored rows
  // and where the target rearranges groups straight into its interleaved blocks (AVX-512: Q8_0
  // and the K-quants). A decode step of several sequences streams every matrix from memory,
  // where the tiles' one pass over each group wins, and they win in cache too. Tiles against
  // panels, two threads, Zen 5, at 17 / 24 / 32 tokens: a 1B model's layer matrices Q4_K 1.66x /
  // 1.36x / 1.07x, Q6_K 1.62x / 1.33x / 1.25x, Q5_K 1.12x / 1.03x / 0.96x; 3072 x 2048 in cache
  // Q4_K 1.36x / 1.38x / 1.23x, Q6_K 1.36x / 1.26x / 1.18x, Q5_K 1.02x / 1.03x / 0.99x. Q8_0's
  // tiles, which keep 3-4 tokens' chains in memory, from memory (128 MiB: 1.6x at 12, 1.4x at
  // 16, 1.3x at 24, 1.2x at 32) and in cache (3072 x 2048: 1.5x at 16, 1.25x at 32).
  // Where the activations come per super-block (the raw tile is the only other one) at any
  // count: the row-group tiles split a group's codes once for two tokens (AVX2's Q4_K and Q5_K
  // streams prefilled 1.07-1.13x as fast as stored rows on the raw tile, Zen 3).
  const ActivationForm form = FormFor(kernels, w);
  const bool groups_interleave = kernels.interleaved_tile != nullptr &&
                                 kernels.interleaves_weights != nullptr &&
                                 kernels.interleaves_weights(w.type, w.layout);
  // Float matrices in row groups: thread shares in whole groups; up to kFloatGroupTokens tokens
  // by the target's float group tile, where prefill would widen each group by transposes first
  // (16384 x 4096 F16, 2 threads, Zen 5, at 7 and 8 tokens: 0.92x and 0.86x as fast as stored
  // rows).
  const bool float_groups = !quantized && w.layout != WeightLayout::kRowMajor;
  const bool tiles_read_float_groups =
      float_groups && kernels.float_group_tile != nullptr && w.layout == kernels.group_layout;
  const bool decode = tokens <= token_tile ||
                      (tiles_read_float_groups && tokens <= kFloatGroupTokens) ||
                      (quantized && TilesReadRowGroups(kernels, w) &&
                       (tokens <= kRowGroupMaxTokens ||
                        (!groups_interleave && kernels.row_groups_prefill != nullptr &&
                         kernels.row_groups_prefill(w.type, cols)) ||
                        form == ActivationForm::kPerSuperBlock));
  job.decode = decode;
  // Prefill on interleaved blocks of rows: panels and thread shares in whole blocks.
  const int panel_tile = quantized && !decode && kernels.interleaved_tile != nullptr
                             ? kInterleavedRows
                         : float_groups ? kRowGroupRows
                                        : row_tile;
  // Decode streams weights once: a small panel stays in L1. Prefill reuses a panel for every
  // token tile: size it for L2; a float panel reduced in spans (float_span_tile) most of it,
  // since each row tile reads the span of a token tile's activations from L1 (8192 columns:
  // 4 rows a panel at 192 KiB, every token's activations streamed from L3 per 4 rows).
  const int64_t budget = decode                                             ? kDecodePanelBytes
                         : !quantized && kernels.float_span_tile != nullptr ? kSpanPanelBytes
                                                                            : kPrefillPanelBytes;
  if (quantized) {
    const ActivationBuffers buffers = ActivationScratch(kernels, form, tokens, cols);
    pool.ParallelFor(static_cast<size_t>(tokens), [&](size_t begin, size_t end) {
      buffers.Quantize(kernels, x, static_cast<int64_t>(begin), static_cast<int64_t>(end));
    });
    job.qx = buffers.View();
    // Panels of unpacked rows; of stored rows where the raw tile serves prefill.
    job.panel_rows = buffers.form == ActivationForm::kPerSuperBlock
                         ? PanelRows(static_cast<int64_t>(RowBytes(w.type, cols)), budget, row_tile)
                         : PanelRows(cols + cols / 16 * 4 + cols / 32 * 4, budget, panel_tile);
  } else {
    job.panel_rows = PanelRows(PaddedStride(cols) * 4, budget, row_tile);
    if (!decode) {
      // Activations in padded rows too (see PaddedStride); copying them costs tokens * cols.
      const int64_t stride = PaddedStride(cols);
      float* padded = reinterpret_cast<float*>(  // [tokens][stride]
          ThreadScratch(Slot::kActivations, tokens * stride * sizeof(float)));
      pool.ParallelFor(static_cast<size_t>(tokens), [&](size_t begin, size_t end) {
        for (size_t t = begin; t < end; ++t) {
          std::memcpy(padded + t * stride, x + t * cols, cols * sizeof(float));
        }
      });
      job.x = padded;
      job.x_stride = stride;
    }
  }
  if (quantized && decode) {
    const int grain = w.layout != WeightLayout::kRowMajor ? kRowGroupRows
                      : kernels.quant_tile_raw != nullptr ? RawRowTile(kernels)
                                                          : row_tile;
    ParallelChunks(pool, w.rows, grain, [&](int64_t lo, int64_t hi, int64_t prefetch_end) {
      RunQuantRange(job, lo, hi, 0, tokens, prefetch_end);
    });
    return;
  }
  if (float_groups && decode) {
    ParallelChunks(pool, w.rows, kRowGroupRows, [&](int64_t lo, int64_t hi, int64_t prefetch_end) {
      RunFloatRange(job, lo, hi, 0, tokens, prefetch_end);
    });
    return;
  }
  auto run = [&](const Job& j, int64_t r_begin, int64_t r_end, int64_t t_begin, int64_t t_end) {
    if (quantized) {
      RunQuantRange(j, r_begin, r_end, t_begin, t_end, r_end);
    } else {
      RunFloatRange(j, r_begin, r_end, t_begin, t_end, r_end);
    }
  };
  const int64_t row_tiles = (w.rows + panel_tile - 1) / panel_tile;
  if (row_tiles >= pool.num_threads() || decode) {
    pool.ParallelFor(
        static_cast<size_t>(w.rows),
        [&](size_t begin, size_t end) {
          run(job, static_cast<int64_t>(begin), static_cast<int64_t>(end), 0, tokens);
        },
        static_cast<size_t>(panel_tile));
  } else {
    pool.ParallelFor(
        static_cast<size_t>(tokens),
        [&](size_t begin, size_t end) {
          run(job, 0, w.rows, static_cast<int64_t>(begin), static_cast<int64_t>(end));
        },
        static_cast<size_t>(token_tile));
  }
}

void MatMul(const WeightView& w, const float* x, int64_t tokens, float* y, ThreadPool& pool) {
  MatMulOnTarget(BestCpuTarget(), w, x, tokens, y, pool);
}

void MatMuls(std::span<const MatMulOutput> outputs, const float* x, int64_t tokens,
             ThreadPool& pool) {
  MatMulsOnTarget(BestCpuTarget(), outputs, x, tokens, pool);
}

void MatMulsOnTarget(CpuTarget target, std::span<const MatMulOutput> outputs, const float* x,
                     int64_t tokens, ThreadPool& pool) {
  const TargetKernels& kernels = KernelsFor(target);
  // One token, quantized weights with the same reduction length, tiles that read rows in place:
  // one pass over all the rows. Anything else is MatMul on each (the same bits: every output is
  // one tile call over its whole reduction, wherever the threads' ranges fall).
  bool fused = tokens >= 1 && tokens <= kernels.quant_token_tile && !outputs.empty() &&
               outputs.size() <= kMaxFusedOutputs && kernels.quant_tile_raw != nullptr &&
               CpuTargetSupported(target);
  // One activation form for all of them (they share one quantization).
  for (const MatMulOutput& out : outputs) {
    fused = fused && IsQuantized(out.w->type) && out.w->cols == outputs[0].w->cols &&
            out.w->cols <= kMaxRawCols && out.w->rows > 0 &&
            out.w->cols % static_cast<int64_t>(BlockElements(out.w->type)) == 0 &&
            FormFor(kernels, *out.w) == FormFor(kernels, *outputs[0].w);
  }
  if (!fused || outputs[0].w->cols == 0) {
    for (const MatMulOutput& out : outputs) MatMulOnTarget(target, *out.w, x, tokens, out.y, pool);
    return;
  }
  const int64_t cols = outputs[0].w->cols;
  const ActivationBuffers buffers =
      ActivationScratch(kernels, FormFor(kernels, *outputs[0].w), tokens, cols);
  buffers.Quantize(kernels, x, 0, tokens);
  // Fixed arrays: this runs several times per layer and token, and should not allocate.
  std::array<Job, kMaxFusedOutputs> jobs;
  std::array<int64_t, kMaxFusedOutputs + 1> first_row;  // of each matrix, then the total
  int64_t total = 0;
  const size_t count = std::min(outputs.size(), kMaxFusedOutputs);  // all of them (fused)
  for (size_t m = 0; m < count; ++m) {
    const MatMulOutput& out = outputs[m];
    jobs[m] = (Job{.kernels = &kernels,
                   .w = out.w,
                   .x = x,
                   .x_stride = cols,
                   .qx = buffers.View(),
                   .tokens = tokens,
                   .y = out.y,
                   // Rows the tiles cannot read in place (grouped rows without a row-group tile)
                   // go through a small panel, as in MatMulOnTarget's decode.
                   .panel_rows = PanelRows(cols + cols / 16 * 4 + cols / 32 * 4, kDecodePanelBytes,
                                           kernels.quant_row_tile),
                   .decode = true});
    first_row[m] = total;
    total += out.w->rows;
  }
  first_row[count] = total;
  // Chunks of whole row groups where a matrix is grouped (its rows come in multiples of 16).
  int grain = RawRowTile(kernels);
  for (size_t m = 0; m < count; ++m) {
    if (outputs[m].w->layout != WeightLayout::kRowMajor) grain = kRowGroupRows;
  }
  ParallelChunks(pool, total, grain, [&](int64_t begin, int64_t end, int64_t prefetch_end) {
    for (size_t m = 0; m < count; ++m) {
      const int64_t lo = std::max(begin, first_row[m]);
      const int64_t hi = std::min(end, first_row[m + 1]);
      if (lo >= hi) continue;
      const int64_t ahead = std::min(prefetch_end, first_row[m + 1]);
      RunQuantRange(jobs[m], lo - first_row[m], hi - first_row[m], 0, tokens, ahead - first_row[m]);
    }
  });
}

ActivationForm ActivationFormFor(CpuTarget target, const WeightView& w) {
  return IsQuantized(w.type) ? FormFor(KernelsFor(target), w) : ActivationForm::kPerBlock;
}

WeightLayout PreferredLayout(CpuTarget target, WeightType type) {
  if (!CpuTargetSupported(target)) return WeightLayout::kRowMajor;
  const TargetKernels& kernels = KernelsFor(target);
  const WeightLayout layout = kernels.group_layout;
  const bool grouped = layout != WeightLayout::kRowMajor && HasGroupedLayout(type, layout) &&
                       HasRowGroupTile(kernels, type, layout);
  return grouped ? layout : WeightLayout::kRowMajor;
}

WeightView ArrangeRowGroups(const WeightView& w, WeightLayout layout, void* data) {
  REPRISE_CHECK(w.layout == WeightLayout::kRowMajor && data == w.data, "not a row-major matrix");
  REPRISE_CHECK(HasGroupedLayout(w.type, layout), "{} has no such row-group layout",
                WeightTypeName(w.type));
  const size_t group_bytes = kRowGroupRows * RowBytes(w.type, w.cols);
  AlignedBuffer<uint8_t> rows(group_bytes);
  auto* bytes = static_cast<uint8_t*>(data);
  for (int64_t g = 0; g + kRowGroupRows <= w.rows; g += kRowGroupRows) {
    uint8_t* group = bytes + static_cast<size_t>(g / kRowGroupRows) * group_bytes;
    std::memcpy(rows.data(), group, group_bytes);
    GroupRows(w.type, layout, rows.data(), w.cols, group);
  }
  WeightView grouped = w;
  grouped.layout = layout;
  return grouped;
}

std::string_view MatMulExtensions(CpuTarget target) {
#if defined(REPRISE_KERNELS_AVX512)
  if (target == CpuTarget::kAvx512 && CpuTargetSupported(target) &&
      BestNibbleSplit() == NibbleSplit::kGfni) {
    return "gfni";
  }
#else
  (void)target;
#endif
  return {};
}

void MatMulReference(const WeightView& w, const float* x, int64_t tokens, float* y) {
  AlignedBuffer<float> row(static_cast<size_t>(w.cols));  // [cols]
  for (int64_t r = 0; r < w.rows; ++r) {
    DequantizeRow(w, r, row.data());
    for (int64_t t = 0; t < tokens; ++t) {
      double acc = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) {
        acc += static_cast<double>(x[t * w.cols + c]) * static_cast<double>(row[c]);
      }
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

}  // namespace reprise::kernels
