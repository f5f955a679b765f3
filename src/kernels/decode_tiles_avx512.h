// The one-token decode tiles for AVX-512 (see decode_avx512.cpp), written once over how packed
// 4-bit codes are split (NibbleSplit): decode_avx512.cpp instantiates them with shifts,
// decode_avx512_gfni.cpp, compiled with GFNI, with byte affine transforms. Everything here has
// internal linkage, so neither file's code (built with its own instruction set) can stand in for
// the other's at link time. Include only from those two files.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

#include "kernels/quant_reads_avx512.h"

namespace reprise::kernels {
namespace {

constexpr int64_t kSpan = 256;
constexpr int kDecodeRowTile = 4;  // the driver's quant_row_tile

// The 16 group scales of a row's span, [s0 .. s15] (one per 16 columns; +0 past the row's end),
// and that span's codes per chunk of 64. Derived from the stored blocks; the values UnpackBlocks
// writes.
template <NibbleSplit kSplit>
struct Q4KSpan {
  using Block = BlockQ4_K;
  static constexpr int64_t kBlockElements = kQkK;
  static constexpr bool kPairedCodes = false;
  // Chunk `quarter`: its 32 packed bytes read into both halves, the low nibbles kept in the
  // first and the high ones in the second. A load broadcast takes no shuffle port, where one
  // 64-byte read regrouped by two shuffles per pair of chunks took two of it (the shuffle port
  // was the tile's busiest on an Intel core).
  static __m512i Codes(const Block* b, int quarter) {
    const __m512i bytes = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * quarter)));
    return NibblesOf<kSplit, 0xF0>(bytes);
  }
};

template <NibbleSplit kSplit>
struct Q5KSpan {
  using Block = BlockQ5_K;
  static constexpr int64_t kBlockElements = kQkK;
  // With GFNI, chunk by chunk (Codes); with shifts, two chunks from one read (PairCodes).
  static constexpr bool kPairedCodes = kSplit != NibbleSplit::kGfni;
  // Chunk `quarter` (sub-blocks 2 quarter and 2 quarter + 1) as Q4KSpan reads its nibbles, each
  // byte's fifth bit moved from qh by a second byte affine transform: output bit 4 = input bit
  // 2 quarter of qh[l] in the first half, bit 2 quarter + 1 in the second. Three operations
  // per chunk and row, where PairCodes takes about four and a half with two on the shuffle port.
  static __m512i Codes(const Block* b, int quarter) {
    const __m512i nibbles = NibblesOf<kSplit, 0xF0>(_mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * quarter))));
    const __m512i qh =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh)));
    // Row 3 of a qword's matrix (its byte 3) picks the input bit of output bit 4.
    const long long low = (1ll << (2 * quarter)) << 24, high = (1ll << (2 * quarter + 1)) << 24;
    const __m512i fifth = _mm512_gf2p8affine_epi64_epi8(
        qh, _mm512_setr_epi64(low, low, low, low, high, high, high, high), 0);
    return _mm512_or_si512(nibbles, fifth);
  }
  // Chunks 2 pair and 2 pair + 1: one 64-byte read of packed nibbles, [lo_a lo_b] and
  // [hi_a hi_b] regrouped into [lo_a hi_a] and [lo_b hi_b], plus the fifth bits: sub-block j
  // takes bit j of qh[l] as its element l's bit 4 (chunk q holds sub-blocks 2q and 2q + 1). (Read
  // per chunk as Q4KSpan reads its codes, it measured no faster.)
  static void PairCodes(const Block* b, int pair, __m512i (&codes)[2]) {
    const __m512i bytes = _mm512_loadu_si512(b->qs + 64 * pair);
    const __m512i low_mask = _mm512_set1_epi8(0x0F);
    const __m512i low = _mm512_and_si512(bytes, low_mask);
    const __m512i high = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low_mask);
    const __m512i qh =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh)));
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    for (int k = 0; k < 2; ++k) {
      const int sub = 4 * pair + 2 * k;
      const __m512i nibbles =
          k == 0 ? _mm512_shuffle_i64x2(low, high, 0x44) : _mm512_shuffle_i64x2(low, high, 0xEE);
      const __m512i select =
          _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(1 << sub))),
                             _mm256_set1_epi8(static_cast<char>(1 << (sub + 1))), 1);
      codes[k] = _mm512_mask_add_epi8(nibbles, _mm512_test_epi8_mask(qh, select), nibbles, bit4);
    }
  }
};

template <NibbleSplit kSplit>
struct Q6KSpan {
  using Block = BlockQ6_K;
  static constexpr int64_t kBlockElements = kQkK;
  static constexpr bool kPairedCodes = true;
  // Quarters 2 half and 2 half + 1 (as Q6KSource::Codes): the low and the high nibbles of
  // ql[0..63] of that half, with qh bits (0, 2) and (4, 6) as bits 4-5.
  static void PairCodes(const Block* b, int half, __m512i (&codes)[2]) {
    const __m512i low = _mm512_loadu_si512(b->ql + 64 * half);
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    const __m256i* qh_bytes = reinterpret_cast<const __m256i*>(b->qh + 32 * half);
    if constexpr (kSplit == NibbleSplit::kGfni) {
      // Bits 4-5 straight from qh, read into both halves, by byte affine transforms: output bits
      // 4 and 5 (matrix rows 3 and 2) from qh bits (0, 1) | (2, 3) for quarter 2 half and
      // (4, 5) | (6, 7) for the next, per half; the nibbles of `low` joined to them by one
      // ternary-logic operation (a | (b & c): 0xF8) or an or.
      const auto pick = [](int bit) { return ((1ll << bit) << 24) | ((2ll << bit) << 16); };
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(qh_bytes));
      const __m512i first = _mm512_gf2p8affine_epi64_epi8(
          qh,
          _mm512_setr_epi64(pick(0), pick(0), pick(0), pick(0), pick(2), pick(2), pick(2), pick(2)),
          0);
      const __m512i second = _mm512_gf2p8affine_epi64_epi8(
          qh,
          _mm512_setr_epi64(pick(4), pick(4), pick(4), pick(4), pick(6), pick(6), pick(6), pick(6)),
          0);
      codes[0] = _mm512_ternarylogic_epi32(first, low, nibble, 0xF8);
      codes[1] = _mm512_or_si512(NibblesOf<kSplit, 0xFF>(low), second);
    } else {
      const __m256i qh = _mm256_loadu_si256(qh_bytes);
      const __m512i high =
          _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
      codes[0] = _mm512_or_si512(_mm512_and_si512(low, nibble),
                                 _mm512_and_si512(_mm512_slli_epi16(high, 4), bits45));
      codes[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low, 4), nibble),
                                 _mm512_and_si512(high, bits45));
    }
  }
  static __m512 Scales(const Block* b, int /*blocks*/, float* /*mins*/) {
    const __m512 sc = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales))));
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b->d)), sc);
  }
};

// Q4_0, Q5_0 and Q8_0: a span is eight blocks of 32 (fewer at a row's end); each block's d is
// the scale of both its 16-groups (LegacySpanScales). A chunk's codes are LegacyPairCodes' (Q4_0
// and Q5_0 nibbles split as kSplit says; Q8_0 has none), a masked last block's LegacyBlockCodes'.
template <typename BlockT, NibbleSplit kSplit>
struct LegacySpan {
  using Block = BlockT;
  static constexpr int64_t kBlockElements = kQk;
  static constexpr bool kPairedCodes = false;
  static __m512 Scales(const Block* b, int blocks, float* /*mins*/) {
    return LegacySpanScales(b, blocks);
  }
  static __m512i Codes(const Block* b, int quarter) {
    return LegacyPairCodes<Block, kSplit>(b + 2 * quarter);
  }
  static __m512i LastBlockCodes(const Block* b, int quarter) {
    return _mm512_zextsi256_si512(LegacyBlockCodes(b[2 * quarter]));
  }
};

template <int NR, bool kZeroPoint, typename Span>
void DecodeTileT(const QuantizedRows& x, int64_t t0, const RawRows& w, int64_t r0, float* y,
                 int64_t /*y_stride*/) {
  using Block = typename Span::Block;
  constexpr bool kMins = std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ5_K>;
  const int64_t cols = x.cols;
  const int8_t* xq = x.q + t0 * cols;
  const float* xd = x.d + t0 * (cols / 16);
  const __m512i zero_bytes = _mm512_set1_epi8(static_cast<char>(w.zero_point));
  alignas(64) float mins[kMins ? NR : 1][kMins ? kMaxRawCols / 32 : 1];
  const Block* rows[NR];
  RowAhead ahead[NR];  // the rows this tile asks for as it goes, found once
  for (int r = 0; r < NR; ++r) {
    rows[r] = reinterpret_cast<const Block*>(w.data + (r0 + r) * w.row_bytes);
    ahead[r] = RowAhead(w, r0 + w.prefetch_rows + r);
  }
  __m512 chains = _mm512_setzero_ps();  // the four-row layout (GroupSumsOfRows)
  for (int64_t c = 0; c < cols; c += kSpan) {
    const int64_t n = std::min(kSpan, cols - c);
    const int blocks = static_cast<int>(n / Span::kBlockElements);
    const int64_t first = c / Span::kBlockElements;
    for (int r = 0; r < NR; ++r) {
      ahead[r].Ask(first * static_cast<int64_t>(sizeof(Block)),
                   blocks * static_cast<int64_t>(sizeof(Block)));
    }
    const __mmask16 groups =
        n == kSpan ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n / 16)) - 1);
    const __m512 x_scales = _mm512_maskz_loadu_ps(groups, xd + c / 16);
    // w_scale * x_scale per 16-group of the span, [s0 .. s15] per row (Q4_K, Q5_K: per sub-block
    // of 32, rows 2h and 2h + 1 side by side in lanes 0-7 and 8-15 of folded[2h]; a sub-block's
    // two groups have one weight scale and one activation scale, so the product is the groups'
    // own). Rows past NR: +0.
    __m512 folded[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                        _mm512_setzero_ps()};
    if constexpr (kMins) {  // Q4_K, Q5_K: every row's scales unpacked at once
      const Block* span_blocks[NR];
      float* span_mins[NR];
      for (int r = 0; r < NR; ++r) {
        span_blocks[r] = rows[r] + first;
        span_mins[r] = mins[r] + c / 32;
      }
      __m512 sub_block_scales[(NR + 1) / 2];
      KSubBlockScalesOfRows(span_blocks, sub_block_scales, span_mins);
      // The activation's scale of each sub-block (its groups' equal scales), for both rows.
      const __m512 x_sub_blocks = _mm512_permutexvar_ps(
          _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14), x_scales);
      for (int h = 0; 2 * h < NR; ++h) {
        folded[2 * h] = _mm512_mul_ps(sub_block_scales[h], x_sub_blocks);
      }
    } else {
      for (int r = 0; r < NR; ++r) {
        folded[r] =
            _mm512_maskz_mul_ps(groups, Span::Scales(rows[r] + first, blocks, nullptr), x_scales);
      }
    }
    // The scales of chunk `quarter` in the four-row layout: lane 4 j + r = row r's group
    // 4 quarter + j (sub-block 2 quarter + j / 2), by one or two two-source permutes.
    auto chunk_scales = [&](int quarter) {
      if constexpr (kMins) {
        const __m512i index = _mm512_add_epi32(
            _mm512_setr_epi32(0, 8, 16, 24, 0, 8, 16, 24, 1, 9, 17, 25, 1, 9, 17, 25),
            _mm512_set1_epi32(2 * quarter));
        return _mm512_permutex2var_ps(folded[0], index, folded[2]);
      } else {
        const __m512i index = _mm512_add_epi32(
            _mm512_setr_epi32(0, 16, 0, 16, 1, 17, 1, 17, 2, 18, 2, 18, 3, 19, 3, 19),
            _mm512_set1_epi32(4 * quarter));
        const __m512 low = _mm512_permutex2var_ps(folded[0], index, folded[1]);
        if constexpr (NR <= 2) return low;
        return _mm512_mask_blend_ps(0xCCCC, low,
                                    _mm512_permutex2var_ps(folded[2], index, folded[3]));
      }
    };
    // One chunk of 64 columns (or the masked last block of 32) of the span, for every row, with
    // row r's codes from codes_of(r).
    auto chunk = [&](int quarter, bool whole, auto codes_of) {
      const __mmask64 code_mask = whole ? ~__mmask64{0} : __mmask64{0xFFFFFFFFull};
      const __m512i xv = _mm512_maskz_loadu_epi8(code_mask, xq + c + 64 * quarter);
      __m512i start = _mm512_setzero_si512();
      if constexpr (kZeroPoint) {
        start =
            _mm512_sub_epi32(start, _mm512_dpbusd_epi32(_mm512_setzero_si512(), zero_bytes, xv));
      }
      __m512i isum[4];
      for (int r = 0; r < 4; ++r) {
        isum[r] = r < NR ? _mm512_dpbusd_epi32(start, codes_of(r < NR ? r : 0), xv)
                         : _mm512_setzero_si512();
      }
      const __m512 sums = _mm512_cvtepi32_ps(GroupSumsOfRows(isum[0], isum[1], isum[2], isum[3]));
      // A lone last block has groups 0 and 1 only: lanes 0-7.
      chains = whole ? _mm512_fmadd_ps(sums, chunk_scales(quarter), chains)
                     : _mm512_mask3_fmadd_ps(sums, chunk_scales(quarter), chains, 0x00FF);
    };
    if constexpr (Span::kPairedCodes) {
      // Two chunks' codes from one 512-bit read per row (whole spans only: K-quants).
      for (int pair = 0; pair < 2; ++pair) {
        __m512i codes[NR][2];
        for (int r = 0; r < NR; ++r) Span::PairCodes(rows[r] + first, pair, codes[r]);
        chunk(2 * pair, true, [&](int r) { return codes[r][0]; });
        chunk(2 * pair + 1, true, [&](int r) { return codes[r][1]; });
      }
    } else if (n == kSpan) {
      // Unrolled, so that each chunk's quarter is a constant in Codes.
      [&]<int... kQuarters>(std::integer_sequence<int, kQuarters...>) {
        (chunk(kQuarters, true, [&](int r) { return Span::Codes(rows[r] + first, kQuarters); }),
         ...);
      }
      (std::make_integer_sequence<int, 4>());
    } else {  // a row's last blocks (legacy types)
      for (int quarter = 0; 64 * quarter < n; ++quarter) {
        const bool whole = 64 * quarter + 64 <= n;
        chunk(quarter, whole, [&](int r) {
          if constexpr (Span::kBlockElements == kQk) {
            if (!whole) return Span::LastBlockCodes(rows[r] + first, quarter);
          }
          return Span::Codes(rows[r] + first, quarter);
        });
      }
    }
  }
  alignas(16) float totals[4];
  _mm_store_ps(totals, ChainTotalsOfRows(chains));
  for (int r = 0; r < NR; ++r) {
    if constexpr (kMins) {
      y[r] = totals[r] + MinsDot(mins[r], x.sum + t0 * (cols / 32), cols / 32);
    } else {
      y[r] = totals[r];
    }
  }
}

template <bool kZeroPoint, typename Span, int... NRs>
constexpr auto DecodeRowVariants(std::integer_sequence<int, NRs...>) {
  return std::array<QuantTileRawFn, sizeof...(NRs)>{&DecodeTileT<NRs + 1, kZeroPoint, Span>...};
}
using DecodeVariants = std::array<QuantTileRawFn, kDecodeRowTile>;

// The tiles of `type` (null where the general tile serves: Q4_1, Q5_1).
template <NibbleSplit kSplit>
const DecodeVariants* DecodeVariantsFor(WeightType type) {
  using Rows = std::make_integer_sequence<int, kDecodeRowTile>;
  static constexpr DecodeVariants kQ4K = DecodeRowVariants<false, Q4KSpan<kSplit>>(Rows());
  static constexpr DecodeVariants kQ5K = DecodeRowVariants<false, Q5KSpan<kSplit>>(Rows());
  static constexpr DecodeVariants kQ6K = DecodeRowVariants<true, Q6KSpan<kSplit>>(Rows());
  static constexpr DecodeVariants kQ8 =
      DecodeRowVariants<true, LegacySpan<BlockQ8_0, kSplit>>(Rows());
  static constexpr DecodeVariants kQ5 =
      DecodeRowVariants<true, LegacySpan<BlockQ5_0, kSplit>>(Rows());
  static constexpr DecodeVariants kQ40 =
      DecodeRowVariants<true, LegacySpan<BlockQ4_0, kSplit>>(Rows());
  switch (type) {
    case WeightType::kQ4_K:
      return &kQ4K;
    case WeightType::kQ5_K:
      return &kQ5K;
    case WeightType::kQ6_K:
      return &kQ6K;
    case WeightType::kQ8_0:
      return &kQ8;
    case WeightType::kQ5_0:
      return &kQ5;
    case WeightType::kQ4_0:
      return &kQ40;
    default:
      return nullptr;
  }
}

}  // namespace

// DecodeTileAvx512 with kGfni's tiles (decode_avx512_gfni.cpp; call only where the CPU has GFNI).
QuantTileRawFn DecodeTileAvx512Gfni(WeightType type, int nr);

}  // namespace reprise::kernels
