// MatMul kernels for AVX-512 (F/BW/VL/DQ + VNNI, FMA, F16C). Compiled with those flags only for
// this file (module.cmake); used only when cpu_target.cpp finds them on the CPU.
//
// Lane layout, the same for every tile size so that an output's bits never depend on it:
//   float types: acc[16] += x[c..c+15] * w[c..c+15] for c = 0, 16, 32, ... (a masked last chunk),
//                then HorizontalSum; F16/BF16 weights are widened exactly, from a widened panel
//                (prefill) or straight from the matrix (decode): the same arithmetic.
//   quantized:   per chunk of 64 codes (two blocks of 32; a lone last block is a masked chunk),
//                the exact integer sum of each 16-group, then four float chains per output (one
//                per group position in a chunk) summed at the end, plus MinsDot for types with a
//                min: see "The quantized tiles' arithmetic" in quant_reads_avx512.h.
#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_reads_avx512.h"
#include "kernels/reduce_avx512.h"
#include "kernels/simd.h"

namespace reprise::kernels {

namespace {

// How a float tile reads 16 weights of each stored type as f32 (exact conversions; a masked
// read gives +0 in the unread lanes, as a masked f32 read does).
struct F32Weights {
  using Element = float;
  static __m512 Load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 LoadMasked(__mmask16 mask, const float* p) {
    return _mm512_maskz_loadu_ps(mask, p);
  }
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

constexpr int kFloatTokenTile = 6;
constexpr int kFloatRowTile = 4;

// Tokens x rows dot products over columns [c_begin, c_end) (the lane layout above), the
// accumulators carried in `sums` between the spans of one row (TargetKernels::float_span_tile):
// from zero where c_begin is 0, summed into y where c_end is cols. kWholeRow: the whole row in
// one call (the float tile), `sums` never used.
template <typename Weights, int MT, int NR, bool kWholeRow = false>
void FloatSpanTileT(const float* x, int64_t x_stride, const typename Weights::Element* w,
                    int64_t w_stride, int64_t c_begin, int64_t c_end, int64_t cols, float* sums,
                    float* y, int64_t y_stride) {
  static_assert(kFloatSpanSums == 16);
  __m512 acc[MT][NR];
  for (int t = 0; t < MT; ++t) {
    for (int r = 0; r < NR; ++r) {
      acc[t][r] = kWholeRow || c_begin == 0 ? _mm512_setzero_ps()
                                            : _mm512_load_ps(sums + (t * NR + r) * 16);
    }
  }
  int64_t c = c_begin;
  for (; c + 16 <= c_end; c += 16) {
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = Weights::Load(w + r * w_stride + c);
    for (int t = 0; t < MT; ++t) {
      __m512 xv = _mm512_loadu_ps(x + t * x_stride + c);
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  if (c < c_end) {  // the row's last, partial chunk: c_end is cols
    const __mmask16 mask = static_cast<__mmask16>((1u << (c_end - c)) - 1);
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = Weights::LoadMasked(mask, w + r * w_stride + c);
    for (int t = 0; t < MT; ++t) {
      __m512 xv = _mm512_maskz_loadu_ps(mask, x + t * x_stride + c);
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  if (kWholeRow || c_end == cols) {
    for (int t = 0; t < MT; ++t) {
      for (int r = 0; r < NR; ++r) y[t * y_stride + r] = HorizontalSum(acc[t][r]);
    }
  } else {
    for (int t = 0; t < MT; ++t) {
      for (int r = 0; r < NR; ++r) _mm512_store_ps(sums + (t * NR + r) * 16, acc[t][r]);
    }
  }
}

// The whole row at once: the float tile.
template <typename Weights, int MT, int NR>
void FloatTileT(const float* x, int64_t x_stride, const void* w_data, int64_t w_stride,
                int64_t cols, float* y, int64_t y_stride) {
  FloatSpanTileT<Weights, MT, NR, true>(x, x_stride,
                                        static_cast<const typename Weights::Element*>(w_data),
                                        w_stride, 0, cols, cols, nullptr, y, y_stride);
}

using FloatSpanTileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, int64_t,
                                 int64_t, float*, float*, int64_t);

template <int MT, int... NRs>
constexpr auto FloatSpanRowVariants(std::integer_sequence<int, NRs...>) {
  return std::array<FloatSpanTileFn, sizeof...(NRs)>{&FloatSpanTileT<F32Weights, MT, NRs + 1>...};
}

template <int... MTs>
constexpr auto FloatSpanVariants(std::integer_sequence<int, MTs...>) {
  return std::array<std::array<FloatSpanTileFn, kFloatRowTile>, sizeof...(MTs)>{
      FloatSpanRowVariants<MTs + 1>(std::make_integer_sequence<int, kFloatRowTile>())...};
}

void FloatSpanTile(const float* x, int64_t x_stride, int mt, const float* w, int64_t w_stride,
                   int nr, int64_t c_begin, int64_t c_end, int64_t cols, float* sums, float* y,
                   int64_t y_stride) {
  static constexpr auto kVariants =
      FloatSpanVariants(std::make_integer_sequence<int, kFloatTokenTile>());
  kVariants[mt - 1][nr - 1](x, x_stride, w, w_stride, c_begin, c_end, cols, sums, y, y_stride);
}

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

// UnpackBlocks for the legacy types, four blocks per step with 512-bit registers (byte-identical
// to the scalar unpacker; KernelUnpackTest checks). Other types and leftovers go to the AVX2 one.
template <typename Block>
void LegacyBlocks512(WeightType type, const void* row, int64_t first, int64_t count, uint8_t* q,
                     float* scale, float* min) {
  constexpr bool kQ8 = std::is_same_v<Block, BlockQ8_0>;
  constexpr bool kMin = std::is_same_v<Block, BlockQ4_1>;
  const Block* blocks = static_cast<const Block*>(row) + first;
  const __m512i low_mask = _mm512_set1_epi8(0x0F);
  // 128-bit lanes [low0 high0 low1 high1] and [low2 high2 low3 high3] (qword indices into
  // low = 0..7, high = 8..15).
  const __m512i first_pair = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second_pair = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  const __m256i duplicate = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  int64_t b = 0;
  for (; b + 4 <= count; b += 4) {
    const Block* p = blocks + b;
    __m512i out0, out1;
    if constexpr (kQ8) {
      auto load = [](const Block& block) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qs));
      };
      const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
      out0 = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(load(p[0])), load(p[1]), 1),
                              offset);
      out1 = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(load(p[2])), load(p[3]), 1),
                              offset);
    } else {
      auto load = [](const Block& block) {
        return _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs));
      };
      __m512i packed = _mm512_castsi128_si512(load(p[0]));
      packed = _mm512_inserti32x4(packed, load(p[1]), 1);
      packed = _mm512_inserti32x4(packed, load(p[2]), 2);
      packed = _mm512_inserti32x4(packed, load(p[3]), 3);
      const __m512i low = _mm512_and_si512(packed, low_mask);
      const __m512i high = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_mask);
      out0 = _mm512_permutex2var_epi64(low, first_pair, high);
      out1 = _mm512_permutex2var_epi64(low, second_pair, high);
    }
    _mm512_storeu_si512(q + b * 32, out0);
    _mm512_storeu_si512(q + b * 32 + 64, out1);
    __m128i d = _mm_cvtsi32_si128(p[0].d);
    d = _mm_insert_epi16(d, p[1].d, 1);
    d = _mm_insert_epi16(d, p[2].d, 2);
    d = _mm_insert_epi16(d, p[3].d, 3);
    const __m128 d4 = _mm_cvtph_ps(d);
    _mm256_storeu_ps(scale + 2 * b,
                     _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d4), duplicate));
    if constexpr (kMin) {
      __m128i m = _mm_cvtsi32_si128(p[0].m);
      m = _mm_insert_epi16(m, p[1].m, 1);
      m = _mm_insert_epi16(m, p[2].m, 2);
      m = _mm_insert_epi16(m, p[3].m, 3);
      _mm_storeu_ps(min + b, _mm_cvtph_ps(m));
    }
  }
  if (b < count) {
    UnpackBlocksAvx2NoPrefetch(type, row, first + b, count - b, q + b * 32, scale + 2 * b,
                               min != nullptr ? min + b : nullptr);
  }
}

}  // namespace

void UnpackBlocksAvx512NoPrefetch(WeightType type, const void* row, int64_t first_block,
                                  int64_t num_blocks, uint8_t* q, float* scale, float* min) {
  switch (type) {
    case WeightType::kQ4_0:
      return LegacyBlocks512<BlockQ4_0>(type, row, first_block, num_blocks, q, scale, min);
    case WeightType::kQ4_1:
      return LegacyBlocks512<BlockQ4_1>(type, row, first_block, num_blocks, q, scale, min);
    case WeightType::kQ8_0:
      return LegacyBlocks512<BlockQ8_0>(type, row, first_block, num_blocks, q, scale, min);
    default:
      return UnpackBlocksAvx2NoPrefetch(type, row, first_block, num_blocks, q, scale, min);
  }
}

namespace {

// Where a quantized tile finds its rows' unpacked weights, one segment of up to kSegment
// columns at a time (a multiple of every block size).
constexpr int64_t kSegment = 512;

// For a tile reading its rows in place: points blocks[r] at row r0 + r's block holding column c
// (blocks of kElements columns) and asks for columns [c, c + n) of the rows prefetch_rows ahead.
template <int64_t kElements, typename Block, int NR>
inline void PointAtSegment(const RawRows& raw, int64_t r0, int64_t c, int64_t n,
                           const Block* (&blocks)[NR]) {
  const int64_t first_byte = c / kElements * static_cast<int64_t>(sizeof(Block));
  const int64_t bytes = n / kElements * static_cast<int64_t>(sizeof(Block));
  for (int r = 0; r < NR; ++r) {
    const uint8_t* row = raw.data + (r0 + r) * raw.row_bytes;
    blocks[r] = reinterpret_cast<const Block*>(row + first_byte);
    PrefetchRowStretch(raw, r0 + raw.prefetch_rows + r, first_byte, bytes);
  }
}

// Rows still in their stored blocks (decode: each weight is used once). Each segment is
// unpacked into L1 one segment ahead of its use (two slots), so memory reads overlap with the
// arithmetic and the unpacker's stores have retired before the tile loads them; the codes and
// scales are the same bytes a panel would hold.

template <int NR>
struct RawSource {
  // The buffers are left uninitialised: each segment is written before it is read.
  RawSource(const RawRows& raw_rows, int64_t first_row) : raw(raw_rows), r0(first_row) {}

  const RawRows& raw;
  int64_t r0;
  const uint8_t* q[NR];
  const float* scale[NR];
  alignas(64) uint8_t codes[2][NR][kSegment];      // [slot][NR][kSegment]
  alignas(64) float scales[2][NR][kSegment / 16];  // [slot][NR][kSegment / 16]
  alignas(64) float mins[NR][kMaxRawCols / 32];    // [NR][cols / 32], whole rows

  void Prepare(int64_t c, int64_t n, int slot) {
    const int64_t block = static_cast<int64_t>(BlockElements(raw.type));
    const int64_t first_byte = c / block * static_cast<int64_t>(BlockBytes(raw.type));
    const int64_t bytes = n / block * static_cast<int64_t>(BlockBytes(raw.type));
    for (int r = 0; r < NR; ++r) {
      PrefetchRowStretch(raw, r0 + raw.prefetch_rows + r, first_byte, bytes);
      UnpackBlocksAvx512NoPrefetch(raw.type, raw.data + (r0 + r) * raw.row_bytes, c / block,
                                   n / block, codes[slot][r], scales[slot][r],
                                   raw.has_min ? mins[r] + c / 32 : nullptr);
    }
  }
  void Use(int64_t /*c*/, int64_t /*n*/, int slot) {
    for (int r = 0; r < NR; ++r) {
      q[r] = codes[slot][r];
      scale[r] = scales[slot][r];
    }
  }
  __m512i Codes(int r, int64_t offset, __mmask64 mask) const {
    return _mm512_maskz_loadu_epi8(mask, q[r] + offset);
  }
  __m512 Scales(int r, int64_t offset, __mmask8 mask) const {
    return ExpandGroupScales(_mm_maskz_loadu_ps(mask, scale[r] + offset / 16));
  }
  const float* Mins(int r) const { return mins[r]; }
};

// K-quant rows read straight from their super-blocks (decode): per segment, each row's first
// super-block and each super-block's 16 group scales, kept in a register, from
// Derived::GroupScales(block, row, first column). Derived supplies Codes and Mins.
template <int NR, typename Block, typename Derived>
struct SuperBlockSource {
  SuperBlockSource(const RawRows& raw_rows, int64_t first_row) : raw(raw_rows), r0(first_row) {}

  static constexpr int kPerSegment = static_cast<int>(kSegment / kQkK);
  const RawRows& raw;
  int64_t r0;
  const Block* blocks[NR];               // the current segment's first super-block per row
  __m512 group_scales[NR][kPerSegment];  // [row][super-block of the segment]

  void Prepare(int64_t /*c*/, int64_t /*n*/, int /*slot*/) {}
  void Use(int64_t c, int64_t n, int /*slot*/) {
    PointAtSegment<kQkK>(raw, r0, c, n, blocks);
    for (int r = 0; r < NR; ++r) {
      for (int b = 0; b < kPerSegment; ++b) {
        if (b * kQkK < n) {
          group_scales[r][b] =
              static_cast<Derived*>(this)->GroupScales(blocks[r][b], r, c + b * kQkK);
        }
      }
    }
  }
  __m512 Scales(int r, int64_t offset, __mmask8 /*mask*/) const {
    // Chunk q of a super-block covers its groups 4q .. 4q + 3.
    const int quarter = static_cast<int>((offset % kQkK) / 64);
    return _mm512_permutexvar_ps(ChunkGroupLanes(quarter), group_scales[r][offset / kQkK]);
  }
};

// Q4_K or Q5_K rows read straight from their super-blocks (decode, several tokens): per segment,
// the sub-block scales of every row's super-blocks unpacked together (KSubBlockScalesOfRows, two
// rows to a register) and each chunk's group scales permuted from them; codes split from the
// packed nibbles in registers (Q5_K: plus the fifth bits from qh); mins kept for whole rows.
// Same codes and scales as UnpackBlocks produces, so the same bits as the other sources.
// (Unpacked row by row with scalar code, the Q4_K scales were most of the tile's instructions on
// an Intel core; Q5_K had unpacked whole segments into L1 first.)
template <int NR, typename Block>
struct KQuantSource {
  KQuantSource(const RawRows& raw_rows, int64_t first_row) : raw(raw_rows), r0(first_row) {}

  static constexpr int kPerSegment = static_cast<int>(kSegment / kQkK);
  const RawRows& raw;
  int64_t r0;
  const Block* blocks[NR];  // the current segment's first super-block per row
  // [super-block of the segment][row pair]: rows 2h and 2h + 1's d * sc_j in lanes 0-7, 8-15.
  __m512 sub_block_scales[kPerSegment][(NR + 1) / 2];
  alignas(64) float mins[NR][kMaxRawCols / 32];  // [NR][cols / 32], whole rows

  void Prepare(int64_t /*c*/, int64_t /*n*/, int /*slot*/) {}
  void Use(int64_t c, int64_t n, int /*slot*/) {
    PointAtSegment<kQkK>(raw, r0, c, n, blocks);
    for (int b = 0; b < kPerSegment && b * kQkK < n; ++b) {
      const Block* heads[NR];
      float* row_mins[NR];
      for (int r = 0; r < NR; ++r) {
        heads[r] = blocks[r] + b;
        row_mins[r] = mins[r] + (c + b * kQkK) / 32;
      }
      KSubBlockScalesOfRows(heads, sub_block_scales[b], row_mins);
    }
  }
  __m512 Scales(int r, int64_t offset, __mmask8 /*mask*/) const {
    // Chunk q of a super-block covers its sub-blocks 2q (lanes 0-7) and 2q + 1 (lanes 8-15).
    const int quarter = static_cast<int>((offset % kQkK) / 64);
    return _mm512_permutexvar_ps(ChunkSubBlockLanes(quarter, 8 * (r % 2)),
                                 sub_block_scales[offset / kQkK][r / 2]);
  }
  __m512i Codes(int r, int64_t offset, __mmask64 /*mask: K-quant rows are whole chunks*/) const {
    // The chunk's 32 packed bytes read into both halves: low nibbles, then high ones.
    const Block& block = blocks[r][offset / kQkK];
    const int quarter = static_cast<int>((offset % kQkK) / 64);
    const __m512i nibbles = NibblesOf<NibbleSplit::kShift, 0xF0>(_mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qs + 32 * quarter))));
    if constexpr (std::is_same_v<Block, BlockQ5_K>) {
      // Sub-block j (chunk q holds 2q and 2q + 1) takes bit j of qh[l] as element l's bit 4.
      const __m512i qh =
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh)));
      const __m512i shifts = _mm512_add_epi64(_mm512_setr_epi64(0, 0, 0, 0, 1, 1, 1, 1),
                                              _mm512_set1_epi64(2 * quarter));
      const __mmask64 fifth =
          _mm512_test_epi8_mask(_mm512_srlv_epi64(qh, shifts), _mm512_set1_epi8(1));
      return _mm512_mask_add_epi8(nibbles, fifth, nibbles, _mm512_set1_epi8(0x10));
    }
    return nibbles;
  }
  const float* Mins(int r) const { return mins[r]; }
};

// Q4_0, Q5_0 or Q8_0 rows read straight from their blocks (decode, several tokens), like
// KQuantSource: a chunk's codes are assembled in registers from its two blocks (LegacyPairCodes; a
// masked last block alone), and each span's 16 group scales are read once per row and segment
// (LegacySpanScales, +0 past the row's last block, as a masked read of the unpacked form gives),
// a chunk's permuted from them (Q8_0: a chunk's two d read per chunk). Same values as
// UnpackBlocks, so the same bits as the other sources.
template <int NR, typename Block>
struct LegacySource {
  LegacySource(const RawRows& raw_rows, int64_t first_row) : raw(raw_rows), r0(first_row) {}

  static constexpr int64_t kSpan = 256;
  static constexpr int kPerSegment = static_cast<int>(kSegment / kSpan);
  // Q8_0's eight d per span are word inserts (LegacySpanScales), no cheaper than its two per
  // chunk: measured slower that way (two tokens, 1 GiB: 41.3 -> 43.8 ms). It keeps reading them
  // per chunk.
  static constexpr bool kSpanScales = !std::is_same_v<Block, BlockQ8_0>;
  const RawRows& raw;
  int64_t r0;
  const Block* blocks[NR];              // the current segment's first block per row
  __m512 span_scales[NR][kPerSegment];  // [row][span of the segment]

  void Prepare(int64_t /*c*/, int64_t /*n*/, int /*slot*/) {}
  void Use(int64_t c, int64_t n, int /*slot*/) {
    PointAtSegment<kQk>(raw, r0, c, n, blocks);
    if constexpr (!kSpanScales) return;
    for (int s = 0; s < kPerSegment && s * kSpan < n; ++s) {
      const int span_blocks = static_cast<int>(std::min(kSpan, n - s * kSpan) / kQk);
      for (int r = 0; r < NR; ++r) {
        span_scales[r][s] = LegacySpanScales(blocks[r] + s * (kSpan / kQk), span_blocks);
      }
    }
  }
  __m512i Codes(int r, int64_t offset, __mmask64 mask) const {
    const Block* first = blocks[r] + offset / kQk;
    if (mask != ~__mmask64{0}) {
      return _mm512_zextsi256_si512(LegacyBlockCodes(first[0]));  // last block
    }
    return LegacyPairCodes(first);
  }
  __m512 Scales(int r, int64_t offset, __mmask8 mask) const {
    if constexpr (!kSpanScales) {
      // [d0 d1] (d1 = +0 past a masked last block) spread to lanes [d0 x8, d1 x8].
      const Block* first = blocks[r] + offset / kQk;
      __m128i bits = _mm_cvtsi32_si128(first[0].d);
      if (mask == 0xF) bits = _mm_insert_epi16(bits, first[1].d, 1);
      const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
      return _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(_mm_cvtph_ps(bits)));
    }
    // Chunk q of a span covers its groups 4q .. 4q + 3 (blocks 2q and 2q + 1).
    const int quarter = static_cast<int>((offset % kSpan) / 64);
    return _mm512_permutexvar_ps(ChunkGroupLanes(quarter), span_scales[r][offset / kSpan]);
  }
  const float* Mins(int /*r*/) const { return nullptr; }  // no mins
};

// Q6_K, like KQuantSource: the 6-bit codes of a chunk are assembled in registers from ql and qh;
// the group scales are d * scales[i]. Same values as UnpackBlocks.
template <int NR>
struct Q6KSource : SuperBlockSource<NR, BlockQ6_K, Q6KSource<NR>> {
  using SuperBlockSource<NR, BlockQ6_K, Q6KSource<NR>>::SuperBlockSource;

  __m512 GroupScales(const BlockQ6_K& block, int /*r*/, int64_t /*column*/) {
    const __m512 sc = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales))));
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(block.d)), sc);
  }
  __m512i Codes(int r, int64_t offset, __mmask64 /*mask: Q6_K rows are whole chunks*/) const {
    // A chunk is quarters (0, 1) or (2, 3) of one half: low or high nibbles of ql[0..31] and
    // ql[32..63], with bit pairs (0, 2) or (4, 6) of qh[0..31].
    const BlockQ6_K& block = this->blocks[r][offset / kQkK];
    const int within = static_cast<int>(offset % kQkK);
    const int half = within / 128;
    const bool high_nibbles = within % 128 >= 64;
    const __m512i low = _mm512_loadu_si512(block.ql + 64 * half);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh + 32 * half));
    const __m512i high =
        _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    if (high_nibbles) {
      return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low, 4), nibble),
                             _mm512_and_si512(high, bits45));
    }
    return _mm512_or_si512(_mm512_and_si512(low, nibble),
                           _mm512_and_si512(_mm512_slli_epi16(high, 4), bits45));
  }
  const float* Mins(int /*r*/) const { return nullptr; }  // Q6_K has no mins
};

// One chunk of 64 codes (or the masked last 32) at column c for every output of the tile;
// `offset` is c within the source's current segment. chains[t]: token t's chains in the four-row
// layout (GroupSumsOfRows).
template <int MT, int NR, bool kZeroPoint, typename Source>
inline void QuantChunk(const QuantizedRows& x, int64_t t0, const Source& w, int64_t c,
                       int64_t offset, __mmask64 code_mask, __mmask8 scale_mask, __m512i zero_bytes,
                       __m512 (&chains)[MT]) {
  const int64_t cols = x.cols;
  const int64_t groups = cols / 16;
  __m512i wv[NR];
  __m512 ws[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                  _mm512_setzero_ps()};
  for (int r = 0; r < NR; ++r) {
    wv[r] = w.Codes(r, offset, code_mask);
    ws[r] = w.Scales(r, offset, scale_mask);
  }
  const __m512 w_scales = FourRowLanes(ws[0], ws[1], ws[2], ws[3]);
  const bool whole = scale_mask == 0xF;
  for (int t = 0; t < MT; ++t) {
    const __m512i xv = _mm512_maskz_loadu_epi8(code_mask, x.q + (t0 + t) * cols + c);
    const __m512 xd =
        ExpandGroupScales(_mm_maskz_loadu_ps(scale_mask, x.d + (t0 + t) * groups + c / 16));
    // sum (w - z) * x = sum w * x - z * sum x: start each lane at -z * (its 4 x's).
    __m512i start = _mm512_setzero_si512();
    if constexpr (kZeroPoint) {
      start = _mm512_sub_epi32(start, _mm512_dpbusd_epi32(_mm512_setzero_si512(), zero_bytes, xv));
    }
    __m512i isum[4];
    for (int r = 0; r < 4; ++r) {
      isum[r] =
          r < NR ? _mm512_dpbusd_epi32(start, wv[r < NR ? r : 0], xv) : _mm512_setzero_si512();
    }
    const __m512 sums = _mm512_cvtepi32_ps(GroupSumsOfRows(isum[0], isum[1], isum[2], isum[3]));
    const __m512 scales = _mm512_mul_ps(w_scales, xd);
    // A lone last block has groups 0 and 1 only: lanes 0-7.
    chains[t] = whole ? _mm512_fmadd_ps(sums, scales, chains[t])
                      : _mm512_mask3_fmadd_ps(sums, scales, chains[t], 0x00FF);
  }
}

template <int MT, int NR, bool kZeroPoint, typename Source>
void QuantTileCore(const QuantizedRows& x, int64_t t0, Source& w, bool has_min, int zero_point,
                   float* y, int64_t y_stride) {
  const int64_t cols = x.cols;
  const __m512i zero_bytes = _mm512_set1_epi8(static_cast<char>(zero_point));
  __m512 chains[MT];
  for (int t = 0; t < MT; ++t) chains[t] = _mm512_setzero_ps();
  w.Prepare(0, std::min(kSegment, cols), 0);
  for (int64_t segment = 0, slot = 0; segment < cols; segment += kSegment, slot ^= 1) {
    const int64_t n = std::min(kSegment, cols - segment);
    const int64_t next = segment + kSegment;
    if (next < cols) w.Prepare(next, std::min(kSegment, cols - next), static_cast<int>(slot ^ 1));
    w.Use(segment, n, static_cast<int>(slot));
    int64_t offset = 0;
    for (; offset + 64 <= n; offset += 64) {
      QuantChunk<MT, NR, kZeroPoint>(x, t0, w, segment + offset, offset, ~__mmask64{0}, 0xF,
                                     zero_bytes, chains);
    }
    if (offset < n) {  // one block of 32 left (the row's last)
      QuantChunk<MT, NR, kZeroPoint>(x, t0, w, segment + offset, offset, 0xFFFFFFFFull, 0x3,
                                     zero_bytes, chains);
    }
  }
  float sums[MT][NR];
  for (int t = 0; t < MT; ++t) {
    alignas(16) float totals[4];
    _mm_store_ps(totals, ChainTotalsOfRows(chains[t]));
    for (int r = 0; r < NR; ++r) sums[t][r] = totals[r];
  }
  if (has_min) {
    const int64_t blocks = cols / 32;
    for (int t = 0; t < MT; ++t) {
      const float* xs = x.sum + (t0 + t) * blocks;
      for (int r = 0; r < NR; ++r) {
        sums[t][r] += MinsDot(w.Mins(r), xs, blocks);
      }
    }
  }
  for (int t = 0; t < MT; ++t) {
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = sums[t][r];
  }
}

template <int MT, int NR, bool kZeroPoint>
void QuantTileRawT(const QuantizedRows& x, int64_t t0, const RawRows& w, int64_t r0, float* y,
                   int64_t y_stride) {
  if (w.type == WeightType::kQ4_K) {
    KQuantSource<NR, BlockQ4_K> source(w, r0);
    QuantTileCore<MT, NR, kZeroPoint>(x, t0, source, w.has_min, w.zero_point, y, y_stride);
    return;
  }
  if (w.type == WeightType::kQ5_K) {
    KQuantSource<NR, BlockQ5_K> source(w, r0);
    QuantTileCore<MT, NR, kZeroPoint>(x, t0, source, w.has_min, w.zero_point, y, y_stride);
    return;
  }
  if (w.type == WeightType::kQ6_K) {
    Q6KSource<NR> source(w, r0);
    QuantTileCore<MT, NR, kZeroPoint>(x, t0, source, w.has_min, w.zero_point, y, y_stride);
    return;
  }
  if (w.type == WeightType::kQ4_0) {
    LegacySource<NR, BlockQ4_0> source(w, r0);
    QuantTileCore<MT, NR, kZeroPoint>(x, t0, source, w.has_min, w.zero_point, y, y_stride);
    return;
  }
  if (w.type == WeightType::kQ8_0) {
    LegacySource<NR, BlockQ8_0> source(w, r0);
    QuantTileCore<MT, NR, kZeroPoint>(x, t0, source, w.has_min, w.zero_point, y, y_stride);
    return;
  }
  if (w.type == WeightType::kQ5_0) {
    LegacySource<NR, BlockQ5_0> source(w, r0);
    QuantTileCore<MT, NR, kZeroPoint>(x, t0, source, w.has_min, w.zero_point, y, y_stride);
    return;
  }
  RawSource<NR> source(w, r0);
  QuantTileCore<MT, NR, kZeroPoint>(x, t0, source, w.has_min, w.zero_point, y, y_stride);
}

constexpr int kQuantTokenTile = 4;
constexpr int kQuantRowTile = 4;

template <int MT, bool kZeroPoint, int... NRs>
constexpr auto QuantRowVariants(std::integer_sequence<int, NRs...>) {
  return std::array<QuantTileRawFn, sizeof...(NRs)>{&QuantTileRawT<MT, NRs + 1, kZeroPoint>...};
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

void QuantTileRaw(const QuantizedRows& x, int64_t t0, int mt, const RawRows& w, int64_t r0, int nr,
                  float* y, int64_t y_stride) {
  if (mt == 1) {
    static const NibbleSplit split = BestNibbleSplit();  // the CPU's, found once
    const QuantTileRawFn decode = DecodeTileAvx512(w.type, nr, split);
    if (decode != nullptr) return decode(x, t0, w, r0, y, y_stride);
  }
  const auto& variants = w.zero_point != 0 ? kQuantWithZero : kQuantWithoutZero;
  variants[mt - 1][nr - 1](x, t0, w, r0, y, y_stride);
}

// Widening streams weights from memory once (decode); ask for them this far ahead.
constexpr int kPrefetchBytes = 2048;

void Widen(WeightType type, const void* src, int64_t n, float* dst) {
  const uint16_t* bits = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  if (type == WeightType::kF16) {
    for (; i + 16 <= n; i += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(bits + i) + kPrefetchBytes, _MM_HINT_T0);
      _mm512_storeu_ps(
          dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + i))));
    }
    for (; i < n; ++i) dst[i] = HalfToFloat(bits[i]);
  } else {
    for (; i + 16 <= n; i += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(bits + i) + kPrefetchBytes, _MM_HINT_T0);
      const __m512i wide =
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + i)));
      _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
    }
    for (; i < n; ++i) dst[i] = Bfloat16ToFloat(bits[i]);
  }
}

}  // namespace

void QuantizeActivationRowAvx512(const float* x, int64_t cols, int8_t* q, float* d, float* sum) {
  // QuantizeActivationRow's steps on 16 lanes: the max of |x| (exact in any order), the same
  // scalar scale and inverse, then (x * inverse + magic) - magic as two separate roundings (no
  // fused multiply-add: -ffp-contract=off), so every q, d and sum is the portable one's.
  constexpr float kRoundingMagic = 12582912.0f;
  const __m512 magic = _mm512_set1_ps(kRoundingMagic);
  const __m512 magnitude = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  for (int64_t b = 0; b < cols / 32; ++b) {
    const __m512 lo = _mm512_loadu_ps(x + b * 32);
    const __m512 hi = _mm512_loadu_ps(x + b * 32 + 16);
    const float amax = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_and_ps(lo, magnitude), _mm512_and_ps(hi, magnitude)));
    const float scale = amax / 127.0f;
    const __m512 inverse = _mm512_set1_ps(amax > 1e-30f ? 127.0f / amax : 0.0f);
    const __m512i qlo =
        _mm512_cvtps_epi32(_mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(lo, inverse), magic), magic));
    const __m512i qhi =
        _mm512_cvtps_epi32(_mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(hi, inverse), magic), magic));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32), _mm512_cvtepi32_epi8(qlo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32 + 16), _mm512_cvtepi32_epi8(qhi));
    const int32_t total = _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
    d[2 * b] = d[2 * b + 1] = scale;
    sum[b] = scale * static_cast<float>(total);
  }
}

const TargetKernels& Avx512Kernels() {
  static const TargetKernels kernels = {
      .float_token_tile = kFloatTokenTile,
      .float_row_tile = kFloatRowTile,
      .quant_token_tile = kQuantTokenTile,
      .quant_row_tile = kQuantRowTile,
      .float_tile = FloatTile,
      .float_span_tile = FloatSpanTile,
      .quant_tile_raw = QuantTileRaw,
      .interleaved_block_bytes = InterleavedBlockBytesAvx512,
      .interleave = InterleaveRowsAvx512,
      .interleaved_tile = InterleavedTileAvx512,
      .interleaves_weights = InterleavesWeightsAvx512,
      .interleave_weights = InterleaveWeightsAvx512,
      .widen = Widen,
      .negated_group_sums_row = NegatedGroupSumsRowAvx512,
      .quantize_row = QuantizeActivationRowAvx512,
      .unpack = UnpackBlocksAvx2,
      .group_layout = WeightLayout::kRowGroups,
      .has_row_group_tile = HasRowGroupTileAvx512,
      .row_group_tile = RowGroupTileAvx512,
      .has_row_group_pair_tile = HasRowGroupPairTileAvx512,
      .row_group_pair_tile = RowGroupPairTileAvx512,
      .ungroup_rows = UngroupRowsAvx512,
      .float_group_tile = FloatGroupTileAvx512,
      .widen_group = WidenGroupAvx512,
      .float_group_pair_tile = FloatGroupPairTileAvx512,
  };
  return kernels;
}

}  // namespace reprise::kernels
