// SwiGlu with AVX2 vectors (compiled with those flags only for this file; chosen at run time):
// silu_lanes.h's operations eight lanes at a time, the bits of the SSE2 version.
#include "kernels/silu_lanes.h"
#include "kernels/simd.h"

namespace reprise::kernels {

namespace {

struct Lanes8 {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  static Vec Set(float value) { return _mm256_set1_ps(value); }
  static Vec Zero() { return _mm256_setzero_ps(); }
  static Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec Sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec Mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec Div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
  static Vec Min(Vec a, Vec b) { return _mm256_min_ps(a, b); }
  static Vec Max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static __m256i ToInt(Vec a) { return _mm256_cvtps_epi32(a); }
  static Vec ToFloat(__m256i a) { return _mm256_cvtepi32_ps(a); }
  static Vec TwoToThe(__m256i n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
  }
  static Vec Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
};

}  // namespace

void SwiGluAvx2(const float* gate, const float* up, int64_t n, float* out) {
  SwiGluLanes<Lanes8>(gate, up, n, out);
}

}  // namespace reprise::kernels
