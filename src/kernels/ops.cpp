#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace reprise::kernels {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum_squares = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum_squares / static_cast<double>(std::max<int64_t>(n, 1)));
  const float inverse = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inverse * weight[i];
}

void Rope(float* x, int num_heads, int32_t position, const RopeParams& params) {
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
    const float cos_theta = static_cast<float>(std::cos(theta));
    const float sin_theta = static_cast<float>(std::sin(theta));
    // Normal: (2i, 2i + 1); NeoX: (i, i + rope_dim / 2).
    const int first = params.style == RopeStyle::kNormal ? 2 * i : i;
    const int second = params.style == RopeStyle::kNormal ? 2 * i + 1 : i + half;
    for (int h = 0; h < num_heads; ++h) {
      float* head = x + static_cast<int64_t>(h) * params.head_dim;
      const float x0 = head[first];
      const float x1 = head[second];
      head[first] = x0 * cos_theta - x1 * sin_theta;
      head[second] = x0 * sin_theta + x1 * cos_theta;
    }
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
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
