// Q4_K and Q5_K row groups (row_groups.h) read with AVX-512, 16 rows at once (row r in lane r):
// the packed 6-bit scales and mins, one byte of each row's word, and Q5_K's fifth-bit masks.
// Shared by the row-group decode tiles and the prefill interleaving, so that both take a group
// apart the same way. Include only from files compiled for AVX-512.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/row_groups.h"
#include "kernels/simd.h"

namespace reprise::kernels {
namespace {

// The 6-bit scales and mins of a super-block's 8 sub-blocks from its packed words a (bytes
// 0-3), b (4-7) and c (8-11), as GetScaleMinK4 reads them: byte t of each lane's word in
// scales[0] is sub-block t's scale, in scales[1] sub-block 4 + t's; the same for mins.
struct PackedScales {
  __m512i scales[2];
  __m512i mins[2];
};
inline PackedScales UnpackScaleBytes(__m512i a, __m512i b, __m512i c) {
  const __m512i low6 = _mm512_set1_epi8(0x3F), low4 = _mm512_set1_epi8(0x0F);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  PackedScales p;
  p.scales[0] = _mm512_and_si512(a, low6);
  p.mins[0] = _mm512_and_si512(b, low6);
  // (c & 15) | (a >> 6) << 4, and (c >> 4) | (b >> 6) << 4: (A & C) | B, ternary 0xEA.
  p.scales[1] =
      _mm512_ternarylogic_epi32(c, low4, _mm512_and_si512(_mm512_srli_epi32(a, 2), bits45), 0xEA);
  p.mins[1] = _mm512_ternarylogic_epi32(_mm512_srli_epi32(c, 4), low4,
                                        _mm512_and_si512(_mm512_srli_epi32(b, 2), bits45), 0xEA);
  return p;
}

// Byte t (0-3) of each lane's word, as an integer (a byte shuffle: the shift port is the busiest).
inline __m512i ByteOfWords(__m512i v, int t) {
  constexpr int kZero = static_cast<int>(0x80808000u);
  return _mm512_shuffle_epi8(
      v, _mm512_set4_epi32(kZero | (12 + t), kZero | (8 + t), kZero | (4 + t), kZero | t));
}

// The Q5_K group block at p's mask for code word u of chunk j, half 0 (low nibbles) or 1.
inline __mmask64 FifthBits(const uint8_t* p, int j, int u, int half) {
  uint64_t mask;
  std::memcpy(&mask, p + Q5KFifthBitMask(j, u, half), sizeof(mask));
  return mask;
}

}  // namespace
}  // namespace reprise::kernels
