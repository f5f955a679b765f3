// MatMul kernels for AVX2 + FMA + F16C. Compiled with those flags only for this file
// (module.cmake); used only when cpu_target.cpp finds them on the CPU.
//
// Lane layout, the same for every tile size so that an output's bits never depend on it:
//   float types: acc[8] += x[c..c+7] * w[c..c+7] for c = 0, 8, ... (a masked last chunk), then
//                HorizontalSum.
//   quantized, one scale per block of 32 (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; the K-quants have their
//                own tiles, k_quant_avx2.cpp): per block b the exact integer S_b, the sum of
//                (code - zero point) * x over its 32 elements, fused into chain b % 8:
//                c[b % 8] = fma(float(S_b), w_scale * x_scale of the block, c[b % 8]), the
//                blocks in order; then HorizontalSum over the chains as lanes 0..7 (or
//                BlockChainsSum, the same tree over 8 registers) + HorizontalSum(min_acc) for
//                types with a min, where min_acc[8] += w_min[b..b+7] * x_sum[b..b+7] over
//                spans of 8 blocks. One conversion and multiply-add per block and no other
//                float work leaves the tiles to the integer multiplies: in the row-streams tile
//                (row_groups_avx2.cpp) a block's four code words add in 16 bits before one madd
//                (Zen 1, one thread, Q4_0 from L1: 4.7-4.9 -> 3.6-3.7 cycles per row's block,
//                where four chains by lane had taken a madd, a conversion and a multiply-add
//                per code word), and the panel tile (SpanLaneRows) reads a span's 8 blocks side
//                by side, so that its lane j is block j's sum.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "kernels/matmul_driver.h"
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

// How the panel tile forms a block's integer (the same integer every way).
enum class Codes {
  // Codes minus a zero point: maddubs(|w|, sign(x, w)); right for every type (Q8_0).
  kSigned,
  // Codes below 32 with a zero point z of 8 or 16 (Q4_0, Q5_0): the sum of maddubs(w, x) less z
  // times the block's sum of activations (from QuantizedRows::zero8_lanes, zero16_lanes, formed
  // once per token), where kSigned takes a sign per token, row and word.
  kZeroLanes,
  // Codes below 32 without a zero point (Q4_1, Q5_1): maddubs(w, x).
  kUnsigned,
};

// The prefill panels of the per-block types keep each span of 8 blocks with its blocks side by
// side: word i (32 bytes) of a span holds elements 4i..4i+3 of its blocks, block j in 32-bit lane
// j (a partial last span of n blocks: 4n-byte words). A register's lane j then gathers block j's
// integer over the span's 8 words, with no horizontal sums: lane j of the span's sums is chain
// j's block sum, which one conversion and one multiply-add per 8 blocks take, where block order
// took a conversion and a multiply-add per block besides the sums' reduction.
void TransposeSpan(const uint8_t* in, int n, uint8_t* out) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < 8; ++i) std::memcpy(out + 4 * (n * i + j), in + 32 * j + 4 * i, 4);
  }
}

// `count` blocks of codes in block order (32 bytes each) -> spans side by side, into `out`
// (which may be `codes`: each span goes through a copy).
void ToSpanLanes(const uint8_t* codes, int64_t count, uint8_t* out) {
  alignas(32) uint8_t span[kBlockChains * 32];
  for (int64_t b = 0; b < count; b += kBlockChains) {
    const int n = static_cast<int>(std::min<int64_t>(kBlockChains, count - b));
    std::memcpy(span, codes + 32 * b, 32 * n);
    TransposeSpan(span, n, out + 32 * b);
  }
}

// UnpackBlocksAvx2, with the legacy types' codes in span lanes (above) for SpanLaneRows.
void UnpackPanelAvx2(WeightType type, const void* row, int64_t first_block, int64_t num_blocks,
                     uint8_t* q, float* scale, float* min) {
  UnpackBlocksAvx2(type, row, first_block, num_blocks, q, scale, min);
  const bool per_block = type == WeightType::kQ4_0 || type == WeightType::kQ4_1 ||
                         type == WeightType::kQ5_0 || type == WeightType::kQ5_1 ||
                         type == WeightType::kQ8_0;
  if (!per_block) return;
  REPRISE_CHECK(first_block % kBlockChains == 0, "panel rows unpack from a span's start");
  ToSpanLanes(q, num_blocks, q);
}

// Tokens t0 .. t0 + MT - 1 over a panel's rows of a per-block type in span lanes, a row at a time:
// the tokens' codes are put in span lanes once per call, with each block's scale and zero-point
// sum, so every row reads them straight.
template <int MT, Codes kCodes>
class SpanLaneRows {
 public:
  SpanLaneRows(const QuantizedRows& x, int64_t t0, const UnpackedRows& w)
      : w_(w), cols_(x.cols), blocks_(x.cols / kQk) {
    const int64_t code_bytes = MT * cols_;
    const int64_t float_bytes = MT * blocks_ * 4;
    // 32 bytes past the last array for a partial span's whole-vector reads (Span).
    uint8_t* scratch = ThreadScratch(Slot::kTileActivations, code_bytes + 2 * float_bytes + 32);
    x_codes_ = reinterpret_cast<int8_t*>(scratch);
    x_scales_ = reinterpret_cast<float*>(scratch + code_bytes);
    x_zeros_ = reinterpret_cast<int32_t*>(scratch + code_bytes + float_bytes);
    for (int t = 0; t < MT; ++t) {
      ToSpanLanes(reinterpret_cast<const uint8_t*>(x.q + (t0 + t) * cols_), blocks_,
                  reinterpret_cast<uint8_t*>(x_codes_ + t * cols_));
      const float* d = x.d + (t0 + t) * (cols_ / 16);
      for (int64_t b = 0; b < blocks_; ++b) x_scales_[t * blocks_ + b] = d[2 * b];
      if constexpr (kCodes == Codes::kZeroLanes) {
        const int32_t* lanes = x.ZeroLanes(w.zero_point, t0 + t);
        for (int64_t b = 0; b < blocks_; ++b) {
          const int32_t* l = lanes + 4 * b;
          x_zeros_[t * blocks_ + b] = l[0] + l[1] + l[2] + l[3];
        }
      }
      x_sums_[t] = x.sum != nullptr ? x.sum + (t0 + t) * blocks_ : nullptr;
    }
  }

  // Row r: y[t * y_stride].
  __attribute__((always_inline)) void Row(int64_t r, float* y, int64_t y_stride) {
    const uint8_t* codes = w_.q + r * cols_;
    const float* scales = w_.scale + r * (cols_ / 16);
    __m256 acc[MT];
    for (int t = 0; t < MT; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks_; b += kBlockChains) {
      const int n = static_cast<int>(std::min<int64_t>(kBlockChains, blocks_ - b));
      if (n == kBlockChains) {
        Span<kBlockChains>(codes, scales, b, kBlockChains, acc);
      } else {
        Span<0>(codes, scales, b, n, acc);
      }
    }
    for (int t = 0; t < MT; ++t) {
      float sum = HorizontalSum(acc[t]);
      if (w_.min != nullptr) sum += MinsDot(w_.min + r * blocks_, x_sums_[t]);
      y[t * y_stride] = sum;
    }
  }

 private:
  // The span of blocks b .. b + n - 1 (kN: n known to be whole, else 0): every token's chains.
  template <int kN>
  __attribute__((always_inline)) void Span(const uint8_t* codes, const float* scales, int64_t b,
                                           int n, __m256 (&acc)[MT]) {
    const __m256i lanes = LaneMask(n);
    const int stride = kN == 0 ? 4 * n : 32;  // a word's bytes
    // A partial span's words read 32 bytes and keep their n lanes: the bytes past a row's last
    // word are the next row's or, after the last row, the buffer's next array (the panel's
    // scales, the tokens' scales), never past the allocation; masked loads cost more on Zen 1.
    const auto load = [&](const void* p) __attribute__((always_inline)) {
      const __m256i v = _mm256_loadu_si256(static_cast<const __m256i*>(p));
      return kN == 0 ? _mm256_and_si256(v, lanes) : v;
    };
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t* w_span = codes + 32 * b;
    __m256i sums[MT];
    if constexpr (kCodes == Codes::kSigned) {
      const __m256i zero_bytes = _mm256_set1_epi8(static_cast<char>(w_.zero_point));
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m256i w_signed = _mm256_sub_epi8(load(w_span + stride * i), zero_bytes);
        const __m256i w_abs = _mm256_abs_epi8(w_signed);
        for (int t = 0; t < MT; ++t) {
          const __m256i xv = load(x_codes_ + t * cols_ + 32 * b + stride * i);
          const __m256i word =
              _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(xv, w_signed)), ones);
          sums[t] = i == 0 ? word : _mm256_add_epi32(sums[t], word);
          KeepChain(sums[t]);
        }
      }
    } else {
      // Codes below 32: four words' pairs (at most 4 * 2 * 31 * 127) add in 16 bits.
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        __m256i pairs[MT];
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const int i = 4 * half + k;
          const __m256i w = load(w_span + stride * i);
          for (int t = 0; t < MT; ++t) {
            const __m256i p =
                _mm256_maddubs_epi16(w, load(x_codes_ + t * cols_ + 32 * b + stride * i));
            pairs[t] = k == 0 ? p : _mm256_add_epi16(pairs[t], p);
          }
        }
        for (int t = 0; t < MT; ++t) {
          const __m256i word = _mm256_madd_epi16(pairs[t], ones);
          sums[t] = half == 0 ? word : _mm256_add_epi32(sums[t], word);
        }
      }
    }
    const __m256 w_scales = BlockScales(scales + 2 * b, kN == 0 ? n : kBlockChains);
    for (int t = 0; t < MT; ++t) {
      const int64_t at = t * blocks_ + b;
      if constexpr (kCodes == Codes::kZeroLanes) {
        sums[t] = _mm256_sub_epi32(sums[t], load(x_zeros_ + at));
      }
      const __m256 x_scales = _mm256_castsi256_ps(load(x_scales_ + at));
      acc[t] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t]), _mm256_mul_ps(w_scales, x_scales), acc[t]);
    }
  }

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
  const int64_t cols_, blocks_;
  // Arranged once per call for every row of the panel. The block scales repeat every other float
  // of QuantizedRows::d, which a row would pick out with shuffles per span: read so (and the zero
  // sums formed per row), the tile ran 3-4% slower (Zen 1, Q4_0 and Q5_0, 576 x 1536, 512 tokens).
  int8_t* x_codes_;   // [MT][cols] in span lanes
  float* x_scales_;   // [MT][blocks]
  int32_t* x_zeros_;  // [MT][blocks]: z * the block's sum of codes (kZeroLanes)
  const float* x_sums_[MT];
};

template <int MT, Codes kCodes>
void SpanLaneRowsT(const QuantizedRows& x, int64_t t0, const UnpackedRows& w, int64_t r0, int nr,
                   float* y, int64_t y_stride) {
  SpanLaneRows<MT, kCodes> rows(x, t0, w);
  for (int r = 0; r < nr; ++r) rows.Row(r0 + r, y + r, y_stride);
}

// Tokens per call of the panel tile; it takes the panel's rows one at a time.
constexpr int kQuantTokenTile = 4;
constexpr int kQuantRowTile = 1;

using QuantRowsFn = void (*)(const QuantizedRows&, int64_t, const UnpackedRows&, int64_t, int,
                             float*, int64_t);

template <Codes kCodes, int... MTs>
constexpr auto SpanLaneVariants(std::integer_sequence<int, MTs...>) {
  return std::array<QuantRowsFn, sizeof...(MTs)>{&SpanLaneRowsT<MTs + 1, kCodes>...};
}

void QuantTile(const QuantizedRows& x, int64_t t0, int mt, const UnpackedRows& w, int64_t r0,
               int nr, float* y, int64_t y_stride) {
  // Only the per-block types come unpacked here: the K-quants' activations come per
  // super-block, and their tiles read stored rows.
  REPRISE_CHECK(w.scales_per_32, "the AVX2 panel tile takes a scale per block");
  using Tokens = std::make_integer_sequence<int, kQuantTokenTile>;
  static constexpr auto kSigned = SpanLaneVariants<Codes::kSigned>(Tokens());
  static constexpr auto kZeroLanes = SpanLaneVariants<Codes::kZeroLanes>(Tokens());
  static constexpr auto kUnsigned = SpanLaneVariants<Codes::kUnsigned>(Tokens());
  const bool zero_lanes = x.ZeroLanes(w.zero_point, 0) != nullptr;
  const auto& variants = zero_lanes ? kZeroLanes : w.zero_point != 0 ? kSigned : kUnsigned;
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
      .unpack = UnpackPanelAvx2,
      .group_layout = WeightLayout::kRowStreams,
      .row_groups_prefill = RowGroupsPrefillAvx2,
      .has_row_group_tile = HasRowGroupTileAvx2,
      .row_group_tile = RowGroupTileAvx2,
      .ungroup_rows = UngroupRowStreamsAvx2,
      .float_group_tile = FloatGroupTileAvx2,
      .widen_group = WidenGroupAvx2,
  };
  return kernels;
}

}  // namespace reprise::kernels
