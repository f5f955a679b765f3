// The one horizontal sum AVX-512 kernels use. Its fixed tree (16 -> 8 -> 4 -> 2 -> 1) is part of
// the exactness contract, so every AVX-512 kernel must reduce through it. Include only from files
// compiled for AVX-512.
#pragma once

#include "kernels/simd.h"

namespace reprise::kernels {

inline float HorizontalSum(__m512 v) {
  __m256 eight = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  __m128 one = _mm_add_ss(two, _mm_movehdup_ps(two));
  return _mm_cvtss_f32(one);
}

}  // namespace reprise::kernels
