// MatMul's driver: quantizes activations, unpacks panels of weight rows into a per-thread
// buffer once, and walks them in tiles with the target's kernels.
//
//   for each thread's range of rows (or of tokens, when rows are too few to share):
//     for each panel of `panel_rows` rows:      unpack / widen once (L2-sized)
//       for each tile of token_tile tokens:
//         for each tile of row_tile rows:       tile kernel over the whole reduction
//
// Every output is computed by one tile call over all of k, so the split into threads, panels and
// tiles never changes its bits.
#include <algorithm>
#include <cmath>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/unpacked.h"

namespace reprise::kernels {

namespace {

// Each thread keeps its scratch between calls so that the step loop does not allocate; a buffer
// only grows. `Slot` separates the caller's activation buffer from the panel buffer it also uses.
enum class Slot { kActivations, kPanel };

uint8_t* ThreadScratch(Slot slot, size_t bytes) {
  thread_local AlignedBuffer<uint8_t> buffers[2];
  AlignedBuffer<uint8_t>& buffer = buffers[static_cast<int>(slot)];
  if (buffer.size() < bytes) buffer.Resize(bytes);
  return buffer.data();
}

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

struct Job {
  const TargetKernels* kernels;
  const WeightView* w;
  const float* x;       // [tokens][cols] (float types)
  QuantizedRows qx;     // quantized activations (quantized types)
  int64_t tokens;
  float* y;             // [tokens][rows]
  int64_t panel_rows;
  bool decode;          // few tokens: weights are streamed once
};

void RunFloatRange(const Job& job, int64_t r_begin, int64_t r_end, int64_t t_begin,
                   int64_t t_end) {
  const TargetKernels& k = *job.kernels;
  const WeightView& w = *job.w;
  const int64_t cols = w.cols;
  // Decode reads F16/BF16 weights straight from the matrix (each is used once); prefill widens
  // a panel once and reuses it for every token tile. Widening is exact: same bits either way.
  const bool widen = w.type != WeightType::kF32 && !job.decode;
  float* panel = nullptr;  // [panel_rows][cols]
  if (widen) {
    panel = reinterpret_cast<float*>(
        ThreadScratch(Slot::kPanel, job.panel_rows * cols * sizeof(float)));
  }
  const size_t row_bytes = RowBytes(w.type, cols);
  for (int64_t p = r_begin; p < r_end; p += job.panel_rows) {
    const int64_t np = std::min(job.panel_rows, r_end - p);
    const uint8_t* src = static_cast<const uint8_t*>(w.data) + p * row_bytes;
    const void* wp = src;
    WeightType type = w.type;
    if (widen) {
      k.widen(w.type, src, np * cols, panel);
      wp = panel;
      type = WeightType::kF32;
    }
    const size_t element_bytes = type == WeightType::kF32 ? 4 : 2;
    for (int64_t t = t_begin; t < t_end; t += k.float_token_tile) {
      const int mt = static_cast<int>(std::min<int64_t>(k.float_token_tile, t_end - t));
      for (int64_t r = 0; r < np; r += k.float_row_tile) {
        const int nr = static_cast<int>(std::min<int64_t>(k.float_row_tile, np - r));
        k.float_tile(type, job.x + t * cols, cols, mt,
                     static_cast<const uint8_t*>(wp) + r * cols * element_bytes, cols, nr, cols,
                     job.y + t * w.rows + p + r, w.rows);
      }
    }
  }
}

void RunQuantRange(const Job& job, int64_t r_begin, int64_t r_end, int64_t t_begin,
                   int64_t t_end) {
  const TargetKernels& k = *job.kernels;
  const WeightView& w = *job.w;
  const int64_t cols = w.cols;
  const bool has_min = HasMin(w.type);
  const size_t row_bytes = RowBytes(w.type, cols);
  if (job.decode && k.quant_tile_raw != nullptr && cols <= kMaxRawCols) {
    // Decode: the tile unpacks each stretch of its rows just before using it.
    const RawRows raw{.type = w.type,
                      .data = static_cast<const uint8_t*>(w.data),
                      .row_bytes = row_bytes,
                      .zero_point = ZeroPoint(w.type),
                      .has_min = has_min};
    for (int64_t t = t_begin; t < t_end; t += k.quant_token_tile) {
      const int mt = static_cast<int>(std::min<int64_t>(k.quant_token_tile, t_end - t));
      for (int64_t r = r_begin; r < r_end; r += k.quant_row_tile) {
        const int nr = static_cast<int>(std::min<int64_t>(k.quant_row_tile, r_end - r));
        k.quant_tile_raw(job.qx, t, mt, raw, r, nr, job.y + t * w.rows + r, w.rows);
      }
    }
    return;
  }
  const size_t q_bytes = RoundUp64(job.panel_rows * cols);
  const size_t scale_bytes = RoundUp64(job.panel_rows * (cols / kScaleGroup) * sizeof(float));
  const size_t min_bytes = RoundUp64(job.panel_rows * (cols / kMinGroup) * sizeof(float));
  uint8_t* scratch = ThreadScratch(Slot::kPanel, q_bytes + scale_bytes + min_bytes);
  uint8_t* q = scratch;                                               // [panel_rows][cols]
  float* scale = reinterpret_cast<float*>(scratch + q_bytes);         // [panel_rows][cols/16]
  float* min = reinterpret_cast<float*>(scratch + q_bytes + scale_bytes);  // [panel_rows][cols/32]
  const int64_t blocks = cols / static_cast<int64_t>(BlockElements(w.type));
  for (int64_t p = r_begin; p < r_end; p += job.panel_rows) {
    const int64_t np = std::min(job.panel_rows, r_end - p);
    for (int64_t r = 0; r < np; ++r) {
      const uint8_t* src = static_cast<const uint8_t*>(w.data) + (p + r) * row_bytes;
      k.unpack(w.type, src, 0, blocks, q + r * cols, scale + r * (cols / kScaleGroup),
                   has_min ? min + r * (cols / kMinGroup) : nullptr);
    }
    UnpackedRows panel{.q = q,
                       .scale = scale,
                       .min = has_min ? min : nullptr,
                       .cols = cols,
                       .zero_point = ZeroPoint(w.type)};
    for (int64_t t = t_begin; t < t_end; t += k.quant_token_tile) {
      const int mt = static_cast<int>(std::min<int64_t>(k.quant_token_tile, t_end - t));
      for (int64_t r = 0; r < np; r += k.quant_row_tile) {
        const int nr = static_cast<int>(std::min<int64_t>(k.quant_row_tile, np - r));
        k.quant_tile(job.qx, t, mt, panel, r, nr, job.y + t * w.rows + p + r, w.rows);
      }
    }
  }
}

}  // namespace

void QuantizeActivationRow(const float* x, int64_t cols, int8_t* q, float* d, float* sum) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int e = 0; e < 32; ++e) amax = std::max(amax, std::fabs(xb[e]));
    const float scale = amax / 127.0f;
    const float inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t total = 0;
    for (int e = 0; e < 32; ++e) {
      const int value = static_cast<int>(std::nearbyint(xb[e] * inverse));
      q[b * 32 + e] = static_cast<int8_t>(value);
      total += value;
    }
    d[2 * b] = d[2 * b + 1] = scale;
    sum[b] = scale * static_cast<float>(total);
  }
}

void MatMulOnTarget(CpuTarget target, const WeightView& w, const float* x, int64_t tokens,
                    float* y, ThreadPool& pool) {
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
  Job job{.kernels = &kernels, .w = &w, .x = x, .qx = {}, .tokens = tokens, .y = y,
          .panel_rows = 0, .decode = false};
  const bool quantized = IsQuantized(w.type);
  const int token_tile = quantized ? kernels.quant_token_tile : kernels.float_token_tile;
  const int row_tile = quantized ? kernels.quant_row_tile : kernels.float_row_tile;
  const bool decode = tokens <= token_tile;
  job.decode = decode;
  // Decode streams weights once: a small panel stays in L1. Prefill reuses a panel for every
  // token tile: size it for L2.
  const int64_t budget = decode ? (24 << 10) : (192 << 10);
  if (quantized) {
    const size_t q_bytes = RoundUp64(tokens * cols);
    const size_t d_bytes = RoundUp64(tokens * (cols / 16) * sizeof(float));
    const size_t sum_bytes = RoundUp64(tokens * (cols / 32) * sizeof(float));
    uint8_t* scratch = ThreadScratch(Slot::kActivations, q_bytes + d_bytes + sum_bytes);
    int8_t* q = reinterpret_cast<int8_t*>(scratch);                           // [tokens][cols]
    float* d = reinterpret_cast<float*>(scratch + q_bytes);                   // [tokens][cols/16]
    float* sum = reinterpret_cast<float*>(scratch + q_bytes + d_bytes);       // [tokens][cols/32]
    pool.ParallelFor(static_cast<size_t>(tokens), [&](size_t begin, size_t end) {
      for (size_t t = begin; t < end; ++t) {
        QuantizeActivationRow(x + t * cols, cols, q + t * cols, d + t * (cols / 16),
                              sum + t * (cols / 32));
      }
    });
    job.qx = QuantizedRows{.q = q, .d = d, .sum = sum, .cols = cols};
    job.panel_rows = PanelRows(cols + cols / 16 * 4 + cols / 32 * 4, budget, row_tile);
  } else {
    job.panel_rows = PanelRows(cols * 4, budget, row_tile);
  }
  auto run = quantized ? RunQuantRange : RunFloatRange;
  const int64_t row_tiles = (w.rows + row_tile - 1) / row_tile;
  if (row_tiles >= pool.num_threads() || decode) {
    pool.ParallelFor(
        static_cast<size_t>(w.rows),
        [&](size_t begin, size_t end) {
          run(job, static_cast<int64_t>(begin), static_cast<int64_t>(end), 0, tokens);
        },
        static_cast<size_t>(row_tile));
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
