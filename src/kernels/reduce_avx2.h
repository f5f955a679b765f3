// The one horizontal sum AVX2 kernels use. Its fixed tree (8 -> 4 -> 2 -> 1) is part of the
// exactness contract, so every AVX2 kernel must reduce through it. Include only from files
// compiled for AVX2.
#pragma once

#include "kernels/simd.h"

namespace reprise::kernels {

inline float HorizontalSum(__m256 v) {
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  __m128 one = _mm_add_ss(two, _mm_movehdup_ps(two));
  return _mm_cvtss_f32(one);
}

}  // namespace reprise::kernels
