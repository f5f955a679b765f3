// SwiGlu with AVX-512 vectors (compiled with those flags only for this file; chosen at run time):
// silu_lanes.h's operations sixteen lanes at a time, the bits of the SSE2 version.
#include "kernels/silu_lanes.h"
#include "kernels/simd.h"

namespace reprise::kernels {

namespace {

struct Lanes16 {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  static Vec Set(float value) { return _mm512_set1_ps(value); }
  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec Add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec Sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec Mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec Div(Vec a, Vec b) { return _mm512_div_ps(a, b); }
  static Vec Min(Vec a, Vec b) { return _mm512_min_ps(a, b); }
  static Vec Max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  static __m512i ToInt(Vec a) { return _mm512_cvtps_epi32(a); }
  static Vec ToFloat(__m512i a) { return _mm512_cvtepi32_ps(a); }
  static Vec TwoToThe(__m512i n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
  }
  static Vec Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

void SwiGluAvx512(const float* gate, const float* up, int64_t n, float* out) {
  SwiGluLanes<Lanes16>(gate, up, n, out);
}

}  // namespace reprise::kernels
