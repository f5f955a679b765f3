// K-quant row groups (row_groups.h) read with AVX-512, 16 rows at once (row r in lane r): Q4_K
// and Q5_K's packed 6-bit scales and mins, one byte of each row's word, Q5_K's fifth-bit masks,
// and Q6_K's codes and scales.
// Shared by the row-group decode tiles and the prefill interleaving, so that both take a group
// apart the same way. Include only from files compiled for AVX-512.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/quant_blocks.h"
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

// Quarter k's codes (0-63) of a code word from the ql and qh words that hold them (see
// Q6KGroupCodes).
inline __m512i Q6KCodesOf(__m512i ql, __m512i qh, int k) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i nibbles =
      k < 2 ? _mm512_and_si512(ql, nibble) : _mm512_and_si512(_mm512_srli_epi16(ql, 4), nibble);
  const __m512i high = k == 0   ? _mm512_slli_epi16(qh, 4)
                       : k == 1 ? _mm512_slli_epi16(qh, 2)
                       : k == 2 ? qh
                                : _mm512_srli_epi16(qh, 2);
  return _mm512_or_si512(nibbles, _mm512_and_si512(high, _mm512_set1_epi8(0x30)));
}
// A Q6_K group block (its 52 words of 16 rows: ql 0-31, qh 32-47, scales 48-51; then the 16 d).
// Element 128 n + 32 k + l (half n, quarter k, l < 32) is the low (k < 2) or high nibble of ql
// byte 64 n + 32 (k % 2) + l with bits 2k, 2k + 1 of qh byte 32 n + l as bits 4-5, in group
// 8 n + 2 k + l / 16 (h = l / 16). Code word w of that group: each row's 4 codes (0-63).
inline __m512i Q6KGroupCodes(const uint8_t* block, int n, int k, int h, int w) {
  constexpr int kQh = offsetof(BlockQ6_K, qh) / 4;
  const __m512i ql = _mm512_loadu_si512(block + 64 * (16 * n + 8 * (k % 2) + 4 * h + w));
  const __m512i qh = _mm512_loadu_si512(block + 64 * (kQh + 8 * n + 4 * h + w));
  return Q6KCodesOf(ql, qh, k);
}
// The 16 rows' d of a Q6_K group block, as f32.
inline __m512 Q6KGroupD(const uint8_t* block) {
  constexpr int64_t kDAt = kRowGroupRows * offsetof(BlockQ6_K, d);
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kDAt)));
}
// d * scale of group s (0-15): signed byte s % 4 of scale word s / 4; the product UnpackBlocks
// makes.
inline __m512 Q6KGroupScale(const uint8_t* block, __m512 d, int s) {
  constexpr int kScales = offsetof(BlockQ6_K, scales) / 4;
  const __m512i bytes =
      _mm512_slli_epi32(_mm512_loadu_si512(block + 64 * (kScales + s / 4)), 8 * (3 - s % 4));
  return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_srai_epi32(bytes, 24)));
}

}  // namespace
}  // namespace reprise::kernels
