// The one horizontal sum AVX2 kernels use. Its fixed tree (8 -> 4 -> 2 -> 1) is part of the
// exactness contract, so every AVX2 kernel must reduce through it (4-lane chains through its last
// two levels). Also the lane mask of their masked reads and the largest of a vector's lanes.
// Include only from files compiled for AVX2.
#pragma once

#include "kernels/simd.h"

namespace reprise::kernels {

// All-ones in lanes i < n of 8 (any n: none for n <= 0, all for n >= 8), for masked loads and
// stores, which read nothing and give +0 in the other lanes.
inline __m256i LaneMask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The same tree's last two levels (4 -> 2 -> 1): the sum of a 4-lane chain (the quantized
// tiles' lanes of 8 products, matmul_avx2.cpp).
inline float HorizontalSum4(__m128 four) {
  __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  __m128 one = _mm_add_ss(two, _mm_movehdup_ps(two));
  return _mm_cvtss_f32(one);
}

inline float HorizontalSum(__m256 v) {
  return HorizontalSum4(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

// The largest of v's lanes (exact in any order).
inline float HorizontalMax(__m256 v) {
  __m128 four = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 two = _mm_max_ps(four, _mm_movehl_ps(four, four));
  __m128 one = _mm_max_ss(two, _mm_movehdup_ps(two));
  return _mm_cvtss_f32(one);
}

// Lane i = the tree's last two levels over v[i]'s four lanes, v packed two to a register
// ([v[2i] | v[2i + 1]]), for HorizontalSums and HorizontalSums4.
inline __m256 PackedSums(const __m256 (&four)[4]) {
  __m256 two[2];  // [v[4i] (0+2, 1+3), v[4i + 2] the same | v[4i + 1], v[4i + 3]]
  for (int i = 0; i < 2; ++i) {
    const __m256d a = _mm256_castps_pd(four[2 * i]), b = _mm256_castps_pd(four[2 * i + 1]);
    two[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)),
                           _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
  }
  const __m256 one = _mm256_add_ps(_mm256_shuffle_ps(two[0], two[1], 0x88),   // lanes 0, 2
                                   _mm256_shuffle_ps(two[0], two[1], 0xDD));  // lanes 1, 3
  // one = [v0, v2, v4, v6 | v1, v3, v5, v7]
  return _mm256_permutevar8x32_ps(one, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Lane i = HorizontalSum4(v[i]), bit for bit.
inline __m256 HorizontalSums4(const __m128 (&v)[8]) {
  __m256 four[4];
  for (int i = 0; i < 4; ++i) four[i] = _mm256_set_m128(v[2 * i + 1], v[2 * i]);
  return PackedSums(four);
}

// The 8 exact lane sums of a block's products (lane i: products 4i..4i+3) as the 4 the chains
// take (lane i: products 4i..4i+3 and 16 + 4i..16 + 4i + 3).
inline __m128i BlockLaneSums(__m256i eight) {
  return _mm_add_epi32(_mm256_castsi256_si128(eight), _mm256_extracti128_si256(eight, 1));
}

// The same 4 lane sums from a block's 16 maddubs pair sums, for codes small enough that two
// pairs add in 16 bits (at most 4 * 31 * 127): the halves first, then one 128-bit madd, a
// 256-bit madd fewer on the pipe that multiplies (two cycles each on Zen 1).
inline __m128i SmallPairsLaneSums(__m256i pairs) {
  return _mm_madd_epi16(
      _mm_add_epi16(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1)),
      _mm_set1_epi16(1));
}

// Lane i = HorizontalSum(v[i]), bit for bit: the same tree taken across the registers (each add
// pairs the lanes HorizontalSum's does, and float addition commutes). 22 operations where eight
// HorizontalSums take 48 and the scalars' stores.
inline __m256 HorizontalSums(const __m256 (&v)[8]) {
  __m256 four[4];  // [v[2i] lanes (0+4, 1+5, 2+6, 3+7) | v[2i + 1] the same]
  for (int i = 0; i < 4; ++i) {
    four[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                            _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
  }
  return PackedSums(four);
}

}  // namespace reprise::kernels
