// Decode tiles for AVX2: rows read straight from their stored blocks, with the arithmetic of the
// AVX2 panel tile (matmul_avx2.cpp), so the same bits. Without them decode unpacked every row into
// a panel in L1 and read it back, and streamed quantized matrices at 33-51% of the read bandwidth
// (Zen 3, 2 threads, `bench kernels`).
//
// The columns are walked in spans of 256 (a K-quant super-block, or eight blocks of 32). Once per
// span and row the group scales are unpacked together and multiplied by each token's activation
// scales (the same float products w_scale * x_scale the panel tile forms per block); the codes of
// each block of 32 are then split from the stored bytes in registers. Every integer sum is exact,
// so any instruction sequence that forms lane i's sum of products 4i..4i+3 gives the panel tile's
// integers: codes with a zero point z use maddubs(q, x) - maddubs(z, x) (the second formed once
// per token and block), Q8_0's signed codes maddubs(|w|, sign(x, w)).
//
// Rows are computed one at a time (see DecodeTile).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_reads_avx2.h"
#include "kernels/reduce_avx2.h"
#include "kernels/simd.h"

namespace reprise::kernels {

namespace {

using avx2::FifthBits;
using avx2::Half;
using avx2::Load32;
using avx2::Nibbles;

constexpr int kSpanBlocks = 8;  // blocks of 32 per span

// Eight f16 values `stride` bytes apart -> f32. The halves are gathered in general-purpose
// registers, which keeps the work off the vector ports the products need.
inline __m256 EightHalves(const uint8_t* first, size_t stride) {
  uint64_t words[2] = {0, 0};
  for (int i = 0; i < 8; ++i) {
    uint16_t bits;
    std::memcpy(&bits, first + i * stride, sizeof(bits));
    words[i / 4] |= uint64_t{bits} << (16 * (i % 4));
  }
  return _mm256_cvtph_ps(
      _mm_set_epi64x(static_cast<int64_t>(words[1]), static_cast<int64_t>(words[0])));
}

// How a block's integer products are formed (see the file comment).
enum class Codes { kUnsigned, kZeroPoint, kSigned };

// Per type: a span's stored bytes (kSpanBytes), its scales (SpanScales) and each block's codes
// (BlockCodes). SpanScales writes, for a row's span, the weight scale of each 16-group of its
// first n blocks (kGroupScales 16: each group its own; 8: one per block, both groups equal) and,
// for types with mins, each block's min (kMinsSubtracted: its magnitude, subtracted); values are
// UnpackBlocks'.

template <typename Block>
struct Legacy {
  static constexpr bool kFifth =
      std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>;
  static constexpr bool kMins =
      std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;
  static constexpr bool kEightBit = std::is_same_v<Block, BlockQ8_0>;
  static constexpr Codes kCodes =
      kEightBit ? Codes::kSigned : (kMins ? Codes::kUnsigned : Codes::kZeroPoint);
  static constexpr int kZero = kFifth ? 16 : 8;
  static constexpr int kGroupScales = 8;
  static constexpr size_t kSpanBytes = kSpanBlocks * sizeof(Block);

  // Whole spans in vectors; a row's last, partial span (legacy rows need not fill one) block by
  // block, with +0 past its end as the panel tile's masked reads give.
  static constexpr bool kMinsSubtracted = false;
  static void SpanScales(const uint8_t* span, int n, __m256* scales, __m256* mins) {
    const auto* blocks = reinterpret_cast<const Block*>(span);
    if (n == kSpanBlocks) {
      *scales = EightHalves(span + offsetof(Block, d), sizeof(Block));
      if constexpr (kMins) *mins = EightHalves(span + offsetof(Block, m), sizeof(Block));
      return;
    }
    alignas(32) float s[8] = {}, m[8] = {};
    for (int b = 0; b < n; ++b) {
      s[b] = Half(blocks[b].d);
      if constexpr (kMins) m[b] = Half(blocks[b].m);
    }
    *scales = _mm256_load_ps(s);
    if constexpr (kMins) *mins = _mm256_load_ps(m);
  }
  static __m256i BlockCodes(const uint8_t* span, int b) {
    const Block& block = reinterpret_cast<const Block*>(span)[b];
    if constexpr (kEightBit) {
      return Load32(block.qs);
    } else {
      __m256i codes = Nibbles(block.qs);
      if constexpr (kFifth) codes = _mm256_or_si256(codes, FifthBits(block.qh));
      return codes;
    }
  }
};

// The eight 6-bit scales (bytes 0-7) and mins (bytes 8-15) of a Q4_K / Q5_K super-block from
// its 12 packed bytes (16 are read): GetScaleMinK4 for all eight at once, in a vector register.
//   sc[j] = s[j] & 63, m[j] = s[j + 4] & 63                                  (j < 4)
//   sc[j] = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4, m[j] = (s[j + 4] >> 4) | (s[j] >> 6) << 4
inline __m128i KScaleBytes(const uint8_t* packed) {
  const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  // Low bits from s[0..3] | s[8..11] | s[4..7] | s[8..11]; the top two from s[0..3] and s[4..7].
  const __m128i low =
      _mm_shuffle_epi8(s, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i top =
      _mm_shuffle_epi8(s, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i low_bits =
      _mm_and_si128(low, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const __m128i high_nibbles = _mm_and_si128(
      _mm_srli_epi16(low, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
  const __m128i top_bits =
      _mm_and_si128(_mm_srli_epi16(top, 2),
                    _mm_setr_epi8(0, 0, 0, 0, 48, 48, 48, 48, 0, 0, 0, 0, 48, 48, 48, 48));
  return _mm_or_si128(_mm_or_si128(low_bits, high_nibbles), top_bits);
}

template <typename Block>
struct KQuant {
  static constexpr bool kFifth = std::is_same_v<Block, BlockQ5_K>;
  static constexpr bool kMins = true;
  static constexpr Codes kCodes = Codes::kUnsigned;
  static constexpr int kZero = 0;
  static constexpr int kGroupScales = 8;
  static constexpr size_t kSpanBytes = sizeof(Block);

  // d * sc[j] and dmin * m[j] (the min term is subtracted: fnmadd(dmin * m, x_sum, acc) is the
  // panel tile's fmadd(-(dmin * m), x_sum, acc)), as KScalesAndMins (unpack_avx2.cpp) computes
  // them.
  static constexpr bool kMinsSubtracted = true;
  static void SpanScales(const uint8_t* span, int /*n: whole super-blocks*/, __m256* scales,
                         __m256* mins) {
    uint32_t d_dmin;
    std::memcpy(&d_dmin, span + offsetof(Block, d), sizeof(d_dmin));
    const __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d_dmin)));
    const __m128i bytes = KScaleBytes(span + offsetof(Block, scales));
    const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
    const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)));
    scales[0] = _mm256_mul_ps(_mm256_broadcastss_ps(both), sc);
    *mins = _mm256_mul_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(both)), mn);
  }
  // Sub-blocks 2i and 2i + 1 are the low and high nibbles of qs[32 i .. 32 i + 31]; Q5_K adds
  // bit j of qh[l] as element l's bit 4.
  static __m256i BlockCodes(const uint8_t* span, int j) {
    const Block& block = *reinterpret_cast<const Block*>(span);
    const __m256i packed = Load32(block.qs + kQk * (j / 2));
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    __m256i codes = j % 2 == 0 ? _mm256_and_si256(packed, low_mask)
                               : _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask);
    if constexpr (kFifth) {
      const __m256i qh = Load32(block.qh);
      const __m256i at_bit4 = j <= 4 ? _mm256_slli_epi16(qh, 4 - j) : _mm256_srli_epi16(qh, j - 4);
      codes = _mm256_or_si256(codes, _mm256_and_si256(at_bit4, _mm256_set1_epi8(0x10)));
    }
    return codes;
  }
};

struct Q6K {
  static constexpr bool kMins = false;
  static constexpr Codes kCodes = Codes::kZeroPoint;
  static constexpr int kZero = 32;
  static constexpr int kGroupScales = 16;
  static constexpr size_t kSpanBytes = sizeof(BlockQ6_K);

  // d * scales[g] for the 16 groups, as Q6KBlocks (unpack_avx2.cpp) computes them.
  static void SpanScales(const uint8_t* span, int /*n*/, __m256* scales, __m256* /*mins*/) {
    const auto& block = *reinterpret_cast<const BlockQ6_K*>(span);
    const __m256 d = _mm256_set1_ps(Half(block.d));
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales));
    scales[0] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
    scales[1] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))));
  }
  // Block j: half h = j / 4 (64 bytes of ql, 32 of qh), quarter q = j % 4: the low (q < 2) or
  // high nibbles of ql[32 (q % 2) ..], with bits 2q, 2q + 1 of qh as bits 4-5.
  static __m256i BlockCodes(const uint8_t* span, int j) {
    const auto& block = *reinterpret_cast<const BlockQ6_K*>(span);
    const int half = j / 4, quarter = j % 4;
    const __m256i ql = Load32(block.ql + 64 * half + 32 * (quarter % 2));
    const __m256i qh = Load32(block.qh + 32 * half);
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    const __m256i low = quarter < 2 ? _mm256_and_si256(ql, low_mask)
                                    : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low_mask);
    const int shift = 2 * quarter;  // bits [shift, shift + 1] of qh -> bits 4-5
    const __m256i high =
        shift <= 4 ? _mm256_slli_epi16(qh, 4 - shift) : _mm256_srli_epi16(qh, shift - 4);
    return _mm256_or_si256(low, _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
  }
};

// The token's activation scale of each group of a span's first n blocks, laid out as the type's
// group scales (8: one per block, the block's two being equal; 16: one per group).
template <int kGroupScales>
[[gnu::always_inline]] inline void ActivationSpanScales(const float* d, int n, __m256* out) {
  if (n == kSpanBlocks) {
    const __m256 lo = _mm256_loadu_ps(d), hi = _mm256_loadu_ps(d + 8);
    if constexpr (kGroupScales == 16) {
      out[0] = lo;
      out[1] = hi;
    } else {
      // Even entries: [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6] -> lanes in block order.
      const __m256 even = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
      out[0] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8));
    }
    return;
  }
  static_assert(kGroupScales == 8 || kGroupScales == 16);
  alignas(32) float s[8] = {};
  for (int b = 0; b < n; ++b) s[b] = d[2 * b];
  out[0] = _mm256_load_ps(s);
}

// Asks for a span's bytes of the row `ahead` rows on, into L2, where that row is this thread's:
// every cache line they touch (spans are not line-aligned, and Q6_K keeps the scales a span's
// work starts with in its last bytes).
inline void PrefetchSpan(const RawRows& w, int64_t row, int64_t first_byte, size_t bytes) {
  const size_t n = row < w.prefetch_end ? bytes : 0;  // a zero-trip loop, not a branch around it
  const auto start =
      reinterpret_cast<uintptr_t>(w.data + static_cast<size_t>(row) * w.row_bytes + first_byte);
  for (uintptr_t line = start & ~uintptr_t{63}; line < start + n; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
  }
}

// One row (see DecodeTile), each token's FMA chain beside the others'.
template <typename Type, int MT>
void DecodeTileT(const QuantizedRows& x, int64_t t0, const RawRows& w, int64_t row, float* y,
                 int64_t y_stride) {
  const int64_t cols = x.cols;
  const int64_t blocks = cols / kQk;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MT], min_acc[MT];
  for (int t = 0; t < MT; ++t) acc[t] = min_acc[t] = _mm256_setzero_ps();
  const uint8_t* const row_data = w.data + static_cast<size_t>(row) * w.row_bytes;
  constexpr int kScaleVectors = Type::kGroupScales / 8;
  // w_scale * x_scale per group and token (the products the panel tile forms), for two spans:
  // each span's are formed while the previous span's blocks run, so that the blocks never wait
  // on the latency of unpacking scales.
  alignas(32) float products[2][MT][Type::kGroupScales];
  const auto prepare = [&](int64_t b0, float(&out)[MT][Type::kGroupScales])
      __attribute__((always_inline)) {
    const int n = static_cast<int>(std::min<int64_t>(kSpanBlocks, blocks - b0));
    const int64_t span_byte = b0 / kSpanBlocks * static_cast<int64_t>(Type::kSpanBytes);
    const size_t span_bytes =
        n == kSpanBlocks ? Type::kSpanBytes : Type::kSpanBytes / kSpanBlocks * n;
    __m256 x_scales[MT][kScaleVectors];
    for (int t = 0; t < MT; ++t) {
      ActivationSpanScales<Type::kGroupScales>(x.d + (t0 + t) * (cols / 16) + 2 * b0, n,
                                               x_scales[t]);
    }
    PrefetchSpan(w, row + w.prefetch_rows, span_byte, span_bytes);
    __m256 mins;
    __m256 scales[kScaleVectors];
    Type::SpanScales(row_data + span_byte, n, scales, &mins);
    for (int t = 0; t < MT; ++t) {
      for (int v = 0; v < kScaleVectors; ++v) {
        _mm256_store_ps(out[t] + 8 * v, _mm256_mul_ps(scales[v], x_scales[t][v]));
      }
    }
    if constexpr (Type::kMins) {
      // min_acc += w_min[b .. b + 7] * x_sum[b .. b + 7], +0 past the row's last block; the
      // spans in order, as the panel tile adds them.
      for (int t = 0; t < MT; ++t) {
        const float* sums = x.sum + (t0 + t) * blocks + b0;
        alignas(32) float part[8] = {};
        if (n < kSpanBlocks) std::copy(sums, sums + n, part);
        const __m256 xs = n == kSpanBlocks ? _mm256_loadu_ps(sums) : _mm256_load_ps(part);
        min_acc[t] = Type::kMinsSubtracted ? _mm256_fnmadd_ps(mins, xs, min_acc[t])
                                           : _mm256_fmadd_ps(mins, xs, min_acc[t]);
      }
    }
  };
  prepare(0, products[0]);
  for (int64_t b0 = 0, slot = 0; b0 < blocks; b0 += kSpanBlocks, slot ^= 1) {
    if (b0 + kSpanBlocks < blocks) prepare(b0 + kSpanBlocks, products[slot ^ 1]);
    const int n = static_cast<int>(std::min<int64_t>(kSpanBlocks, blocks - b0));
    const uint8_t* const span =
        row_data + b0 / kSpanBlocks * static_cast<int64_t>(Type::kSpanBytes);
    const float(&span_products)[MT][Type::kGroupScales] = products[slot];
    const auto block = [&](int b) __attribute__((always_inline)) {
      const __m256i codes = Type::BlockCodes(span, b);
      __m256i magnitude = codes;
      if constexpr (Type::kCodes == Codes::kSigned) magnitude = _mm256_abs_epi8(codes);
      for (int t = 0; t < MT; ++t) {
        const __m256i xq = Load32(x.q + (t0 + t) * cols + (b0 + b) * kQk);
        __m256i pairs;
        if constexpr (Type::kCodes == Codes::kSigned) {
          pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(xq, codes));
        } else {
          pairs = _mm256_maddubs_epi16(codes, xq);
          if constexpr (Type::kCodes == Codes::kZeroPoint) {
            pairs =
                _mm256_sub_epi16(pairs, _mm256_maddubs_epi16(_mm256_set1_epi8(Type::kZero), xq));
          }
        }
        const __m256i isum = _mm256_madd_epi16(pairs, ones);
        __m256 scale;
        if constexpr (Type::kGroupScales == 16) {
          // [s(2b) x4, s(2b + 1) x4]
          const __m128 two =
              _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(span_products[t] + 2 * b)));
          scale = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two),
                                           _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
        } else {
          scale = _mm256_broadcast_ss(span_products[t] + b);
        }
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[t]);
      }
    };
    if (n == kSpanBlocks) {
#pragma GCC unroll 8
      for (int b = 0; b < kSpanBlocks; ++b) block(b);
    } else {
      for (int b = 0; b < n; ++b) block(b);
    }
  }
  for (int t = 0; t < MT; ++t) {
    float sum = HorizontalSum(acc[t]);
    if constexpr (Type::kMins) sum += HorizontalSum(min_acc[t]);
    y[t * y_stride] = sum;
  }
}

// One row per call. Rows read side by side are so many streams from memory at once: four rows to
// a call (four FMA chains, faster from L3) streamed Q6_K at half the speed of one row at a time
// from DRAM, and two or four rows lost to one row for every type there but Q8_0 (Zen 3, 2
// threads, 40,000 x 4096 matrices: Q4_K 16.1 -> 15.3 GB/s with four, Q5_K 14.3 -> 20.1, Q6_K
// 6.8 -> 19.2).
template <typename Type>
void DecodeTile(const QuantizedRows& x, int64_t t0, int mt, const RawRows& w, int64_t r0, int nr,
                float* y, int64_t y_stride) {
  for (int r = 0; r < nr; ++r) {
    switch (mt) {
      case 1:
        DecodeTileT<Type, 1>(x, t0, w, r0 + r, y + r, y_stride);
        break;
      case 2:
        DecodeTileT<Type, 2>(x, t0, w, r0 + r, y + r, y_stride);
        break;
      case 3:
        DecodeTileT<Type, 3>(x, t0, w, r0 + r, y + r, y_stride);
        break;
      default:
        DecodeTileT<Type, 4>(x, t0, w, r0 + r, y + r, y_stride);
        break;
    }
  }
}

}  // namespace

void DecodeTileAvx2(const QuantizedRows& x, int64_t t0, int mt, const RawRows& w, int64_t r0,
                    int nr, float* y, int64_t y_stride) {
  switch (w.type) {
    case WeightType::kQ4_0:
      return DecodeTile<Legacy<BlockQ4_0>>(x, t0, mt, w, r0, nr, y, y_stride);
    case WeightType::kQ4_1:
      return DecodeTile<Legacy<BlockQ4_1>>(x, t0, mt, w, r0, nr, y, y_stride);
    case WeightType::kQ5_0:
      return DecodeTile<Legacy<BlockQ5_0>>(x, t0, mt, w, r0, nr, y, y_stride);
    case WeightType::kQ5_1:
      return DecodeTile<Legacy<BlockQ5_1>>(x, t0, mt, w, r0, nr, y, y_stride);
    case WeightType::kQ8_0:
      return DecodeTile<Legacy<BlockQ8_0>>(x, t0, mt, w, r0, nr, y, y_stride);
    case WeightType::kQ4_K:
      return DecodeTile<KQuant<BlockQ4_K>>(x, t0, mt, w, r0, nr, y, y_stride);
    case WeightType::kQ5_K:
      return DecodeTile<KQuant<BlockQ5_K>>(x, t0, mt, w, r0, nr, y, y_stride);
    case WeightType::kQ6_K:
      return DecodeTile<Q6K>(x, t0, mt, w, r0, nr, y, y_stride);
    default:
      REPRISE_CHECK(false, "no AVX2 decode tile for {}", WeightTypeName(w.type));
  }
}

}  // namespace reprise::kernels
