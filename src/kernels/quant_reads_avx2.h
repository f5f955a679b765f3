// Readers of quantized blocks' bytes into AVX2 registers, shared by the AVX2 unpacker and the
// AVX2 decode tiles so that both split codes the same way, and the tiles' prefetch of the rows
// ahead. Include only from files compiled for AVX2 + F16C.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/matmul_kernels.h"
#include "kernels/simd.h"

namespace reprise::kernels::avx2 {

inline float Half(uint16_t bits) { return _cvtsh_ss(bits); }

inline __m256i Load32(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The 4 bytes at p in every 32-bit lane (a token's activations against a word of 8 rows).
inline __m256i Broadcast4(const void* p) {
  int32_t word;
  std::memcpy(&word, p, sizeof(word));
  return _mm256_set1_epi32(word);
}

// The AVX2 K-quant tiles' sum, the same in the row-by-row tile (k_quant_avx2.cpp) and the
// row-streams tiles (k_quant_streams_avx2.cpp): per row, token and super-block the exact integers
// S = sum_j sc[j] dot(codes_j, x_j) and M = sum_j m[j] sum(x_j) (Q6_K: S over its groups with
// the codes less 32, no M); chain k (of kKQuantChains) takes the super-blocks
// s = k mod kKQuantChains in order, each + S * (d * x_d), then - M * (dmin * x_d) (fused); the
// result is (chain 0 + chain 2) + (chain 1 + chain 3).
inline constexpr int kKQuantChains = 4;

// That tree: over one row's chains in lanes (chain k in lane k), and over 8 rows' chains in
// registers (chain k of row r in lane r of c[k]).
inline float KQuantChainsSum(__m128 chains) {
  const __m128 two = _mm_add_ps(chains, _mm_movehl_ps(chains, chains));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
}
inline __m256 KQuantChainsSum(const __m256 (&c)[kKQuantChains]) {
  return _mm256_add_ps(_mm256_add_ps(c[0], c[2]), _mm256_add_ps(c[1], c[3]));
}

// 0x10 in each byte whose bit kBit is set in `bits` (a fifth bit of each byte's code, kept at a
// known bit of its own byte: Q5_0's recoded qh, Q5_K's qh).
template <int kBit>
inline __m256i FifthBitsAt(__m256i bits) {
  __m256i at_four = bits;
  if constexpr (kBit < 4) at_four = _mm256_slli_epi16(bits, 4 - kBit);
  if constexpr (kBit > 4) at_four = _mm256_srli_epi16(bits, kBit - 4);
  return _mm256_and_si256(at_four, _mm256_set1_epi8(0x10));
}

// 16 packed bytes -> 32 codes: low nibbles (elements 0-15), then high nibbles (16-31).
inline __m256i Nibbles(const uint8_t* qs) {
  const __m256i both =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifted = _mm256_blend_epi32(both, _mm256_srli_epi16(both, 4), 0xF0);
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0F));
}

// 0x10 in byte j where bit j of the little-endian 32-bit mask is set.
inline __m256i FifthBits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  // Byte j looks at byte j / 8 of the mask, then at bit j % 8 of it.
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// Where a tile reading row `row` of w asks for lines ahead: row `row + w.prefetch_rows` where that
// row is this thread's (< w.prefetch_end), else `fallback`, lines the tile reads anyway. A select,
// so that the prefetches that follow need no branch.
inline const uint8_t* RowAhead(const RawRows& w, int64_t row, const uint8_t* fallback) {
  const int64_t ahead = row + w.prefetch_rows;
  return ahead < w.prefetch_end ? w.data + static_cast<size_t>(ahead) * w.row_bytes : fallback;
}

// Asks for every cache line of [p, p + kBytes) into L2, whatever p's alignment: one prefetch per
// 64 bytes and one at the last byte, unrolled. A tile issues these once per block of its row; a
// loop over the lines cost one instruction in eight of a K-quant decode tile's.
template <size_t kBytes>
inline void PrefetchStretch(const uint8_t* p) {
  for (size_t offset = 0; offset < kBytes; offset += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + offset), _MM_HINT_T1);
  }
  if constexpr ((kBytes - 1) % 64 != 0) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kBytes - 1), _MM_HINT_T1);
  }
}

}  // namespace reprise::kernels::avx2
