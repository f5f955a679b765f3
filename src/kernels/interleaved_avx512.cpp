// Prefill on AVX-512 over weight rows interleaved in fours: the quantized tiles' arithmetic (see
// quant_reads_avx512.h) with every group sum made by the dot products themselves.
//
// A row-major tile gets, per row and 64-column chunk, lanes that each sum 4 products, and must
// then add lanes into 16-group sums (shuffles and adds, about three operations per row and
// chunk). Here a panel of rows is rearranged once (InterleaveRowsAvx512) so that one 64-byte
// vector holds, in lane 4 j + r, the 4 codes at offset 4 e of group j of row r: four dot products
// with the token's bytes at offsets 4 e of each group give every lane its group's exact sum, in
// the four-row layout the chains already use. Per token and chunk of four rows that is four dot
// products, a conversion, a scale product and one fused multiply-add, where the row-major tile
// also spends a conversion, a permute and a fused multiply-add per row.
//
// The codes are stored signed, (q - zero point), and the activations are biased to unsigned
// (x + 128) for the u8 x s8 dot product; each group's 128 * sum(q - zero point) is subtracted
// back, from a vector kept beside the codes. The integer sums are exact either way, so the bits
// are those of the row-major tiles.
#include <algorithm>
#include <array>
#include <utility>

#include "kernels/matmul_kernels.h"
#include "kernels/quant_reads_avx512.h"

namespace reprise::kernels {

namespace {

constexpr int kQuads = kInterleavedRows / 4;
// One quad's chunk: four code vectors (offsets e = 0 .. 3), its 16 group scales and its 16
// corrections, in the four-row layout.
constexpr int64_t kCodeBytes = 4 * 64;
constexpr int64_t kQuadChunkBytes = kCodeBytes + 64 + 64;

int64_t Chunks(int64_t cols) { return (cols + 63) / 64; }

// One chunk of 64 columns (kWhole) or the row's lone last block of 32, for MT tokens and the
// block's four quads.
template <int MT, bool kWhole>
__attribute__((always_inline)) inline void InterleavedChunk(const QuantizedRows& x, int64_t t0,
                                                            int64_t k, const uint8_t* chunk,
                                                            __m512 (&chains)[MT][kQuads]) {
  const int64_t cols = x.cols;
  const int64_t groups = cols / 16;
  const int64_t c = 64 * k;
  const __mmask64 code_mask = kWhole ? ~__mmask64{0} : __mmask64{0xFFFFFFFFull};
  const __mmask8 scale_mask = kWhole ? 0xF : 0x3;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 4
  for (int t = 0; t < MT; ++t) {
    // The token's bytes biased to unsigned, and at offset 4 e of every group in all of the
    // group's lanes (lanes past a lone last block meet zero codes).
    const __m512i xb =
        _mm512_xor_si512(_mm512_maskz_loadu_epi8(code_mask, x.q + (t0 + t) * cols + c), bias);
    const __m512i x0 = _mm512_shuffle_epi32(xb, _MM_PERM_AAAA);
    const __m512i x1 = _mm512_shuffle_epi32(xb, _MM_PERM_BBBB);
    const __m512i x2 = _mm512_shuffle_epi32(xb, _MM_PERM_CCCC);
    const __m512i x3 = _mm512_shuffle_epi32(xb, _MM_PERM_DDDD);
    const __m512 xd =
        ExpandGroupScales(_mm_maskz_loadu_ps(scale_mask, x.d + (t0 + t) * groups + c / 16));
#pragma GCC unroll 4
    for (int quad = 0; quad < kQuads; ++quad) {
      const uint8_t* q = chunk + quad * kQuadChunkBytes;
      __m512i isum = _mm512_load_si512(q + kCodeBytes + 64);
      isum = _mm512_dpbusd_epi32(isum, x0, _mm512_load_si512(q));
      isum = _mm512_dpbusd_epi32(isum, x1, _mm512_load_si512(q + 64));
      isum = _mm512_dpbusd_epi32(isum, x2, _mm512_load_si512(q + 128));
      isum = _mm512_dpbusd_epi32(isum, x3, _mm512_load_si512(q + 192));
      const __m512 sums = _mm512_cvtepi32_ps(isum);
      const __m512 scales = _mm512_mul_ps(_mm512_load_ps(q + kCodeBytes), xd);
      // A lone last block has groups 0 and 1 only: lanes 0-7.
      chains[t][quad] = kWhole ? _mm512_fmadd_ps(sums, scales, chains[t][quad])
                               : _mm512_mask3_fmadd_ps(sums, scales, chains[t][quad], 0x00FF);
    }
  }
}

template <int MT, bool kMins>
void InterleavedTileT(const QuantizedRows& x, int64_t t0, const uint8_t* block, const float* mins,
                      int nr, float* y, int64_t y_stride) {
  const int64_t cols = x.cols;
  __m512 chains[MT][kQuads];
  for (int t = 0; t < MT; ++t) {
    for (int quad = 0; quad < kQuads; ++quad) chains[t][quad] = _mm512_setzero_ps();
  }
  const int64_t whole_chunks = cols / 64;
  for (int64_t k = 0; k < whole_chunks; ++k) {
    InterleavedChunk<MT, true>(x, t0, k, block + k * kQuads * kQuadChunkBytes, chains);
  }
  if (cols % 64 != 0) {
    InterleavedChunk<MT, false>(x, t0, whole_chunks,
                                block + whole_chunks * kQuads * kQuadChunkBytes, chains);
  }
  const int64_t blocks = cols / 32;
  for (int t = 0; t < MT; ++t) {
    for (int quad = 0; quad < kQuads && 4 * quad < nr; ++quad) {
      alignas(16) float totals[4];
      _mm_store_ps(totals, ChainTotalsOfRows(chains[t][quad]));
      for (int r = 0; r < 4 && 4 * quad + r < nr; ++r) {
        const int row = 4 * quad + r;
        if constexpr (kMins) {
          y[t * y_stride + row] =
              totals[r] + MinsDot(mins + row * blocks, x.sum + (t0 + t) * blocks, blocks);
        } else {
          y[t * y_stride + row] = totals[r];
        }
      }
    }
  }
}

using InterleavedTileFn = void (*)(const QuantizedRows&, int64_t, const uint8_t*, const float*, int,
                                   float*, int64_t);

template <bool kMins, int... MTs>
constexpr auto InterleavedVariants(std::integer_sequence<int, MTs...>) {
  return std::array<InterleavedTileFn, sizeof...(MTs)>{&InterleavedTileT<MTs + 1, kMins>...};
}

}  // namespace

size_t InterleavedBlockBytesAvx512(int64_t cols) {
  return static_cast<size_t>(Chunks(cols) * kQuads * kQuadChunkBytes);
}

void InterleaveRowsAvx512(const UnpackedRows& w, int64_t r0, int nr, uint8_t* out) {
  const int64_t cols = w.cols;
  const int64_t groups = cols / 16;
  const __m512i zero_bytes = _mm512_set1_epi8(static_cast<char>(w.zero_point));
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t k = 0; k < Chunks(cols); ++k) {
    const int64_t c = 64 * k;
    const __mmask64 mask = c + 64 <= cols ? ~__mmask64{0} : __mmask64{0xFFFFFFFFull};
    const __mmask8 scale_mask = c + 64 <= cols ? 0xF : 0x3;
    for (int quad = 0; quad < kQuads; ++quad) {
      uint8_t* dst = out + (k * kQuads + quad) * kQuadChunkBytes;
      // Row r's chunk, lanes 4 j + e (e: the 4 codes at offset 4 e of group j), as signed codes;
      // +0 past the rows and past the row's end.
      __m512i rows[4];
      for (int r = 0; r < 4; ++r) {
        const int row = 4 * quad + r;
        rows[r] = row < nr ? _mm512_maskz_sub_epi8(
                                 mask, _mm512_maskz_loadu_epi8(mask, w.q + (r0 + row) * cols + c),
                                 zero_bytes)
                           : _mm512_setzero_si512();
      }
      // A 4 x 4 transpose of dwords within each 128-bit lane (a group): lane 4 j + r of codes[e]
      // is row r's dword e of group j.
      const __m512i t0 = _mm512_unpacklo_epi32(rows[0], rows[1]);
      const __m512i t1 = _mm512_unpackhi_epi32(rows[0], rows[1]);
      const __m512i t2 = _mm512_unpacklo_epi32(rows[2], rows[3]);
      const __m512i t3 = _mm512_unpackhi_epi32(rows[2], rows[3]);
      const __m512i codes[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                                _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
      __m512i biased_sums = _mm512_setzero_si512();  // 128 * sum of each group's signed codes
      for (int e = 0; e < 4; ++e) {
        _mm512_store_si512(dst + 64 * e, codes[e]);
        biased_sums = _mm512_dpbusd_epi32(biased_sums, bias, codes[e]);
      }
      // Scales: row r's four of the chunk (+0 past the rows and the row's end), transposed so
      // that 128-bit lane j holds group j's of rows 0 .. 3.
      __m128 four[4];
      for (int r = 0; r < 4; ++r) {
        const int row = 4 * quad + r;
        four[r] = row < nr ? _mm_maskz_loadu_ps(scale_mask, w.scale + (r0 + row) * groups + 4 * k)
                           : _mm_setzero_ps();
      }
      _MM_TRANSPOSE4_PS(four[0], four[1], four[2], four[3]);
      __m512 scales = _mm512_castps128_ps512(four[0]);
      scales = _mm512_insertf32x4(scales, four[1], 1);
      scales = _mm512_insertf32x4(scales, four[2], 2);
      scales = _mm512_insertf32x4(scales, four[3], 3);
      _mm512_store_ps(reinterpret_cast<float*>(dst + kCodeBytes), scales);
      _mm512_store_si512(dst + kCodeBytes + 64,
                         _mm512_sub_epi32(_mm512_setzero_si512(), biased_sums));
    }
  }
}

void InterleavedTileAvx512(const QuantizedRows& x, int64_t t0, int mt, const uint8_t* block,
                           const float* mins, int nr, float* y, int64_t y_stride) {
  using Tokens = std::make_integer_sequence<int, kInterleavedTokenTile>;
  static constexpr auto kWithMins = InterleavedVariants<true>(Tokens());
  static constexpr auto kWithoutMins = InterleavedVariants<false>(Tokens());
  const auto& variants = mins != nullptr ? kWithMins : kWithoutMins;
  variants[mt - 1](x, t0, block, mins, nr, y, y_stride);
}

}  // namespace reprise::kernels
