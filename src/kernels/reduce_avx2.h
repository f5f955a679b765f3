// The one horizontal sum AVX2 kernels use. Its fixed tree (8 -> 4 -> 2 -> 1) is part of the
// exactness contract, so every AVX2 kernel must reduce through it, as the per-block quantized
// tiles' eight chains do (BlockChainsSum). Also the lane mask of their masked reads, the largest
// of a vector's lanes, and the per-block tiles' block scales and integer sums.
// Include only from files compiled for AVX2.
#pragma once

#include "kernels/simd.h"

namespace reprise::kernels {

// All-ones in lanes i < n of 8 (any n: none for n <= 0, all for n >= 8), for masked loads and
// stores, which read nothing and give +0 in the other lanes.
inline __m256i LaneMask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The same tree's last two levels (4 -> 2 -> 1).
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

// The per-block quantized tiles' chains (matmul_avx2.cpp's lane layout): a row's block b is
// fused into chain b % kBlockChains.
inline constexpr int kBlockChains = 8;

// The chains' sum, HorizontalSum's tree over chain j as lane j, for the tiles that keep chain j
// in register j (a row per lane): ((c0 + c4) + (c2 + c6)) + ((c1 + c5) + (c3 + c7)).
inline __m256 BlockChainsSum(const __m256 (&c)[kBlockChains]) {
  return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c[0], c[4]), _mm256_add_ps(c[2], c[6])),
                       _mm256_add_ps(_mm256_add_ps(c[1], c[5]), _mm256_add_ps(c[3], c[7])));
}

// Every other float of p[0 .. 2n - 1]: the scales of a span's first n <= 8 blocks from their
// per-16 ones (a block's two are equal; weights' and activations' alike), +0 in the lanes past n.
[[gnu::always_inline]] inline __m256 BlockScales(const float* p, int n) {
  const __m256 lo = n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, LaneMask(2 * n));
  const __m256 hi =
      n >= 8 ? _mm256_loadu_ps(p + 8) : _mm256_maskload_ps(p + 8, LaneMask(2 * n - 8));
  // Even entries: [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6] -> lanes in block order.
  const __m256 even = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8));
}

// Lane j = the sum of v[j]'s four lanes, exact integers: a span's block sums from the four lane
// sums a tile forms for each of its 8 blocks.
inline __m256i BlockSums(const __m128i (&v)[kBlockChains]) {
  const __m128i low = _mm_hadd_epi32(_mm_hadd_epi32(v[0], v[1]), _mm_hadd_epi32(v[2], v[3]));
  const __m128i high = _mm_hadd_epi32(_mm_hadd_epi32(v[4], v[5]), _mm_hadd_epi32(v[6], v[7]));
  return _mm256_set_m128i(high, low);
}

// The 8 exact lane sums of a block's products (lane i: products 4i..4i+3) as 4 (lane i: products
// 4i..4i+3 and 16 + 4i..16 + 4i + 3), on the way to the block's integer (BlockSums).
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

}  // namespace reprise::kernels
