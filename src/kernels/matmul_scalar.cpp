// The portable MatMul kernels: one output at a time, plain sums in column order.
#include "kernels/matmul_kernels.h"
#include "kernels/unpacked.h"

namespace reprise::kernels {

namespace {

float WeightAt(WeightType type, const void* w, int64_t index) {
  switch (type) {
    case WeightType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(w)[index]);
    case WeightType::kBF16:
      return Bfloat16ToFloat(static_cast<const uint16_t*>(w)[index]);
    default:
      return static_cast<const float*>(w)[index];
  }
}

void FloatTile(WeightType type, const float* x, int64_t x_stride, int mt, const void* w,
               int64_t w_stride, int nr, int64_t cols, float* y, int64_t y_stride) {
  for (int t = 0; t < mt; ++t) {
    const float* xt = x + t * x_stride;
    for (int r = 0; r < nr; ++r) {
      float acc = 0.0f;
      for (int64_t c = 0; c < cols; ++c) acc += xt[c] * WeightAt(type, w, r * w_stride + c);
      y[t * y_stride + r] = acc;
    }
  }
}

// Per 16 elements: an exact integer sum, scaled by (weight scale * activation scale); then the
// min terms (min * d * sum(q)) per block of 32.
void QuantTile(const QuantizedRows& x, int64_t t0, int mt, const UnpackedRows& w, int64_t r0,
               int nr, float* y, int64_t y_stride) {
  const int64_t cols = x.cols;
  const int64_t groups = cols / 16;
  for (int t = 0; t < mt; ++t) {
    const int8_t* xq = x.q + (t0 + t) * cols;
    const float* xd = x.d + (t0 + t) * groups;
    const float* xsum = x.sum + (t0 + t) * (cols / 32);
    for (int r = 0; r < nr; ++r) {
      const uint8_t* wq = w.q + (r0 + r) * cols;
      const float* ws = w.scale + (r0 + r) * groups;
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        int32_t isum = 0;
        for (int e = 0; e < 16; ++e) {
          isum += (static_cast<int32_t>(wq[g * 16 + e]) - w.zero_point) * xq[g * 16 + e];
        }
        acc += static_cast<float>(isum) * (ws[g] * xd[g]);
      }
      if (w.min != nullptr) {
        const float* wm = w.min + (r0 + r) * (cols / 32);
        float min_acc = 0.0f;
        for (int64_t b = 0; b < cols / 32; ++b) min_acc += wm[b] * xsum[b];
        acc += min_acc;
      }
      y[t * y_stride + r] = acc;
    }
  }
}

void Widen(WeightType type, const void* src, int64_t n, float* dst) {
  const uint16_t* bits = static_cast<const uint16_t*>(src);
  if (type == WeightType::kF16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = HalfToFloat(bits[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = Bfloat16ToFloat(bits[i]);
  }
}

}  // namespace

const TargetKernels& ScalarKernels() {
  static const TargetKernels kernels = {
      .float_token_tile = 4,
      .float_row_tile = 4,
      .quant_token_tile = 4,
      .quant_row_tile = 4,
      .float_tile = FloatTile,
      .quant_tile = QuantTile,
      .widen = Widen,
      .unpack = UnpackBlocks,
  };
  return kernels;
}

}  // namespace reprise::kernels
