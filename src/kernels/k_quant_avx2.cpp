// The AVX2 tiles of the K-quants (Q4_K, Q5_K, Q6_K) over rows as stored, with activations
// quantized per super-block of 256 (ActivationForm::kPerSuperBlock). One tile serves decode and
// prefill (the driver hands it a panel of rows in L2 for prefill); Q4_K and Q5_K kept in row
// streams take k_quant_streams_avx2.cpp's tile, with the same bits.
//
// With one activation scale per super-block, a super-block's sub-blocks add up in integers:
// per block of 32 the codes' products with the activations (maddubs) are multiplied by the
// sub-block's integer scale as they are added in pairs (madd). The per-block form needs a
// conversion, a scale product and a fused multiply-add for every block: one core streamed
// Q4_K rows 1.6-1.7x faster this way (Zen 3, 2048 columns, from L2 and from memory), at the
// cost of coarser activations (llama.cpp's Q8_K makes the same trade for these types).
// Q4_K and Q5_K then reduce a super-block to two integers per row and token (S and M, whose
// float chains kKQuantChains describes), Q6_K to one (its S, in the same chains).
//
// Every integer is exact and every tile forms them the same way, whatever its tokens, so the
// float work (the same per chain and super-block, in order) gives the same bits. The integers
// fit: S is at most 256 * 31 * 127 * 63 (Q5_K's codes and scales) < 2^26, M 8 * 63 * 32 * 127.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_reads_avx2.h"
#include "kernels/simd.h"

namespace reprise::kernels {

namespace {

using avx2::kKQuantChains;
using avx2::KQuantChainsSum;
using avx2::Load32;
using avx2::PrefetchStretch;
using avx2::RowAhead;

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

// The byte shuffle's index pair that picks 16-bit word i of a 128-bit half.
constexpr int16_t WordPicker(int i) { return static_cast<int16_t>((2 * i + 1) << 8 | (2 * i)); }

// The 16-bit lanes of `scales` (16 bytes, repeated in both halves) picked by byte pairs: lane k of
// half h holds scale word `index[h]`.
inline __m256i PickWords(__m256i scales, int low_index, int high_index) {
  const int16_t lo = WordPicker(low_index), hi = WordPicker(high_index);
  return _mm256_shuffle_epi8(
      scales, _mm256_setr_epi16(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi));
}

// The 16-bit lanes of `scales` (as PickWords) by 64-bit quarter: word `low_index` in the first
// and third quarters, `high_index` in the second and fourth.
inline __m256i PickQuarterWords(__m256i scales, int low_index, int high_index) {
  const int16_t lo = WordPicker(low_index), hi = WordPicker(high_index);
  return _mm256_shuffle_epi8(
      scales, _mm256_setr_epi16(lo, lo, lo, lo, hi, hi, hi, hi, lo, lo, lo, lo, hi, hi, hi, hi));
}

// Per token t < MT of a tile: the int8 activations of super-block s and its float scale.
struct Activations {
  const QuantizedRows& x;
  int64_t t0;
  int64_t supers;  // per row
  const int8_t* Block(int t, int64_t s, int j) const {
    return x.q + (t0 + t) * x.cols + s * kQkK + j * kQk;
  }
  const float* Scales(int t, int64_t s) const { return x.d + (t0 + t) * supers + s; }
  float Scale(int t, int64_t s) const { return *Scales(t, s); }
  __m256i GroupSums(int t, int64_t s) const {  // the super-block's 16 sums of 16
    return Load32(x.group_sum + (t0 + t) * (x.cols / 16) + s * 16);
  }
};

// A row-by-row tile's walk over a row's super-blocks, four per pass (the chains', kKQuantChains):
// integer_sums(s, lanes) puts super-block s's integers per token in the eight lanes of lanes[t]
// and returns its scale bits (Bits); two super-blocks' lanes horizontally added, halves added,
// give quads[t][h] for super-blocks s + 2h and s + 2h + 1; then add_quads<kFull>(s, n, bits,
// quads) takes super-blocks s .. s + n - 1 (kFull: n = 4; past n, bits and lanes are zero).
template <int MT, typename Bits, typename IntegerSums, typename AddQuads>
[[gnu::always_inline]] inline void WalkSuperBlocks(int64_t supers, const IntegerSums& integer_sums,
                                                   const AddQuads& add_quads) {
  const auto pass = [&]<bool kFull>(int64_t s, int n) __attribute__((always_inline)) {
    Bits bits[kKQuantChains] = {};  // none past the row's last super-block
    __m128i quads[MT][2];
    Unroll<2>([&](auto half_index) __attribute__((always_inline)) {
      constexpr int half = decltype(half_index)::value;
      __m256i first[MT], second[MT];
      if (kFull || 2 * half < n) {
        bits[2 * half] = integer_sums(s + 2 * half, first);
      } else {
        for (__m256i& v : first) v = _mm256_setzero_si256();
      }
      if (kFull || 2 * half + 1 < n) {
        bits[2 * half + 1] = integer_sums(s + 2 * half + 1, second);
      } else {
        for (__m256i& v : second) v = _mm256_setzero_si256();
      }
      for (int t = 0; t < MT; ++t) {
        const __m256i both = _mm256_hadd_epi32(first[t], second[t]);
        quads[t][half] =
            _mm_add_epi32(_mm256_castsi256_si128(both), _mm256_extracti128_si256(both, 1));
      }
    });
    add_quads.template operator()<kFull>(s, n, bits, quads);
  };
  int64_t s = 0;
  for (; s + kKQuantChains <= supers; s += kKQuantChains) {
    pass.template operator()<true>(s, kKQuantChains);
  }
  if (s < supers) pass.template operator()<false>(s, static_cast<int>(supers - s));
}

// Token t's scales of super-blocks s .. s + n - 1 (kFull: n = 4), +0 past n.
template <bool kFull>
[[gnu::always_inline]] inline __m128 TokenScales(const Activations& act, int t, int64_t s, int n) {
  if constexpr (kFull) return _mm_loadu_ps(act.Scales(t, s));
  alignas(16) float x_scales[kKQuantChains] = {};
  for (int k = 0; k < n; ++k) x_scales[k] = act.Scale(t, s + k);
  return _mm_load_ps(x_scales);
}

// Q4_K (Q5_K with kFifth): w = d * sc[j] * code - dmin * m[j] over sub-block j. Per super-block
// and token: sum_j sc[j] * dot(code_j, x_j) and sum_j m[j] * sum(x_j), both exact integers.
template <bool kFifth, int MT>
void KQuantRow(const QuantizedRows& x, int64_t t0, const RawRows& w, int64_t row, float* y,
               int64_t y_stride) {
  using Block = std::conditional_t<kFifth, BlockQ5_K, BlockQ4_K>;
  const Activations act{x, t0, x.cols / kQkK};
  const uint8_t* const row_data = w.data + static_cast<size_t>(row) * w.row_bytes;
  const auto* blocks = reinterpret_cast<const Block*>(row_data);
  const uint8_t* const ahead = RowAhead(w, row, row_data);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  // Super-block s's lane sums per token, both kinds in one vector: (s01, s23, m01, m23 | s45,
  // s67, m45, m67) of its codes' products (scaled) and its mins' products. Returns its d, dmin.
  const auto integer_sums = [&](int64_t s, __m256i(&pairs)[MT]) {
    const Block& block = blocks[s];
    PrefetchStretch<sizeof(Block)>(ahead + s * sizeof(Block));
    uint32_t d_dmin;
    std::memcpy(&d_dmin, &block.d, sizeof(d_dmin));
    const __m128i bytes = KScaleBytes(block.scales);
    const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(bytes));  // sc[0..7] x2
    const __m128i mins = _mm_srli_si128(bytes, 8);
    const __m256i min_words = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins, mins));  // m[j] twice
    __m256i qh;
    if constexpr (kFifth) qh = Load32(block.qh);
    __m256i sums[MT];
    for (int t = 0; t < MT; ++t) sums[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int pair = 0; pair < 4; ++pair) {
      // Sub-blocks 2 pair and 2 pair + 1: the low and high nibbles of qs[32 pair ..]; Q5_K adds
      // bit j of qh[l] as element l's bit 4.
      const __m256i packed = Load32(block.qs + kQk * pair);
      __m256i low = _mm256_and_si256(packed, low_mask);
      __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_mask);
      if constexpr (kFifth) {
        const int j = 2 * pair;
        const __m256i bit4 = _mm256_set1_epi8(0x10);
        low = _mm256_or_si256(
            low, _mm256_and_si256(
                     j <= 4 ? _mm256_slli_epi16(qh, 4 - j) : _mm256_srli_epi16(qh, j - 4), bit4));
        high = _mm256_or_si256(high, _mm256_and_si256(j + 1 <= 4 ? _mm256_slli_epi16(qh, 3 - j)
                                                                 : _mm256_srli_epi16(qh, j - 3),
                                                      bit4));
      }
      const __m256i pair_scales = PickQuarterWords(scales, 2 * pair, 2 * pair + 1);
      for (int t = 0; t < MT; ++t) {
        // The two sub-blocks' pair sums, their 64-bit quarters added in 16 bits (Q5_K: at most
        // 4 * 31 * 127), so that one madd scales both: (low, high | low, high) by quarter.
        const __m256i low_pairs = _mm256_maddubs_epi16(low, Load32(act.Block(t, s, 2 * pair)));
        const __m256i high_pairs =
            _mm256_maddubs_epi16(high, Load32(act.Block(t, s, 2 * pair + 1)));
        const __m256i both = _mm256_add_epi16(_mm256_unpacklo_epi64(low_pairs, high_pairs),
                                              _mm256_unpackhi_epi64(low_pairs, high_pairs));
        sums[t] = _mm256_add_epi32(sums[t], _mm256_madd_epi16(both, pair_scales));
        KeepChain(sums[t]);
      }
    }
    for (int t = 0; t < MT; ++t) {
      pairs[t] = _mm256_hadd_epi32(sums[t], _mm256_madd_epi16(min_words, act.GroupSums(t, s)));
    }
    return d_dmin;
  };
  // Token t's four chains in acc[t]: lane k takes super-blocks k, k + 4, ...: + S d x_d, then
  // - M dmin x_d. Four super-blocks per pass, their integers added up together: quads[t] holds
  // (S, M, S', M') of super-blocks s, s + 1, then s + 2, s + 3.
  __m128 acc[MT];
  for (__m128& a : acc) a = _mm_setzero_ps();
  WalkSuperBlocks<MT, uint32_t>(
      act.supers, integer_sums,
      [&]<bool kFull>(int64_t s, int n, const uint32_t(&d_dmin)[4],
                      const __m128i(&quads)[MT][2]) __attribute__((always_inline)) {
        // d and dmin of the four (d0, dmin0, d1, dmin1 | d2, dmin2, d3, dmin3), split.
        const __m256 halves = _mm256_cvtph_ps(
            _mm_setr_epi32(static_cast<int>(d_dmin[0]), static_cast<int>(d_dmin[1]),
                           static_cast<int>(d_dmin[2]), static_cast<int>(d_dmin[3])));
        const __m128 low = _mm256_castps256_ps128(halves), high = _mm256_extractf128_ps(halves, 1);
        const __m128 d = _mm_shuffle_ps(low, high, _MM_SHUFFLE(2, 0, 2, 0));
        const __m128 dmin = _mm_shuffle_ps(low, high, _MM_SHUFFLE(3, 1, 3, 1));
        for (int t = 0; t < MT; ++t) {
          const __m128 x_d = TokenScales<kFull>(act, t, s, n);
          const __m128 front = _mm_castsi128_ps(quads[t][0]), back = _mm_castsi128_ps(quads[t][1]);
          const __m128i s_all =
              _mm_castps_si128(_mm_shuffle_ps(front, back, _MM_SHUFFLE(2, 0, 2, 0)));
          const __m128i m_all =
              _mm_castps_si128(_mm_shuffle_ps(front, back, _MM_SHUFFLE(3, 1, 3, 1)));
          acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(s_all), _mm_mul_ps(d, x_d), acc[t]);
          acc[t] = _mm_fnmadd_ps(_mm_cvtepi32_ps(m_all), _mm_mul_ps(dmin, x_d), acc[t]);
        }
      });
  for (int t = 0; t < MT; ++t) y[t * y_stride] = KQuantChainsSum(acc[t]);
}

// Q6_K: w = d * sc[g] * (code - 32) over group g of 16. Per super-block and token the exact
// integer S = sum_g sc[g] * dot(code_g, x_g) - 32 * sum_g sc[g] * sum(x_g), then the chains as
// Q4_K's (kKQuantChains, no M), so that the row-streams tile, which forms S per row in a lane,
// gives the same bits. |S| <= 256 * 128 * 63 * 128 < 2^31.
template <int MT>
void Q6KRow(const QuantizedRows& x, int64_t t0, const RawRows& w, int64_t row, float* y,
            int64_t y_stride) {
  const Activations act{x, t0, x.cols / kQkK};
  const uint8_t* const row_data = w.data + static_cast<size_t>(row) * w.row_bytes;
  const auto* blocks = reinterpret_cast<const BlockQ6_K*>(row_data);
  const uint8_t* const ahead = RowAhead(w, row, row_data);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const __m256i high_mask = _mm256_set1_epi8(0x30);
  // Super-block s's S per token, spread over the eight lanes of lanes[t]. Returns its d.
  const auto integer_sums = [&](int64_t s, __m256i(&lanes)[MT]) {
    const BlockQ6_K& block = blocks[s];
    PrefetchStretch<sizeof(BlockQ6_K)>(ahead + s * sizeof(BlockQ6_K));
    const __m128i packed_scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales));
    // sc[0..7] and sc[8..15] in both halves, for PickWords, and sc[0..15], by 128-bit inserts:
    // a cross-lane permute is eight micro-operations on Zen 1 (GCC makes one of a 128-bit
    // broadcast too); one-token Q6_K 17.3 -> 17.8 GB/s there.
    const __m128i first_words = _mm_cvtepi8_epi16(packed_scales);
    const __m128i last_words = _mm_cvtepi8_epi16(_mm_unpackhi_epi64(packed_scales, packed_scales));
    const __m256i first_scales =
        _mm256_inserti128_si256(_mm256_castsi128_si256(first_words), first_words, 1);
    const __m256i last_scales =
        _mm256_inserti128_si256(_mm256_castsi128_si256(last_words), last_words, 1);
    const __m256i all_scales = _mm256_set_m128i(last_words, first_words);  // sc[0..15]
    for (int t = 0; t < MT; ++t) {
      // -32 * sum_g sc[g] * sum(x_g), the codes' zero point, to start from.
      lanes[t] = _mm256_sub_epi32(
          _mm256_setzero_si256(),
          _mm256_slli_epi32(_mm256_madd_epi16(all_scales, act.GroupSums(t, s)), 5));
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      // Block j: half h = j / 4 (64 bytes of ql, 32 of qh), quarter q = j % 4: the low (q < 2)
      // or high nibbles of ql[32 (q % 2) ..], with bits 2q, 2q + 1 of qh as bits 4-5.
      const int half = j / 4, quarter = j % 4;
      const __m256i ql = Load32(block.ql + 64 * half + 32 * (quarter % 2));
      const __m256i qh = Load32(block.qh + 32 * half);
      const __m256i low = quarter < 2 ? _mm256_and_si256(ql, low_mask)
                                      : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low_mask);
      const int shift = 2 * quarter;
      const __m256i high =
          shift <= 4 ? _mm256_slli_epi16(qh, 4 - shift) : _mm256_srli_epi16(qh, shift - 4);
      const __m256i codes = _mm256_or_si256(low, _mm256_and_si256(high, high_mask));
      // Groups 2j (low 16 elements) and 2j + 1 (high 16).
      const int g = 2 * j % 8;
      const __m256i group_scales = PickWords(j < 4 ? first_scales : last_scales, g, g + 1);
      for (int t = 0; t < MT; ++t) {
        lanes[t] = _mm256_add_epi32(
            lanes[t], _mm256_madd_epi16(_mm256_maddubs_epi16(codes, Load32(act.Block(t, s, j))),
                                        group_scales));
        KeepChain(lanes[t]);
      }
    }
    return block.d;
  };
  // Token t's four chains in acc[t], lane k taking super-blocks k, k + 4, ...: + S d x_d. Four
  // super-blocks per pass, their lanes summed together (one at a time, through memory, the row
  // tile ran 12-14% slower).
  __m128 acc[MT];
  for (__m128& a : acc) a = _mm_setzero_ps();
  WalkSuperBlocks<MT, uint16_t>(
      act.supers, integer_sums,
      [&]<bool kFull>(int64_t s, int n, const uint16_t(&d)[4],
                      const __m128i(&quads)[MT][2]) __attribute__((always_inline)) {
        const __m128 block_d = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(d)));
        for (int t = 0; t < MT; ++t) {
          const __m128i sums = _mm_hadd_epi32(quads[t][0], quads[t][1]);  // S of the four
          acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(sums),
                                _mm_mul_ps(block_d, TokenScales<kFull>(act, t, s, n)), acc[t]);
        }
      });
  for (int t = 0; t < MT; ++t) y[t * y_stride] = KQuantChainsSum(acc[t]);
}

// One row of `kType` for MT tokens.
template <WeightType kType, int MT>
void Row(const QuantizedRows& x, int64_t t0, const RawRows& w, int64_t row, float* y,
         int64_t y_stride) {
  if constexpr (kType == WeightType::kQ6_K) {
    Q6KRow<MT>(x, t0, w, row, y, y_stride);
  } else {
    KQuantRow<kType == WeightType::kQ5_K, MT>(x, t0, w, row, y, y_stride);
  }
}

template <WeightType kType>
void Rows(const QuantizedRows& x, int64_t t0, int mt, const RawRows& w, int64_t r0, int nr,
          float* y, int64_t y_stride) {
  for (int r = 0; r < nr; ++r) {
    switch (mt) {
      case 1:
        Row<kType, 1>(x, t0, w, r0 + r, y + r, y_stride);
        break;
      case 2:
        Row<kType, 2>(x, t0, w, r0 + r, y + r, y_stride);
        break;
      case 3:
        Row<kType, 3>(x, t0, w, r0 + r, y + r, y_stride);
        break;
      default:
        Row<kType, 4>(x, t0, w, r0 + r, y + r, y_stride);
        break;
    }
  }
}

}  // namespace

ActivationForm ActivationFormAvx2(WeightType type) {
  const bool k_quant =
      type == WeightType::kQ4_K || type == WeightType::kQ5_K || type == WeightType::kQ6_K;
  return k_quant ? ActivationForm::kPerSuperBlock : ActivationForm::kPerBlock;
}

void KQuantTileAvx2(const QuantizedRows& x, int64_t t0, int mt, const RawRows& w, int64_t r0,
                    int nr, float* y, int64_t y_stride) {
  REPRISE_CHECK(x.form == ActivationForm::kPerSuperBlock && mt >= 1 && mt <= 4,
                "the AVX2 K-quant tile takes 1-4 tokens quantized per super-block");
  switch (w.type) {
    case WeightType::kQ4_K:
      return Rows<WeightType::kQ4_K>(x, t0, mt, w, r0, nr, y, y_stride);
    case WeightType::kQ5_K:
      return Rows<WeightType::kQ5_K>(x, t0, mt, w, r0, nr, y, y_stride);
    case WeightType::kQ6_K:
      return Rows<WeightType::kQ6_K>(x, t0, mt, w, r0, nr, y, y_stride);
    default:
      REPRISE_CHECK(false, "no AVX2 K-quant tile for {}", WeightTypeName(w.type));
  }
}

}  // namespace reprise::kernels
