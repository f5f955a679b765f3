// Decode tiles for AVX2 of the legacy types (Q4_0 .. Q8_0): rows read straight from their stored
// blocks, with the arithmetic of the AVX2 panel tile (matmul_avx2.cpp), so the same bits. Without
// them decode unpacked every row into a panel in L1 and read it back, and streamed quantized
// matrices at 33-51% of the read bandwidth (Zen 3, 2 threads, `bench kernels`). The K-quants
// have their own tiles, over activations per super-block (k_quant_avx2.cpp).
//
// The columns are walked in spans of eight blocks of 32. Once per span and row the block scales
// are unpacked together and multiplied by each token's activation scales (the same float products
// w_scale * x_scale the panel tile forms per block); the codes of each block of 32 are then split
// from the stored bytes in registers. Every integer sum is exact, so any instruction sequence
// that forms a block's integer gives the panel tile's: small codes add their halves' maddubs(q, x)
// pairs in 16 bits before one 128-bit madd into four lane sums, less z * (lane sums of x) for a
// zero point z (formed once per token: QuantizedRows::zero8_lanes, zero16_lanes); Q8_0's signed
// codes take maddubs(|w|, sign(x, w)) and add in 32 bits. A span's eight blocks' lane sums
// become its eight block integers together (BlockSums), converted and fused into the eight
// chains at once.
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
using avx2::Load32;
using avx2::Nibbles;
using avx2::PrefetchStretch;
using avx2::RowAhead;

constexpr int kSpanBlocks = 8;  // blocks of 32 per span
static_assert(kSpanBlocks == kBlockChains, "a span's blocks go to the chains one each");

// Eight f16 values kStride bytes apart -> f32: each inserted into place straight from memory, eight
// instructions where gathering them in general-purpose registers took about twenty (the tiles
// are bound by instructions issued: 1.03-1.11x faster decode of the legacy types, Zen 3).
template <size_t kStride>
inline __m256 EightHalves(const uint8_t* first) {
  uint16_t halves[8];
  for (int i = 0; i < 8; ++i) std::memcpy(&halves[i], first + i * kStride, sizeof(halves[i]));
  __m128i bits = _mm_cvtsi32_si128(halves[0]);
  bits = _mm_insert_epi16(bits, halves[1], 1);
  bits = _mm_insert_epi16(bits, halves[2], 2);
  bits = _mm_insert_epi16(bits, halves[3], 3);
  bits = _mm_insert_epi16(bits, halves[4], 4);
  bits = _mm_insert_epi16(bits, halves[5], 5);
  bits = _mm_insert_epi16(bits, halves[6], 6);
  bits = _mm_insert_epi16(bits, halves[7], 7);
  return _mm256_cvtph_ps(bits);
}

// The first n (< 8) of eight f16 values `stride` bytes apart -> f32, +0 in the other lanes: a
// row's partial last span. Gathered in general-purpose registers, which keeps it off a round
// trip through memory (a vector load of scalar stores the CPU cannot forward).
inline __m256 FirstHalves(const uint8_t* first, size_t stride, int n) {
  uint64_t words[2] = {0, 0};
  for (int i = 0; i < n; ++i) {
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
// (BlockCodes). SpanScales writes, for a row's span, the weight scale of each of its first n
// blocks and, for types with mins, each block's min; values are UnpackBlocks'.

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
  static constexpr size_t kSpanBytes = kSpanBlocks * sizeof(Block);

  // A row's last span may be partial (legacy rows need not fill one): +0 past its end, as the
  // panel tile's masked reads give.
  static void SpanScales(const uint8_t* span, int n, __m256* scales, __m256* mins) {
    if (n == kSpanBlocks) {
      *scales = EightHalves<sizeof(Block)>(span + offsetof(Block, d));
      if constexpr (kMins) *mins = EightHalves<sizeof(Block)>(span + offsetof(Block, m));
      return;
    }
    *scales = FirstHalves(span + offsetof(Block, d), sizeof(Block), n);
    if constexpr (kMins) *mins = FirstHalves(span + offsetof(Block, m), sizeof(Block), n);
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

// One row (see DecodeTile), each token's FMA chain beside the others'.
template <typename Type, int MT>
void DecodeTileT(const QuantizedRows& x, int64_t t0, const RawRows& w, int64_t row, float* y,
                 int64_t y_stride) {
  const int64_t cols = x.cols;
  const int64_t blocks = cols / kQk;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MT];  // the panel tile's chains, chain j in lane j
  __m256 min_acc[MT];
  for (int t = 0; t < MT; ++t) {
    acc[t] = _mm256_setzero_ps();
    min_acc[t] = _mm256_setzero_ps();
  }
  const uint8_t* const row_data = w.data + static_cast<size_t>(row) * w.row_bytes;
  const uint8_t* const ahead = RowAhead(w, row, row_data);
  // w_scale * x_scale per group and token (the products the panel tile forms), for two spans:
  // each span's are formed while the previous span's blocks run, so that the blocks never wait
  // on the latency of unpacking scales.
  alignas(32) float products[2][MT][kSpanBlocks];
  // Spans of n blocks from b0. Whole spans (n a constant kSpanBlocks where these are inlined) run
  // apart from a row's partial last span, so that their code has no width tests.
  const auto prepare = [&](int64_t b0, int n, float(&out)[MT][kSpanBlocks])
      __attribute__((always_inline)) {
    const int64_t span_byte = b0 / kSpanBlocks * static_cast<int64_t>(Type::kSpanBytes);
    __m256 x_scales[MT];
    for (int t = 0; t < MT; ++t) {
      x_scales[t] = BlockScales(x.d + (t0 + t) * (cols / 16) + 2 * b0, n);
    }
    // A whole span's lines even for a row's partial last span: past the row's end they are the
    // next row's (a prefetch never faults).
    PrefetchStretch<Type::kSpanBytes>(ahead + span_byte);
    __m256 mins;
    __m256 scales;
    Type::SpanScales(row_data + span_byte, n, &scales, &mins);
    for (int t = 0; t < MT; ++t) _mm256_store_ps(out[t], _mm256_mul_ps(scales, x_scales[t]));
    if constexpr (Type::kMins) {
      // min_acc += w_min[b .. b + 7] * x_sum[b .. b + 7], +0 past the row's last block; the
      // spans in order, as the panel tile adds them.
      for (int t = 0; t < MT; ++t) {
        const float* sums = x.sum + (t0 + t) * blocks + b0;
        const __m256 xs =
            n == kSpanBlocks ? _mm256_loadu_ps(sums) : _mm256_maskload_ps(sums, LaneMask(n));
        min_acc[t] = _mm256_fmadd_ps(mins, xs, min_acc[t]);
      }
    }
  };
  const auto run_span = [&](int64_t b0, int n, const float(&span_products)[MT][kSpanBlocks])
      __attribute__((always_inline)) {
    const uint8_t* const span =
        row_data + b0 / kSpanBlocks * static_cast<int64_t>(Type::kSpanBytes);
    // Each block's four lane sums, then the span's block sums into the chains at once (a partial
    // span's missing blocks sum to 0, against products of +0).
    __m128i lane_sums[MT][kBlockChains];
    if (n < kSpanBlocks) {
      for (int t = 0; t < MT; ++t) {
        for (__m128i& sums : lane_sums[t]) sums = _mm_setzero_si128();
      }
    }
    const auto block = [&](int b) __attribute__((always_inline)) {
      const __m256i codes = Type::BlockCodes(span, b);
      __m256i magnitude = codes;
      if constexpr (Type::kCodes == Codes::kSigned) magnitude = _mm256_abs_epi8(codes);
      for (int t = 0; t < MT; ++t) {
        const __m256i xq = Load32(x.q + (t0 + t) * cols + (b0 + b) * kQk);
        __m128i isum;
        if constexpr (Type::kCodes == Codes::kSigned) {
          isum = BlockLaneSums(_mm256_madd_epi16(
              _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(xq, codes)), ones));
        } else {
          isum = SmallPairsLaneSums(_mm256_maddubs_epi16(codes, xq));
          if constexpr (Type::kCodes == Codes::kZeroPoint) {
            isum = _mm_sub_epi32(isum, _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                           x.ZeroLanes(Type::kZero, t0 + t) + 4 * (b0 + b))));
          }
        }
        lane_sums[t][b] = isum;
      }
    };
    if (n == kSpanBlocks) {
#pragma GCC unroll 8
      for (int b = 0; b < kSpanBlocks; ++b) block(b);
    } else {
      for (int b = 0; b < n; ++b) block(b);
    }
    for (int t = 0; t < MT; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(BlockSums(lane_sums[t])),
                               _mm256_load_ps(span_products[t]), acc[t]);
    }
  };
  const int64_t whole_spans = blocks / kSpanBlocks;
  const int tail = static_cast<int>(blocks % kSpanBlocks);
  if (whole_spans > 0) {
    prepare(0, kSpanBlocks, products[0]);
  } else {
    prepare(0, tail, products[0]);
  }
  int slot = 0;
  for (int64_t s = 0; s < whole_spans; ++s, slot ^= 1) {
    const int64_t b0 = s * kSpanBlocks;
    if (s + 1 < whole_spans) {
      prepare(b0 + kSpanBlocks, kSpanBlocks, products[slot ^ 1]);
    } else if (tail > 0) {
      prepare(b0 + kSpanBlocks, tail, products[slot ^ 1]);
    }
    run_span(b0, kSpanBlocks, products[slot]);
  }
  if (tail > 0) run_span(whole_spans * kSpanBlocks, tail, products[slot]);
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
    case WeightType::kQ5_K:
    case WeightType::kQ6_K:
      return KQuantTileAvx2(x, t0, mt, w, r0, nr, y, y_stride);
    default:
      REPRISE_CHECK(false, "no AVX2 decode tile for {}", WeightTypeName(w.type));
  }
}

}  // namespace reprise::kernels
