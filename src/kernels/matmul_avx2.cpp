// MatMul kernels for AVX2 + FMA + F16C. Compiled with those flags only for this file
// (module.cmake); used only when cpu_target.cpp finds them on the CPU.
//
// Lane layout, the same for every tile size so that an output's bits never depend on it:
//   float types: acc[8] += x[c..c+7] * w[c..c+7] for c = 0, 8, ... (a masked last chunk), then
//                HorizontalSum.
//   quantized:   per block of 32 codes whose two 16-groups share a scale (every type but
//                Q6_K), lane i of 4 holds the exact integer sum of products 4i..4i+3 and
//                16 + 4i..16 + 4i + 3 (maddubs, then pairs, then the halves; small codes
//                add the halves in 16 bits before the pairs; see Codes);
//                acc[4] += float(isum) * (w_scale * x_scale) of the block, then
//                HorizontalSum4(acc) + HorizontalSum(min_acc) for types with a min, where
//                min_acc[8] += w_min[b..b+7] * x_sum[b..b+7] over blocks b. Q6_K (a scale per
//                16-group): lane i of 8 holds products 4i..4i+3, acc[8] += float(isum) *
//                (w_scale * x_scale) of the lane's 16-group, then HorizontalSum(acc). Lanes of 8
//                products take half the conversions and multiply-adds of lanes of 4, and the
//                row-streams decode tile (row_groups_avx2.cpp) adds a word's two halves in 16
//                bits before one madd.
#include <algorithm>
#include <array>
#include <utility>

#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/reduce_avx2.h"
#include "kernels/simd.h"

namespace reprise::kernels {

namespace {

// A fixed reduction tree: 8 -> 4 -> 2 -> 1.

// How a float tile reads 8 weights of each stored type as f32 (exact conversions; a masked
// read gives +0 in the unread lanes, as a masked f32 read does).
struct F32Weights {
  using Element = float;
  static __m256 Load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 LoadMasked(int64_t n, const float* p) {
    return _mm256_maskload_ps(p, LaneMask(static_cast<int>(n)));
  }
};
inline __m128i LoadFirstHalves(int64_t n, const uint16_t* p) {
  alignas(16) uint16_t part[8] = {};
  for (int64_t i = 0; i < n; ++i) part[i] = p[i];
  return _mm_load_si128(reinterpret_cast<const __m128i*>(part));
}
struct F16Weights {
  using Element = uint16_t;
  static __m256 Load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m256 LoadMasked(int64_t n, const uint16_t* p) {
    return _mm256_cvtph_ps(LoadFirstHalves(n, p));
  }
};
struct Bf16Weights {
  using Element = uint16_t;
  static __m256 Widen(__m128i bits) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  }
  static __m256 Load(const uint16_t* p) {
    return Widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m256 LoadMasked(int64_t n, const uint16_t* p) { return Widen(LoadFirstHalves(n, p)); }
};

template <typename Weights, int MT, int NR>
void FloatTileT(const float* x, int64_t x_stride, const void* w_data, int64_t w_stride,
                int64_t cols, float* y, int64_t y_stride) {
  using Element = typename Weights::Element;
  const Element* w = static_cast<const Element*>(w_data);
  __m256 acc[MT][NR];
  for (int t = 0; t < MT; ++t) {
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  }
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = Weights::Load(w + r * w_stride + c);
    for (int t = 0; t < MT; ++t) {
      __m256 xv = _mm256_loadu_ps(x + t * x_stride + c);
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  if (c < cols) {
    const __m256i mask = LaneMask(static_cast<int>(cols - c));
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = Weights::LoadMasked(cols - c, w + r * w_stride + c);
    for (int t = 0; t < MT; ++t) {
      __m256 xv = _mm256_maskload_ps(x + t * x_stride + c, mask);
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  for (int t = 0; t < MT; ++t) {
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = HorizontalSum(acc[t][r]);
  }
}

constexpr int kFloatTokenTile = 4;
constexpr int kFloatRowTile = 3;

using FloatTileFn = void (*)(const float*, int64_t, const void*, int64_t, int64_t, float*, int64_t);

template <typename Weights, int MT, int... NRs>
constexpr auto FloatRowVariants(std::integer_sequence<int, NRs...>) {
  return std::array<FloatTileFn, sizeof...(NRs)>{&FloatTileT<Weights, MT, NRs + 1>...};
}

template <typename Weights, int... MTs>
constexpr auto FloatVariants(std::integer_sequence<int, MTs...>) {
  return std::array<std::array<FloatTileFn, kFloatRowTile>, sizeof...(MTs)>{
      FloatRowVariants<Weights, MTs + 1>(std::make_integer_sequence<int, kFloatRowTile>())...};
}

void FloatTile(WeightType type, const float* x, int64_t x_stride, int mt, const void* w,
               int64_t w_stride, int nr, int64_t cols, float* y, int64_t y_stride) {
  using Tiles = std::make_integer_sequence<int, kFloatTokenTile>;
  static constexpr auto kF32 = FloatVariants<F32Weights>(Tiles());
  static constexpr auto kF16 = FloatVariants<F16Weights>(Tiles());
  static constexpr auto kBf16 = FloatVariants<Bf16Weights>(Tiles());
  const auto& variants = type == WeightType::kF16 ? kF16 : type == WeightType::kBF16 ? kBf16 : kF32;
  variants[mt - 1][nr - 1](x, x_stride, w, w_stride, cols, y, y_stride);
}

// Two 16-group scales -> [s0 x4, s1 x4].
inline __m256 ExpandGroupScales(const float* two) {
  const __m256i index = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const __m128 pair = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(two)));
  return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(pair), index);
}

// Every other float of p[0 .. 2n - 1]: n <= 8 blocks' scales from their per-16 ones (equal
// pairs); +0 in the lanes past n.
inline __m256 BlockScales(const float* p, int n = 8) {
  const __m256 lo = n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, LaneMask(2 * n));
  const __m256 hi =
      n >= 8 ? _mm256_loadu_ps(p + 8) : _mm256_maskload_ps(p + 8, LaneMask(2 * n - 8));
  const __m256 pairs = _mm256_shuffle_ps(lo, hi, 0x88);
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(pairs), 0xD8));
}

// A quantized tile's chain (see the file comment): 4 lanes for a scale per block, 8 per 16-group.
template <bool kPerBlock>
struct QuantChain {
  using Type = __m256;
};
template <>
struct QuantChain<true> {
  using Type = __m128;
};

// How a tile forms a block's integer products (the same integers every way).
enum class Codes {
  // Codes minus a zero point: maddubs(|w|, sign(x, w)); right for every type.
  kSigned,
  // Codes below 32 with a zero point z of 8 or 16 (Q4_0, Q5_0): the lane sums of maddubs(w, x)
  // less z times the activations' lane sums (QuantizedRows::zero8_lanes, zero16_lanes), read once
  // per token and block where kSigned takes a sign per token, row and block and an absolute value
  // per row and block (Zen 1, 512 tokens, 2 threads: 4-7% faster, and 1.0x-1.1x more with the
  // zero point taken off lanes of 8 products rather than pairs).
  kZeroLanes,
  // Codes without a zero point (K-quants, Q4_1, Q5_1), small and unsigned: maddubs(w, x).
  kUnsigned,
};

// Tokens t0 .. t0 + MT - 1 over any number of unpacked rows, NR = 2 rows at a time (a last one
// alone): one call per token tile and panel, so that the tokens' pointers and the call itself
// are set up once, not per pair of rows (on 576 columns they were a quarter of the time).
//
// kCodes: see Codes. kPerBlock: the weights' two 16-group scales of a block
// are equal (UnpackedRows::scales_per_32), as an activation row's always are, so a block's scale
// product is one number: for 8 blocks at a time one vector multiply forms each token and row's
// products and the blocks take them back with broadcast loads. The tile is bound by the pipes
// that multiply (floats and integers share two of them): a product per token, row and block
// was one of six operations there, and broadcasts of both scales two more.
template <int MT, Codes kCodes, bool kPerBlock>
class QuantRows {
 public:
  QuantRows(const QuantizedRows& x, int64_t t0, const UnpackedRows& w)
      : w_(w), cols_(x.cols), groups_(x.cols / 16), blocks_(x.cols / 32) {
    for (int t = 0; t < MT; ++t) {
      x_codes_[t] = x.q + (t0 + t) * cols_;
      x_scales_[t] = x.d + (t0 + t) * groups_;
      x_sums_[t] = x.sum != nullptr ? x.sum + (t0 + t) * blocks_ : nullptr;
      x_zero_lanes_[t] = kCodes == Codes::kZeroLanes ? x.ZeroLanes(w.zero_point, t0 + t) : nullptr;
    }
  }

  // Rows r0 .. r0 + NR - 1: y[t * y_stride + r].
  template <int NR>
  __attribute__((always_inline)) void Tile(int64_t r0, float* y, int64_t y_stride) {
    const __m256i zero_bytes = _mm256_set1_epi8(static_cast<char>(w_.zero_point));
    const __m256i ones = _mm256_set1_epi16(1);
    using Chain = typename QuantChain<kPerBlock>::Type;
    Chain acc[MT][NR];
    for (int t = 0; t < MT; ++t) {
      for (int r = 0; r < NR; ++r) acc[t][r] = Chain{};
    }
    const uint8_t* w_codes[NR];
    const float* w_scales[NR];
    for (int r = 0; r < NR; ++r) {
      w_codes[r] = w_.q + (r0 + r) * cols_;
      w_scales[r] = w_.scale + (r0 + r) * groups_;
    }
    constexpr int kSpan = 8;  // blocks whose scale products one vector holds
    alignas(32) float products[MT][NR][kSpan];
    const auto block = [&](int64_t b, int i) __attribute__((always_inline)) {
      const int64_t c = 32 * b;
      __m256i w_signed[NR], w_abs[NR];
      __m256 ws[NR];
      for (int r = 0; r < NR; ++r) {
        const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_codes[r] + c));
        if constexpr (kCodes == Codes::kSigned) {
          w_signed[r] = _mm256_sub_epi8(codes, zero_bytes);
          w_abs[r] = _mm256_abs_epi8(w_signed[r]);
        } else {
          w_abs[r] = codes;
        }
        if constexpr (!kPerBlock) ws[r] = ExpandGroupScales(w_scales[r] + 2 * b);
      }
      for (int t = 0; t < MT; ++t) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_codes_[t] + c));
        __m256 xd;
        if constexpr (!kPerBlock) xd = BroadcastFloat(x_scales_[t] + 2 * b);
        __m128i zero_lanes;
        if constexpr (kCodes == Codes::kZeroLanes) {
          zero_lanes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x_zero_lanes_[t] + 4 * b));
        }
        for (int r = 0; r < NR; ++r) {
          __m256i pairs;
          if constexpr (kCodes == Codes::kSigned) {
            pairs = _mm256_maddubs_epi16(w_abs[r], _mm256_sign_epi8(xv, w_signed[r]));
          } else {
            pairs = _mm256_maddubs_epi16(w_abs[r], xv);
          }
          if constexpr (kPerBlock) {
            __m128i lanes;
            if constexpr (kCodes == Codes::kSigned) {
              lanes = BlockLaneSums(_mm256_madd_epi16(pairs, ones));
            } else {
              lanes = SmallPairsLaneSums(pairs);  // small codes
              if constexpr (kCodes == Codes::kZeroLanes) lanes = _mm_sub_epi32(lanes, zero_lanes);
            }
            acc[t][r] =
                _mm_fmadd_ps(_mm_cvtepi32_ps(lanes),
                             _mm_broadcastss_ps(_mm_load_ss(&products[t][r][i])), acc[t][r]);
          } else {
            const __m256i isum = _mm256_madd_epi16(pairs, ones);
            acc[t][r] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(ws[r], xd), acc[t][r]);
          }
        }
      }
    };
    if constexpr (kPerBlock) {
      for (int64_t b = 0; b < blocks_; b += kSpan) {
        const int n = static_cast<int>(std::min<int64_t>(kSpan, blocks_ - b));
        __m256 x_span[MT];
        for (int t = 0; t < MT; ++t) x_span[t] = BlockScales(x_scales_[t] + 2 * b, n);
        for (int r = 0; r < NR; ++r) {
          const __m256 w_span = BlockScales(w_scales[r] + 2 * b, n);
          for (int t = 0; t < MT; ++t)
            _mm256_store_ps(products[t][r], _mm256_mul_ps(w_span, x_span[t]));
        }
        // The same loop twice: with a constant count the compiler unrolls whole spans and
        // reads each product from a fixed place; only a row's last span takes the other.
        if (n == kSpan) {
          for (int i = 0; i < kSpan; ++i) block(b + i, i);
        } else {
          for (int i = 0; i < n; ++i) block(b + i, i);
        }
      }
    } else {
      for (int64_t b = 0; b < blocks_; ++b) block(b, 0);
    }
    if constexpr (MT * NR == 8 && kPerBlock) {
      if (w_.min == nullptr) {
        const __m256 sums = HorizontalSums4(reinterpret_cast<const __m128(&)[8]>(acc));
        const __m128 lo = _mm256_castps256_ps128(sums), hi = _mm256_extractf128_ps(sums, 1);
        _mm_storel_pi(reinterpret_cast<__m64*>(y), lo);
        _mm_storeh_pi(reinterpret_cast<__m64*>(y + y_stride), lo);
        _mm_storel_pi(reinterpret_cast<__m64*>(y + 2 * y_stride), hi);
        _mm_storeh_pi(reinterpret_cast<__m64*>(y + 3 * y_stride), hi);
        return;
      }
    }
    float sums[MT][NR];
    for (int t = 0; t < MT; ++t) {
      for (int r = 0; r < NR; ++r) {
        if constexpr (kPerBlock) {
          sums[t][r] = HorizontalSum4(acc[t][r]);
        } else {
          sums[t][r] = HorizontalSum(acc[t][r]);
        }
      }
    }
    if (w_.min != nullptr) {
      for (int t = 0; t < MT; ++t) {
        for (int r = 0; r < NR; ++r) sums[t][r] += MinsDot(w_.min + (r0 + r) * blocks_, x_sums_[t]);
      }
    }
    for (int t = 0; t < MT; ++t) {
      for (int r = 0; r < NR; ++r) y[t * y_stride + r] = sums[t][r];
    }
  }

 private:
  // Sum over the row's blocks of min * the activations' block sum.
  float MinsDot(const float* mins, const float* x_sums) const {
    __m256 min_acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= blocks_; b += 8) {
      min_acc = _mm256_fmadd_ps(_mm256_loadu_ps(mins + b), _mm256_loadu_ps(x_sums + b), min_acc);
    }
    if (b < blocks_) {
      const __m256i mask = LaneMask(static_cast<int>(blocks_ - b));
      min_acc = _mm256_fmadd_ps(_mm256_maskload_ps(mins + b, mask),
                                _mm256_maskload_ps(x_sums + b, mask), min_acc);
    }
    return HorizontalSum(min_acc);
  }

  const UnpackedRows& w_;
  const int64_t cols_, groups_, blocks_;
  const int8_t* x_codes_[MT];
  const float* x_scales_[MT];
  const float* x_sums_[MT];
  const int32_t* x_zero_lanes_[MT];
};

// 4 x 2 runs about 10% faster than 3 x 2 per output; more rows or tokens spill registers.
constexpr int kQuantTokenTile = 4;
constexpr int kQuantRowTile = 2;

template <int MT, Codes kCodes, bool kPerBlock>
void QuantRowsT(const QuantizedRows& x, int64_t t0, const UnpackedRows& w, int64_t r0, int nr,
                float* y, int64_t y_stride) {
  QuantRows<MT, kCodes, kPerBlock> rows(x, t0, w);
  int r = 0;
  for (; r + kQuantRowTile <= nr; r += kQuantRowTile) {
    rows.template Tile<kQuantRowTile>(r0 + r, y + r, y_stride);
  }
  if (r < nr) rows.template Tile<1>(r0 + r, y + r, y_stride);
}
static_assert(kQuantRowTile == 2, "QuantRowsT takes the rows two at a time and a last one");

using QuantRowsFn = void (*)(const QuantizedRows&, int64_t, const UnpackedRows&, int64_t, int,
                             float*, int64_t);

template <Codes kCodes, bool kPerBlock, int... MTs>
constexpr auto QuantVariants(std::integer_sequence<int, MTs...>) {
  return std::array<QuantRowsFn, sizeof...(MTs)>{&QuantRowsT<MTs + 1, kCodes, kPerBlock>...};
}

void QuantTile(const QuantizedRows& x, int64_t t0, int mt, const UnpackedRows& w, int64_t r0,
               int nr, float* y, int64_t y_stride) {
  using Tokens = std::make_integer_sequence<int, kQuantTokenTile>;
  // Codes without a zero point all have one scale per block; the signed form serves any codes.
  static constexpr auto kSignedPerGroup = QuantVariants<Codes::kSigned, false>(Tokens());
  static constexpr auto kSignedPerBlock = QuantVariants<Codes::kSigned, true>(Tokens());
  static constexpr auto kZeroLanesPerBlock = QuantVariants<Codes::kZeroLanes, true>(Tokens());
  static constexpr auto kUnsignedPerBlock = QuantVariants<Codes::kUnsigned, true>(Tokens());
  const bool zero_lanes = x.ZeroLanes(w.zero_point, 0) != nullptr;
  const auto& variants = !w.scales_per_32    ? kSignedPerGroup
                         : zero_lanes        ? kZeroLanesPerBlock
                         : w.zero_point != 0 ? kSignedPerBlock
                                             : kUnsignedPerBlock;
  variants[mt - 1](x, t0, w, r0, nr, y, y_stride);
}

// Widening streams weights from memory once (decode); ask for them this far ahead.
constexpr int kPrefetchBytes = 2048;

void Widen(WeightType type, const void* src, int64_t n, float* dst) {
  const uint16_t* bits = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  if (type == WeightType::kF16) {
    for (; i + 8 <= n; i += 8) {
      _mm_prefetch(reinterpret_cast<const char*>(bits + i) + kPrefetchBytes, _MM_HINT_T0);
      _mm256_storeu_ps(
          dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i))));
    }
    for (; i < n; ++i) dst[i] = HalfToFloat(bits[i]);
  } else {
    for (; i + 8 <= n; i += 8) {
      _mm_prefetch(reinterpret_cast<const char*>(bits + i) + kPrefetchBytes, _MM_HINT_T0);
      const __m256i wide =
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i)));
      _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
    }
    for (; i < n; ++i) dst[i] = Bfloat16ToFloat(bits[i]);
  }
}

// The largest |x| over n vectors of 8 (exact in any order).
inline float MaxMagnitude(const float* x, int n) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_and_ps(_mm256_loadu_ps(x), magnitude);
  for (int i = 1; i < n; ++i)
    m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + 8 * i), magnitude));
  return HorizontalMax(m);
}

// 32 values quantized as QuantizeActivationRow's steps: (x * inverse + magic) - magic, two
// separate roundings (no fused multiply-add: -ffp-contract=off), stored as 32 int8 at q;
// values[i] keeps elements 8i..8i+7 as int32 for the caller's sums.
inline void Quantize32(const float* x, __m256 inverse, int8_t* q, __m256i (&values)[4]) {
  const __m256 magic = _mm256_set1_ps(12582912.0f);  // QuantizeActivationRow's rounding magic
  for (int i = 0; i < 4; ++i) {
    const __m256 scaled = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), inverse);
    values[i] = _mm256_cvtps_epi32(_mm256_sub_ps(_mm256_add_ps(scaled, magic), magic));
  }
  // Packing works within 128-bit lanes: groups of 4 come out in the order 0 2 4 6 1 3 5 7.
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(values[0], values[1]),
                                           _mm256_packs_epi32(values[2], values[3]));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(q),
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

inline int32_t SumOfLanes(__m256i v) {
  __m128i four = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  four = _mm_add_epi32(four, _mm_unpackhi_epi64(four, four));
  return _mm_cvtsi128_si32(_mm_add_epi32(four, _mm_shuffle_epi32(four, 1)));
}

}  // namespace

void QuantizeActivationRowAvx2(const float* x, int64_t cols, int8_t* q, float* d, float* sum) {
  // Blocks 8 at a time: their maxima first, then their scales and inverses in one division each
  // (the same IEEE quotients as one at a time), then their values. Block by block, each block's
  // chain from its maximum through the division to its sum held the scheduler.
  const int64_t blocks = cols / 32;
  for (int64_t b0 = 0; b0 < blocks; b0 += 8) {
    const int n = static_cast<int>(std::min<int64_t>(8, blocks - b0));
    alignas(32) float amax[8] = {}, scale[8], inverse[8];
    for (int i = 0; i < n; ++i) amax[i] = MaxMagnitude(x + (b0 + i) * 32, 4);
    const __m256 maxima = _mm256_load_ps(amax);
    const __m256 limit = _mm256_set1_ps(127.0f);
    _mm256_store_ps(scale, _mm256_div_ps(maxima, limit));
    _mm256_store_ps(inverse,
                    _mm256_and_ps(_mm256_cmp_ps(maxima, _mm256_set1_ps(1e-30f), _CMP_GT_OQ),
                                  _mm256_div_ps(limit, maxima)));
    for (int i = 0; i < n; ++i) {
      const int64_t b = b0 + i;
      __m256i values[4];
      Quantize32(x + b * 32, _mm256_set1_ps(inverse[i]), q + b * 32, values);
      const int32_t total = SumOfLanes(_mm256_add_epi32(_mm256_add_epi32(values[0], values[1]),
                                                        _mm256_add_epi32(values[2], values[3])));
      d[2 * b] = d[2 * b + 1] = scale[i];
      sum[b] = scale[i] * static_cast<float>(total);
    }
  }
}

void ZeroPointLanesRowAvx2(const int8_t* q, int64_t cols, int32_t* eights, int32_t* sixteens) {
  // Per block: the sums of 4 consecutive codes (maddubs with ones, then madd), then the two
  // halves' sums of lane i added (elements 4i.. and 16 + 4i..): exact integers.
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < cols / 32; ++b) {
    const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * b));
    const __m128i lanes =
        BlockLaneSums(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, codes), ones16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(eights + 4 * b), _mm_slli_epi32(lanes, 3));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sixteens + 4 * b), _mm_slli_epi32(lanes, 4));
  }
}

void QuantizeActivationRowPerSuperBlockAvx2(const float* x, int64_t cols, int8_t* q, float* d,
                                            int16_t* group_sum) {
  for (int64_t s = 0; s < cols / kQkK; ++s) {
    const float* xs = x + s * kQkK;
    const float amax = MaxMagnitude(xs, kQkK / 8);
    const __m256 inverse = _mm256_set1_ps(amax > 1e-30f ? 127.0f / amax : 0.0f);
    for (int g = 0; g < kQkK / 16; g += 2) {
      __m256i values[4];
      Quantize32(xs + 16 * g, inverse, q + s * kQkK + 16 * g, values);
      group_sum[s * (kQkK / 16) + g] =
          static_cast<int16_t>(SumOfLanes(_mm256_add_epi32(values[0], values[1])));
      group_sum[s * (kQkK / 16) + g + 1] =
          static_cast<int16_t>(SumOfLanes(_mm256_add_epi32(values[2], values[3])));
    }
    d[s] = amax / 127.0f;
  }
}

const TargetKernels& Avx2Kernels() {
  static const TargetKernels kernels = {
      .float_token_tile = kFloatTokenTile,
      .float_row_tile = kFloatRowTile,
      .quant_token_tile = kQuantTokenTile,
      .quant_row_tile = kQuantRowTile,
      .raw_row_tile = 4,  // the decode tile computes them one at a time (decode_avx2.cpp)
      .float_tile = FloatTile,
      .quant_tile = QuantTile,
      .quant_tile_raw = DecodeTileAvx2,
      .activation_form = ActivationFormAvx2,
      .widen = Widen,
      .zero_point_lanes = true,
      .zero_point_lanes_row = ZeroPointLanesRowAvx2,
      .quantize_row = QuantizeActivationRowAvx2,
      .quantize_row_per_super_block = QuantizeActivationRowPerSuperBlockAvx2,
      .unpack = UnpackBlocksAvx2,
      .group_layout = WeightLayout::kRowStreams,
      .has_row_group_tile = HasRowGroupTileAvx2,
      .row_group_tile = RowGroupTileAvx2,
      .ungroup_rows = UngroupRowStreamsAvx2,
      .float_group_tile = FloatGroupTileAvx2,
      .widen_group = WidenGroupAvx2,
  };
  return kernels;
}

}  // namespace reprise::kernels
