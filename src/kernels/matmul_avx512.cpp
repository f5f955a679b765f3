// MatMul kernels for AVX-512 (F/BW/VL/DQ + VNNI, FMA, F16C). Compiled with those flags only for
// this file (module.cmake); used only when cpu_target.cpp finds them on the CPU.
//
// Lane layout, the same for every tile size so that an output's bits never depend on it:
//   float types: acc[16] += x[c..c+15] * w[c..c+15] for c = 0, 16, 32, ... (a masked last chunk),
//                then HorizontalSum; F16/BF16 weights are widened exactly, from a widened panel
//                (prefill) or straight from the matrix (decode): the same arithmetic.
//   quantized:   per chunk of 64 codes (two blocks of 32; a lone last block is a masked chunk),
//                lane i holds the exact integer sum of the 4 products 4i..4i+3;
//                acc[16] += float(isum) * (w_scale * x_scale) of the lane's 16-group,
//                then HorizontalSum(acc) + HorizontalSum(min_acc) for types with a min, where
//                min_acc[16] += w_min[b..b+15] * x_sum[b..b+15] over blocks b.
#include "kernels/simd.h"

#include <algorithm>
#include <array>
#include <utility>

#include "kernels/matmul_kernels.h"

namespace reprise::kernels {

namespace {

// A fixed reduction tree: 16 -> 8 -> 4 -> 2 -> 1.
inline float HorizontalSum(__m512 v) {
  __m256 eight = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  __m128 one = _mm_add_ss(two, _mm_movehdup_ps(two));
  return _mm_cvtss_f32(one);
}

// How a float tile reads 16 weights of each stored type as f32 (exact conversions; a masked
// read gives +0 in the unread lanes, as a masked f32 read does).
struct F32Weights {
  using Element = float;
  static __m512 Load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 LoadMasked(__mmask16 mask, const float* p) { return _mm512_maskz_loadu_ps(mask, p); }
};
struct F16Weights {
  using Element = uint16_t;
  static __m512 Load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 LoadMasked(__mmask16 mask, const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p));
  }
};
struct Bf16Weights {
  using Element = uint16_t;
  static __m512 Widen(__m256i bits) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
  static __m512 Load(const uint16_t* p) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 LoadMasked(__mmask16 mask, const uint16_t* p) {
    return Widen(_mm256_maskz_loadu_epi16(mask, p));
  }
};

template <typename Weights, int MT, int NR>
void FloatTileT(const float* x, int64_t x_stride, const void* w_data, int64_t w_stride,
                int64_t cols, float* y, int64_t y_stride) {
  using Element = typename Weights::Element;
  const Element* w = static_cast<const Element*>(w_data);
  __m512 acc[MT][NR];
  for (int t = 0; t < MT; ++t) {
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_setzero_ps();
  }
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = Weights::Load(w + r * w_stride + c);
    for (int t = 0; t < MT; ++t) {
      __m512 xv = _mm512_loadu_ps(x + t * x_stride + c);
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  if (c < cols) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (cols - c)) - 1);
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = Weights::LoadMasked(mask, w + r * w_stride + c);
    for (int t = 0; t < MT; ++t) {
      __m512 xv = _mm512_maskz_loadu_ps(mask, x + t * x_stride + c);
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  for (int t = 0; t < MT; ++t) {
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = HorizontalSum(acc[t][r]);
  }
}

constexpr int kFloatTokenTile = 6;
constexpr int kFloatRowTile = 4;

using FloatTileFn = void (*)(const float*, int64_t, const void*, int64_t, int64_t, float*,
                             int64_t);

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

// [s0 s1 s2 s3] -> [s0 x4, s1 x4, s2 x4, s3 x4]: the scale of each lane's 16-group.
inline __m512 ExpandGroupScales(__m128 four) {
  const __m512i index = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(index, _mm512_castps128_ps512(four));
}

// Where a quantized tile finds its rows' unpacked weights, one segment of up to kSegment
// columns at a time (a multiple of every block size).
constexpr int64_t kSegment = 512;

// Rows already unpacked into a panel (prefill: unpacked once, reused by every token tile).
template <int NR>
struct PanelSource {
  const UnpackedRows& w;
  int64_t r0;
  const uint8_t* q[NR];
  const float* scale[NR];

  void Segment(int64_t c, int64_t /*n*/) {
    for (int r = 0; r < NR; ++r) {
      q[r] = w.q + (r0 + r) * w.cols + c;
      scale[r] = w.scale + (r0 + r) * (w.cols / 16) + c / 16;
    }
  }
  const float* Mins(int r) const { return w.min + (r0 + r) * (w.cols / 32); }
};

// Rows still in their stored blocks (decode: each weight is used once). Each segment is
// unpacked into L1 just before use, so memory reads overlap with the arithmetic; the codes
// and scales are the same bytes a panel would hold.
template <int NR>
struct RawSource {
  // The buffers are left uninitialised: each segment is written before it is read.
  RawSource(const RawRows& raw_rows, int64_t first_row) : raw(raw_rows), r0(first_row) {}

  const RawRows& raw;
  int64_t r0;
  const uint8_t* q[NR];
  const float* scale[NR];
  alignas(64) uint8_t codes[NR][kSegment];          // [NR][kSegment]
  alignas(64) float scales[NR][kSegment / 16];      // [NR][kSegment / 16]
  alignas(64) float mins[NR][kMaxRawCols / 32];     // [NR][cols / 32], whole rows

  void Segment(int64_t c, int64_t n) {
    const int64_t block = static_cast<int64_t>(BlockElements(raw.type));
    const int64_t first_byte = c / block * static_cast<int64_t>(BlockBytes(raw.type));
    const int64_t bytes = n / block * static_cast<int64_t>(BlockBytes(raw.type));
    for (int r = 0; r < NR; ++r) {
      // Ask for the same stretch of the next tile's rows: the rows are read side by side, so
      // "ahead" is a tile of rows further, not further along this row.
      const uint8_t* next = raw.data + (r0 + NR + r) * raw.row_bytes + first_byte;
      for (int64_t line = 0; line < bytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next + line), _MM_HINT_T0);
      }
      UnpackBlocksAvx2NoPrefetch(raw.type, raw.data + (r0 + r) * raw.row_bytes, c / block, n / block,
                       codes[r], scales[r], raw.has_min ? mins[r] + c / 32 : nullptr);
      q[r] = codes[r];
      scale[r] = scales[r];
    }
  }
  const float* Mins(int r) const { return mins[r]; }
};

// One chunk of 64 codes (or the masked last 32) at column c for every output of the tile;
// `offset` is c within the source's current segment.
template <int MT, int NR, bool kZeroPoint, typename Source>
inline void QuantChunk(const QuantizedRows& x, int64_t t0, const Source& w, int64_t c,
                       int64_t offset, __mmask64 code_mask, __mmask8 scale_mask,
                       __m512i zero_bytes, __m512 (&acc)[MT][NR]) {
  const int64_t cols = x.cols;
  const int64_t groups = cols / 16;
  __m512i wv[NR];
  __m512 ws[NR];
  for (int r = 0; r < NR; ++r) {
    wv[r] = _mm512_maskz_loadu_epi8(code_mask, w.q[r] + offset);
    ws[r] = ExpandGroupScales(_mm_maskz_loadu_ps(scale_mask, w.scale[r] + offset / 16));
  }
  for (int t = 0; t < MT; ++t) {
    const __m512i xv = _mm512_maskz_loadu_epi8(code_mask, x.q + (t0 + t) * cols + c);
    const __m512 xd =
        ExpandGroupScales(_mm_maskz_loadu_ps(scale_mask, x.d + (t0 + t) * groups + c / 16));
    // sum (w - z) * x = sum w * x - z * sum x: start each lane at -z * (its 4 x's).
    __m512i start = _mm512_setzero_si512();
    if constexpr (kZeroPoint) {
      start = _mm512_sub_epi32(start, _mm512_dpbusd_epi32(_mm512_setzero_si512(), zero_bytes, xv));
    }
    for (int r = 0; r < NR; ++r) {
      const __m512i isum = _mm512_dpbusd_epi32(start, wv[r], xv);
      acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(ws[r], xd), acc[t][r]);
    }
  }
}

template <int MT, int NR, bool kZeroPoint, typename Source>
void QuantTileCore(const QuantizedRows& x, int64_t t0, Source& w, bool has_min, int zero_point,
                   float* y, int64_t y_stride) {
  const int64_t cols = x.cols;
  const __m512i zero_bytes = _mm512_set1_epi8(static_cast<char>(zero_point));
  __m512 acc[MT][NR];
  for (int t = 0; t < MT; ++t) {
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_setzero_ps();
  }
  for (int64_t segment = 0; segment < cols; segment += kSegment) {
    const int64_t n = std::min(kSegment, cols - segment);
    w.Segment(segment, n);
    int64_t offset = 0;
    for (; offset + 64 <= n; offset += 64) {
      QuantChunk<MT, NR, kZeroPoint>(x, t0, w, segment + offset, offset, ~__mmask64{0}, 0xF,
                                     zero_bytes, acc);
    }
    if (offset < n) {  // one block of 32 left (the row's last)
      QuantChunk<MT, NR, kZeroPoint>(x, t0, w, segment + offset, offset, 0xFFFFFFFFull, 0x3,
                                     zero_bytes, acc);
    }
  }
  float sums[MT][NR];
  for (int t = 0; t < MT; ++t) {
    for (int r = 0; r < NR; ++r) sums[t][r] = HorizontalSum(acc[t][r]);
  }
  if (has_min) {
    const int64_t blocks = cols / 32;
    for (int t = 0; t < MT; ++t) {
      const float* xs = x.sum + (t0 + t) * blocks;
      for (int r = 0; r < NR; ++r) {
        const float* wm = w.Mins(r);
        __m512 min_acc = _mm512_setzero_ps();
        int64_t b = 0;
        for (; b + 16 <= blocks; b += 16) {
          min_acc = _mm512_fmadd_ps(_mm512_loadu_ps(wm + b), _mm512_loadu_ps(xs + b), min_acc);
        }
        if (b < blocks) {
          const __mmask16 mask = static_cast<__mmask16>((1u << (blocks - b)) - 1);
          min_acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, wm + b),
                                    _mm512_maskz_loadu_ps(mask, xs + b), min_acc);
        }
        sums[t][r] += HorizontalSum(min_acc);
      }
    }
  }
  for (int t = 0; t < MT; ++t) {
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = sums[t][r];
  }
}

template <int MT, int NR, bool kZeroPoint>
void QuantTileT(const QuantizedRows& x, int64_t t0, const UnpackedRows& w, int64_t r0, float* y,
                int64_t y_stride) {
  PanelSource<NR> source{.w = w, .r0 = r0, .q = {}, .scale = {}};
  QuantTileCore<MT, NR, kZeroPoint>(x, t0, source, w.min != nullptr, w.zero_point, y, y_stride);
}

template <int MT, int NR, bool kZeroPoint>
void QuantTileRawT(const QuantizedRows& x, int64_t t0, const RawRows& w, int64_t r0, float* y,
                   int64_t y_stride) {
  RawSource<NR> source(w, r0);
  QuantTileCore<MT, NR, kZeroPoint>(x, t0, source, w.has_min, w.zero_point, y, y_stride);
}

constexpr int kQuantTokenTile = 4;
constexpr int kQuantRowTile = 4;

using QuantTileFn = void (*)(const QuantizedRows&, int64_t, const UnpackedRows&, int64_t, float*,
                             int64_t);
using QuantTileRawFn = void (*)(const QuantizedRows&, int64_t, const RawRows&, int64_t, float*,
                                int64_t);

template <int MT, bool kZeroPoint, int... NRs>
constexpr auto QuantRowVariants(std::integer_sequence<int, NRs...>) {
  return std::make_pair(
      std::array<QuantTileFn, sizeof...(NRs)>{&QuantTileT<MT, NRs + 1, kZeroPoint>...},
      std::array<QuantTileRawFn, sizeof...(NRs)>{&QuantTileRawT<MT, NRs + 1, kZeroPoint>...});
}

template <bool kZeroPoint, int... MTs>
constexpr auto QuantVariants(std::integer_sequence<int, MTs...>) {
  return std::array<decltype(QuantRowVariants<1, kZeroPoint>(
                        std::make_integer_sequence<int, kQuantRowTile>())),
                    sizeof...(MTs)>{
      QuantRowVariants<MTs + 1, kZeroPoint>(std::make_integer_sequence<int, kQuantRowTile>())...};
}

using Tokens = std::make_integer_sequence<int, kQuantTokenTile>;
constexpr auto kQuantWithZero = QuantVariants<true>(Tokens());
constexpr auto kQuantWithoutZero = QuantVariants<false>(Tokens());

void QuantTile(const QuantizedRows& x, int64_t t0, int mt, const UnpackedRows& w, int64_t r0,
               int nr, float* y, int64_t y_stride) {
  const auto& variants = w.zero_point != 0 ? kQuantWithZero : kQuantWithoutZero;
  variants[mt - 1].first[nr - 1](x, t0, w, r0, y, y_stride);
}

void QuantTileRaw(const QuantizedRows& x, int64_t t0, int mt, const RawRows& w, int64_t r0,
                  int nr, float* y, int64_t y_stride) {
  const auto& variants = w.zero_point != 0 ? kQuantWithZero : kQuantWithoutZero;
  variants[mt - 1].second[nr - 1](x, t0, w, r0, y, y_stride);
}

// Widening streams weights from memory once (decode); ask for them this far ahead.
constexpr int kPrefetchBytes = 2048;

void Widen(WeightType type, const void* src, int64_t n, float* dst) {
  const uint16_t* bits = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  if (type == WeightType::kF16) {
    for (; i + 16 <= n; i += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(bits + i) + kPrefetchBytes, _MM_HINT_T0);
      _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(
                                    reinterpret_cast<const __m256i*>(bits + i))));
    }
    for (; i < n; ++i) dst[i] = HalfToFloat(bits[i]);
  } else {
    for (; i + 16 <= n; i += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(bits + i) + kPrefetchBytes, _MM_HINT_T0);
      const __m512i wide = _mm512_cvtepu16_epi32(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + i)));
      _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
    }
    for (; i < n; ++i) dst[i] = Bfloat16ToFloat(bits[i]);
  }
}

}  // namespace

const TargetKernels& Avx512Kernels() {
  static const TargetKernels kernels = {
      .float_token_tile = kFloatTokenTile,
      .float_row_tile = kFloatRowTile,
      .quant_token_tile = kQuantTokenTile,
      .quant_row_tile = kQuantRowTile,
      .float_tile = FloatTile,
      .quant_tile = QuantTile,
      .quant_tile_raw = QuantTileRaw,
      .widen = Widen,
      .unpack = UnpackBlocksAvx2,
  };
  return kernels;
}

}  // namespace reprise::kernels
