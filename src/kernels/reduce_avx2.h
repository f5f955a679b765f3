// The one horizontal sum AVX2 kernels use. Its fixed tree (8 -> 4 -> 2 -> 1) is part of the
// exactness contract, so every AVX2 kernel must reduce through it. Also the lane mask of their
// masked reads. Include only from files compiled for AVX2.
#pragma once

#include "kernels/simd.h"

namespace reprise::kernels {

// All-ones in lanes i < n of 8 (any n: none for n <= 0, all for n >= 8), for masked loads and
// stores, which read nothing and give +0 in the other lanes.
inline __m256i LaneMask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline float HorizontalSum(__m256 v) {
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  __m128 one = _mm_add_ss(two, _mm_movehdup_ps(two));
  return _mm_cvtss_f32(one);
}

}  // namespace reprise::kernels
