// The one horizontal sum AVX-512 kernels use. Its fixed tree (16 -> 8 -> 4 -> 2 -> 1) is part of
// the exactness contract, so every AVX-512 kernel must reduce through it. Include only from files
// compiled for AVX-512.
#pragma once

#include <cstdint>

#include "kernels/simd.h"

namespace reprise::kernels {

inline float HorizontalSum(__m512 v) {
  __m256 eight = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  __m128 one = _mm_add_ss(two, _mm_movehdup_ps(two));
  return _mm_cvtss_f32(one);
}

// HorizontalSum of 16 rows' accumulators kept transposed: sums[l] lane r holds row r's lane l.
// Adds +0 to the lanes from `filled` % 16 on where that is not 0, as a masked last step does
// (fma(0, 0, acc)), then takes HorizontalSum's tree across the registers: lane r of the result
// is HorizontalSum of row r's accumulator, bit for bit.
inline __m512 HorizontalSumsOfRows(__m512 (&sums)[16], int64_t filled) {
  if (filled % 16 != 0) {
    for (int64_t l = filled % 16; l < 16; ++l)
      sums[l] = _mm512_add_ps(sums[l], _mm512_setzero_ps());
  }
  __m512 eight[8], four[4];  // HorizontalSum's tree: 8 apart, 4 apart, 2 apart, then neighbours
  for (int i = 0; i < 8; ++i) eight[i] = _mm512_add_ps(sums[i], sums[i + 8]);
  for (int i = 0; i < 4; ++i) four[i] = _mm512_add_ps(eight[i], eight[i + 4]);
  return _mm512_add_ps(_mm512_add_ps(four[0], four[2]), _mm512_add_ps(four[1], four[3]));
}

// MinsDot (quant_reads_avx512.h) finished for 16 rows at once, kept transposed: sums[l] lane r
// holds row r's accumulator lane l after the fused multiply-adds of its sub-blocks l, l + 16, ...
// in order; lane r of the result is row r's MinsDot, bit for bit.
inline __m512 MinsDotOfRows(__m512 (&sums)[16], int64_t sub_blocks) {
  return HorizontalSumsOfRows(sums, sub_blocks);
}

}  // namespace reprise::kernels
