#include "kernels/ops.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

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

// silu(g) * u = g / (1 + e^-g) * u for four lanes, e^x by Cephes' expf polynomial (about 1 ulp;
// arguments clamped to [-87, 88], where neither the result nor 2^n leave the normal floats).
// Plain SSE2 (every x86-64 CPU) with no libm call: the same operations on every CPU target, so
// the same bits everywhere, at a fraction of a libm exp per element.
inline __m128 SiluTimes(__m128 g, __m128 u) {
  // x = -g, clamped
  const __m128 x = _mm_min_ps(_mm_max_ps(_mm_sub_ps(_mm_setzero_ps(), g), _mm_set1_ps(-87.0f)),
                              _mm_set1_ps(88.0f));
  // n = round(x / ln2) (round-to-nearest mode), r = x - n ln2 in two parts, the first exact.
  const __m128i n_int = _mm_cvtps_epi32(_mm_mul_ps(x, _mm_set1_ps(1.44269504088896341f)));
  const __m128 n = _mm_cvtepi32_ps(n_int);
  __m128 r = _mm_sub_ps(x, _mm_mul_ps(n, _mm_set1_ps(0.693359375f)));
  r = _mm_sub_ps(r, _mm_mul_ps(n, _mm_set1_ps(-2.12194440e-4f)));
  __m128 p = _mm_set1_ps(1.9875691500e-4f);
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.3981999507e-3f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(8.3334519073e-3f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(4.1665795894e-2f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.6666665459e-1f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(5.0000001201e-1f));
  const __m128 y = _mm_add_ps(_mm_add_ps(_mm_mul_ps(p, _mm_mul_ps(r, r)), r), _mm_set1_ps(1.0f));
  const __m128 two_to_n =
      _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(n_int, _mm_set1_epi32(127)), 23));
  const __m128 e = _mm_mul_ps(y, two_to_n);
  return _mm_mul_ps(_mm_div_ps(g, _mm_add_ps(_mm_set1_ps(1.0f), e)), u);
}

}  // namespace

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    _mm_storeu_ps(out + i, SiluTimes(_mm_loadu_ps(gate + i), _mm_loadu_ps(up + i)));
  }
  if (i < n) {  // the tail through the same lanes, so every element gets the same bits
    float g[4] = {}, u[4] = {}, result[4];
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    _mm_storeu_ps(result, SiluTimes(_mm_loadu_ps(g), _mm_loadu_ps(u)));
    std::copy(result, result + (n - i), out + i);
  }
}
#else
void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}
#endif

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
