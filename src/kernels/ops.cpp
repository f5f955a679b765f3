#include "kernels/ops.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/silu_lanes.h"

namespace reprise::kernels {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  // Four partial sums (element i into sum i % 4), added as (0 + 1) + (2 + 3): four independent
  // chains instead of one, in a fixed order, so the same bits on every call.
  double partial[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int lane = 0; lane < 4; ++lane) {
      partial[lane] += static_cast<double>(x[i + lane]) * x[i + lane];
    }
  }
  for (int lane = 0; i < n; ++i, ++lane) partial[lane] += static_cast<double>(x[i]) * x[i];
  const double sum_squares = (partial[0] + partial[1]) + (partial[2] + partial[3]);
  const float mean = static_cast<float>(sum_squares / static_cast<double>(std::max<int64_t>(n, 1)));
  const float inverse = 1.0f / std::sqrt(mean + eps);
  for (i = 0; i < n; ++i) out[i] = x[i] * inverse * weight[i];
}

void RopeAngles(int32_t position, const RopeParams& params, float* cos_sin) {
  REPRISE_CHECK(
      params.rope_dim % 2 == 0 && params.rope_dim <= params.head_dim && params.rope_dim > 0,
      "rope_dim {} must be even, positive and at most head_dim {}", params.rope_dim,
      params.head_dim);
  const int half = params.rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    // theta_i = position * freq_scale * freq_base^(-2i / rope_dim) [/ freq_factors[i]], in double
    // so that the angle is the same however it is reached.
    double theta = static_cast<double>(position) * params.freq_scale *
                   std::pow(static_cast<double>(params.freq_base),
                            -2.0 * static_cast<double>(i) / params.rope_dim);
    if (params.freq_factors != nullptr) theta /= params.freq_factors[i];
    cos_sin[2 * i] = static_cast<float>(std::cos(theta));
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta));
  }
}

void RopeRotate(float* x, int num_heads, const float* cos_sin, const RopeParams& params) {
  const int half = params.rope_dim / 2;
  for (int h = 0; h < num_heads; ++h) {
    float* head = x + static_cast<int64_t>(h) * params.head_dim;
    for (int i = 0; i < half; ++i) {
      const float cos_theta = cos_sin[2 * i];
      const float sin_theta = cos_sin[2 * i + 1];
      // Normal: (2i, 2i + 1); NeoX: (i, i + rope_dim / 2).
      const int first = params.style == RopeStyle::kNormal ? 2 * i : i;
      const int second = params.style == RopeStyle::kNormal ? 2 * i + 1 : i + half;
      const float x0 = head[first];
      const float x1 = head[second];
      head[first] = x0 * cos_theta - x1 * sin_theta;
      head[second] = x0 * sin_theta + x1 * cos_theta;
    }
  }
}

void Rope(float* x, int num_heads, int32_t position, const RopeParams& params) {
  std::vector<float> cos_sin(static_cast<size_t>(std::max(params.rope_dim, 0)));
  RopeAngles(position, params, cos_sin.data());
  RopeRotate(x, num_heads, cos_sin.data(), params);
}

#if defined(__SSE2__)
namespace {

// silu_lanes.h's operations four lanes at a time in plain SSE2 (every x86-64 CPU): the scalar
// target's SwiGlu, and the bits every wider target's version gives.
struct Lanes4 {
  using Vec = __m128;
  static constexpr int kLanes = 4;
  static Vec Set(float value) { return _mm_set1_ps(value); }
  static Vec Zero() { return _mm_setzero_ps(); }
  static Vec Add(Vec a, Vec b) { return _mm_add_ps(a, b); }
  static Vec Sub(Vec a, Vec b) { return _mm_sub_ps(a, b); }
  static Vec Mul(Vec a, Vec b) { return _mm_mul_ps(a, b); }
  static Vec Div(Vec a, Vec b) { return _mm_div_ps(a, b); }
  static Vec Min(Vec a, Vec b) { return _mm_min_ps(a, b); }
  static Vec Max(Vec a, Vec b) { return _mm_max_ps(a, b); }
  static __m128i ToInt(Vec a) { return _mm_cvtps_epi32(a); }
  static Vec ToFloat(__m128i a) { return _mm_cvtepi32_ps(a); }
  static Vec TwoToThe(__m128i n) {
    return _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(n, _mm_set1_epi32(127)), 23));
  }
  static Vec Load(const float* p) { return _mm_loadu_ps(p); }
  static void Store(float* p, Vec v) { _mm_storeu_ps(p, v); }
};

}  // namespace
#endif

void SwiGluOnTarget(CpuTarget target, const float* gate, const float* up, int64_t n, float* out) {
  REPRISE_CHECK(CpuTargetSupported(target), "CPU target {} is not supported here",
                CpuTargetName(target));
#if defined(REPRISE_KERNELS_AVX512)
  // Four times as many lanes per operation: 3.7x the SSE2 loop on Zen 5 (4,096 elements in L1).
  if (target == CpuTarget::kAvx512) return SwiGluAvx512(gate, up, n, out);
#endif
#if defined(REPRISE_KERNELS_AVX2)
  if (target == CpuTarget::kAvx2) return SwiGluAvx2(gate, up, n, out);
#endif
#if defined(__SSE2__)
  SwiGluLanes<Lanes4>(gate, up, n, out);
#else
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
#endif
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  SwiGluOnTarget(BestCpuTarget(), gate, up, n, out);
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const float max = *std::max_element(x, x + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inverse = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inverse;
}

void Add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace reprise::kernels
