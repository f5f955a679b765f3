// UnpackBlocks with AVX2 + F16C, for the AVX2 and AVX-512 targets (every AVX-512 CPU has AVX2).
// Produces exactly what the scalar UnpackBlocks produces (tests compare them byte for byte).
#include <cstring>
#include <type_traits>

#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_reads_avx2.h"
#include "kernels/simd.h"
#include "kernels/unpacked.h"

namespace reprise::kernels {

namespace {

using avx2::FifthBits;
using avx2::Half;
using avx2::Load32;
using avx2::Nibbles;

// Decode streams weights from memory once; the hardware prefetcher alone leaves the unpacking
// waiting on DRAM, so ask for the bytes this far ahead (into L2: see PrefetchRowStretch in
// matmul_avx512.cpp).
constexpr int kPrefetchBytes = 2048;

inline void PrefetchAhead(const void* p, int lines) {
  const char* ahead = static_cast<const char*>(p) + kPrefetchBytes;
  for (int i = 0; i < lines; ++i) _mm_prefetch(ahead + 64 * i, _MM_HINT_T1);
}

inline __m128i Load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline void Store32(uint8_t* p, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}

template <typename Block, bool kPrefetch>
void LegacyBlocks(WeightType type, const void* row, int64_t first, int64_t count, uint8_t* q,
                  float* scale, float* min) {
  const Block* blocks = static_cast<const Block*>(row) + first;
  for (int64_t b = 0; b < count; ++b) {
    const Block& block = blocks[b];
    if constexpr (kPrefetch) PrefetchAhead(&block, 1);
    __m256i codes;
    if constexpr (std::is_same_v<Block, BlockQ8_0>) {
      codes = _mm256_xor_si256(Load32(reinterpret_cast<const uint8_t*>(block.qs)),
                               _mm256_set1_epi8(static_cast<char>(0x80)));
    } else {
      codes = Nibbles(block.qs);
      if constexpr (std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>) {
        codes = _mm256_or_si256(codes, FifthBits(block.qh));
      }
    }
    Store32(q + b * kQk, codes);
    scale[2 * b] = scale[2 * b + 1] = Half(block.d);
    if constexpr (std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>) {
      min[b] = Half(block.m);
    }
  }
  (void)type;
}

// The 6-bit scales and mins of a Q4_K / Q5_K super-block (GetScaleMinK4 for all 8 at once):
//   scale[16] = d * sc[j] for both 16-groups of sub-block j, min[8] = -(dmin * m[j]).
inline void KScalesAndMins(const uint8_t* packed, float d, float dmin, float* scale, float* min) {
  uint32_t words[4];  // bytes 0-7 the scales, bytes 8-15 the mins
  SpreadKScales(packed, words);
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(words));
  const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
  const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)));
  const __m256 scaled = _mm256_mul_ps(_mm256_set1_ps(d), sc);
  _mm256_storeu_ps(scale,
                   _mm256_permutevar8x32_ps(scaled, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)));
  _mm256_storeu_ps(scale + 8,
                   _mm256_permutevar8x32_ps(scaled, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)));
  const __m256 offsets = _mm256_mul_ps(_mm256_set1_ps(dmin), mn);
  _mm256_storeu_ps(min, _mm256_xor_ps(offsets, _mm256_set1_ps(-0.0f)));
}

template <bool kFifthBit, bool kPrefetch>
void KBlocksWithMins(const void* row, int64_t first, int64_t count, uint8_t* q, float* scale,
                     float* min) {
  using Block = std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>;
  const Block* blocks = static_cast<const Block*>(row) + first;
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < count; ++b) {
    const Block& block = blocks[b];
    if constexpr (kPrefetch) PrefetchAhead(&block, 3);
    const float d = Half(block.d);
    const float dmin = Half(block.dmin);
    uint8_t* out = q + b * kQkK;
    __m256i high_bits = _mm256_setzero_si256();
    if constexpr (kFifthBit) high_bits = Load32(block.qh);
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i packed = Load32(block.qs + pair * kQk);
      __m256i low = _mm256_and_si256(packed, low_mask);
      __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask);
      if constexpr (kFifthBit) {
        // Bit (2 pair) of qh[l] for the low sub-block, bit (2 pair + 1) for the high one.
        const __m256i bit_low = _mm256_and_si256(_mm256_srli_epi16(high_bits, 2 * pair), one);
        const __m256i bit_high = _mm256_and_si256(_mm256_srli_epi16(high_bits, 2 * pair + 1), one);
        low = _mm256_or_si256(low, _mm256_slli_epi16(bit_low, 4));
        high = _mm256_or_si256(high, _mm256_slli_epi16(bit_high, 4));
      }
      Store32(out + 2 * pair * kQk, low);
      Store32(out + (2 * pair + 1) * kQk, high);
    }
    KScalesAndMins(block.scales, d, dmin, scale + b * (kQkK / kScaleGroup),
                   min + b * (kQkK / kMinGroup));
  }
}

template <bool kPrefetch>
void Q6KBlocks(const void* row, int64_t first, int64_t count, uint8_t* q, float* scale) {
  const BlockQ6_K* blocks = static_cast<const BlockQ6_K*>(row) + first;
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  for (int64_t b = 0; b < count; ++b) {
    const BlockQ6_K& block = blocks[b];
    if constexpr (kPrefetch) PrefetchAhead(&block, 4);
    for (int half = 0; half < 2; ++half) {
      const __m256i ql0 = Load32(block.ql + 64 * half);
      const __m256i ql1 = Load32(block.ql + 64 * half + 32);
      const __m256i qh = Load32(block.qh + 32 * half);
      auto high = [&](int shift) {  // ((qh >> shift) & 3) << 4, per byte
        return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), two_bits), 4);
      };
      uint8_t* out = q + b * kQkK + 128 * half;
      Store32(out, _mm256_or_si256(_mm256_and_si256(ql0, low_mask), high(0)));
      Store32(out + 32, _mm256_or_si256(_mm256_and_si256(ql1, low_mask), high(2)));
      Store32(out + 64,
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_mask), high(4)));
      Store32(out + 96,
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_mask), high(6)));
    }
    const __m256 d = _mm256_set1_ps(Half(block.d));
    const __m128i scales = Load16(reinterpret_cast<const uint8_t*>(block.scales));
    float* s = scale + b * (kQkK / kScaleGroup);
    _mm256_storeu_ps(s, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(scales))));
    _mm256_storeu_ps(
        s + 8,
        _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(scales, 8)))));
  }
}

template <bool kPrefetch>
void UnpackAny(WeightType type, const void* row, int64_t first_block, int64_t num_blocks,
               uint8_t* q, float* scale, float* min) {
  switch (type) {
    case WeightType::kQ4_0:
      return LegacyBlocks<BlockQ4_0, kPrefetch>(type, row, first_block, num_blocks, q, scale, min);
    case WeightType::kQ4_1:
      return LegacyBlocks<BlockQ4_1, kPrefetch>(type, row, first_block, num_blocks, q, scale, min);
    case WeightType::kQ5_0:
      return LegacyBlocks<BlockQ5_0, kPrefetch>(type, row, first_block, num_blocks, q, scale, min);
    case WeightType::kQ5_1:
      return LegacyBlocks<BlockQ5_1, kPrefetch>(type, row, first_block, num_blocks, q, scale, min);
    case WeightType::kQ8_0:
      return LegacyBlocks<BlockQ8_0, kPrefetch>(type, row, first_block, num_blocks, q, scale, min);
    case WeightType::kQ4_K:
      return KBlocksWithMins<false, kPrefetch>(row, first_block, num_blocks, q, scale, min);
    case WeightType::kQ5_K:
      return KBlocksWithMins<true, kPrefetch>(row, first_block, num_blocks, q, scale, min);
    case WeightType::kQ6_K:
      return Q6KBlocks<kPrefetch>(row, first_block, num_blocks, q, scale);
    default:
      return UnpackBlocks(type, row, first_block, num_blocks, q, scale, min);
  }
}

}  // namespace

void UnpackBlocksAvx2(WeightType type, const void* row, int64_t first_block, int64_t num_blocks,
                      uint8_t* q, float* scale, float* min) {
  UnpackAny<true>(type, row, first_block, num_blocks, q, scale, min);
}

void UnpackBlocksAvx2NoPrefetch(WeightType type, const void* row, int64_t first_block,
                                int64_t num_blocks, uint8_t* q, float* scale, float* min) {
  UnpackAny<false>(type, row, first_block, num_blocks, q, scale, min);
}

void FloatsToHalvesF16c(const float* src, int64_t n, uint16_t* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

}  // namespace reprise::kernels
