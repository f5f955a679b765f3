// The activation quantizers every target shares (matmul_kernels.h): int8 per block of 32, or per
// super-block of 256 with the integer sums of each 16.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace reprise::kernels {

void QuantizeActivationRow(const float* x, int64_t cols, int8_t* q, float* d, float* sum) {
  // Round to nearest even without a libm call: for |v| <= 2^22, adding 1.5 * 2^23 leaves
  // exactly the integer part in the mantissa (the current rounding mode is round-to-even), and
  // subtracting it again is exact. Same result as std::nearbyint, and it vectorises.
  constexpr float kRoundingMagic = 12582912.0f;
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int e = 0; e < 32; ++e) amax = std::max(amax, std::fabs(xb[e]));
    const float scale = amax / 127.0f;
    // Blocks of (near-)denormals quantize to zero: 127 / amax would overflow.
    const float inverse = amax > 1e-30f ? 127.0f / amax : 0.0f;
    int32_t total = 0;
    for (int e = 0; e < 32; ++e) {
      const float rounded = (xb[e] * inverse + kRoundingMagic) - kRoundingMagic;
      const int value = static_cast<int>(rounded);
      q[b * 32 + e] = static_cast<int8_t>(value);
      total += value;
    }
    d[2 * b] = d[2 * b + 1] = scale;
    sum[b] = scale * static_cast<float>(total);
  }
}

void ZeroPointLanesRow(const int8_t* q, int64_t cols, int32_t* eights, int32_t* sixteens) {
  for (int64_t lane = 0; lane < cols / 8; ++lane) {
    // Lane i of block b: elements 4i..4i+3 and 16 + 4i..16 + 4i + 3.
    const int8_t* first = q + 32 * (lane / 4) + 4 * (lane % 4);
    int sum = 0;
    for (int e = 0; e < 4; ++e) sum += first[e] + first[16 + e];
    eights[lane] = 8 * sum;
    sixteens[lane] = 16 * sum;
  }
}

void QuantizeActivationRowPerSuperBlock(const float* x, int64_t cols, int8_t* q, float* d,
                                        int16_t* group_sum) {
  // QuantizeActivationRow's steps (see there) over 256 values per scale.
  constexpr float kRoundingMagic = 12582912.0f;
  for (int64_t s = 0; s < cols / kQkK; ++s) {
    const float* xs = x + s * kQkK;
    float amax = 0.0f;
    for (int e = 0; e < kQkK; ++e) amax = std::max(amax, std::fabs(xs[e]));
    const float inverse = amax > 1e-30f ? 127.0f / amax : 0.0f;
    for (int g = 0; g < kQkK / 16; ++g) {
      int32_t total = 0;
      for (int e = 16 * g; e < 16 * g + 16; ++e) {
        const int value = static_cast<int>((xs[e] * inverse + kRoundingMagic) - kRoundingMagic);
        q[s * kQkK + e] = static_cast<int8_t>(value);
        total += value;
      }
      group_sum[s * (kQkK / 16) + g] = static_cast<int16_t>(total);
    }
    d[s] = amax / 127.0f;
  }
}

}  // namespace reprise::kernels
