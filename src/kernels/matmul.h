// Matrix products of activations with weight matrices stored in any supported weight type, plus
// row (de)quantization. Each output's bits depend only on its own input row and the weights:
// never on how many rows are in the batch, where the row sits in it, or the thread count.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/thread_pool.h"
#include "kernels/cpu_target.h"
#include "kernels/weight_type.h"

namespace reprise::kernels {

// A weight matrix: `rows` output features, each a row of `cols` input features in `type`
// (RowBytes(type, cols) each; rows [r, r + n) fill bytes [r, r + n) x RowBytes in either layout,
// r and n multiples of 16 in row groups).
struct WeightView {
  WeightType type = WeightType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;  // n: output features
  int64_t cols = 0;  // k: input features (the reduction)
  WeightLayout layout = WeightLayout::kRowMajor;
};

// The layout MatMul on `target` streams matrices of `type` fastest in for one token: kRowGroups
// on AVX-512 for Q4_0, Q8_0, Q4_K, Q5_K and Q6_K, kRowStreams on AVX2 for Q4_0, Q5_0, Q8_0 and
// the K-quants, else kRowMajor. Every target reads every layout, with the same bits.
WeightLayout PreferredLayout(CpuTarget target, WeightType type);

// Rearranges the row-major matrix `w` into `layout` (a grouped one) in place: `data` is w.data,
// writable (a private copy of the file). Returns the view of the result (w with that layout).
// Rows past the last whole group of 16 keep their order. Throws Error for a type without the
// layout.
WeightView ArrangeRowGroups(const WeightView& w, WeightLayout layout, void* data);

// y[t][r] = sum_c x[t][c] * w[r][c]
//   x: [tokens][w.cols] f32, y: [tokens][w.rows] f32.
// Threads split rows of w and tokens, never the reduction.
void MatMul(const WeightView& w, const float* x, int64_t tokens, float* y, ThreadPool& pool);

// Several matrices applied to the same activations (a layer's Q, K and V; gate and up): the
// outputs of MatMul on each, with the activations quantized once and, for one token, one pass of
// the thread pool over all their rows (a decode step issues hundreds of matrix products, and
// each hand-off to the threads costs microseconds).
struct MatMulOutput {
  const WeightView* w = nullptr;
  float* y = nullptr;  // [tokens][w->rows]
};
void MatMuls(std::span<const MatMulOutput> outputs, const float* x, int64_t tokens,
             ThreadPool& pool);

// MatMul on a named target (tests, benchmarks); the target must be supported by this CPU.
// MatMul itself uses BestCpuTarget(). Quantized weight types quantize each activation row per
// block of 32 to int8 (the same way on every target) and use integer dot products.
void MatMulOnTarget(CpuTarget target, const WeightView& w, const float* x, int64_t tokens, float* y,
                    ThreadPool& pool);
void MatMulsOnTarget(CpuTarget target, std::span<const MatMulOutput> outputs, const float* x,
                     int64_t tokens, ThreadPool& pool);

// Instructions beyond its target's that MatMul on `target` uses on this CPU, for reports (they
// never change bits): "gfni" where the AVX-512 one-token tiles split packed nibbles with GFNI,
// else empty.
std::string_view MatMulExtensions(CpuTarget target);

// The plain reference for tests: each weight row dequantized to f32, products summed in double
// in column order, no activation quantization. Slow.
void MatMulReference(const WeightView& w, const float* x, int64_t tokens, float* y);

// out[c] = w[row][c] as f32 (embedding lookup, tests). out: [w.cols]
void DequantizeRow(const WeightView& w, int64_t row, float* out);

// Encodes `cols` floats as one row of `type` (used by make-model and tests). out: RowBytes bytes.
// Supported for every WeightType.
void QuantizeRow(WeightType type, const float* values, int64_t cols, void* out);

}  // namespace reprise::kernels
