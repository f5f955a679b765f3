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
// back, from a vector kept beside the codes. Types with mins (Q4_1, Q5_1, Q4_K, Q5_K) have no
// zero point and codes from 0 up, so their codes take the unsigned side and the activations go
// in as they are: no bias and no correction to load, one load in six fewer per dot product step
// (Q4_K and Q5_K prefill 6-9% faster, Zen 5). The integer sums are exact either way, so the bits
// are those of the row-major tiles.
//
// Q8_0 rows as stored and Q8_0/Q4_K/Q5_K/Q6_K row groups are rearranged straight from the matrix
// (InterleaveWeightsAvx512); other types from an unpacked panel. For types with mins a block
// ends with its rows' mins transposed, so that the tile makes MinsDot for its 16 rows at once.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "kernels/k_group_avx512.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_reads_avx512.h"
#include "kernels/row_groups.h"
#include "kernels/unpacked.h"

namespace reprise::kernels {

namespace {

constexpr int kQuads = kInterleavedRows / 4;
// One quad's chunk: four code vectors (offsets e = 0 .. 3), its 16 group scales and its 16
// corrections, in the four-row layout.
constexpr int64_t kCodeBytes = 4 * 64;
constexpr int64_t kQuadChunkBytes = kCodeBytes + 64 + 64;

int64_t Chunks(int64_t cols) { return (cols + 63) / 64; }

// After a block's chunks, for types with mins: the mins of its rows per sub-block of 32 columns,
// transposed (sub-block s: 16 floats, row r's in lane r; +0 past the rows), so that one fused
// multiply-add per sub-block and token serves all 16 rows.
int64_t MinsOffset(int64_t cols) { return Chunks(cols) * kQuads * kQuadChunkBytes; }

// One chunk of 64 columns (kWhole) or the row's lone last block of 32, for MT tokens and the
// block's four quads.
template <int MT, bool kWhole, bool kUnsignedCodes>
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
    // The token's bytes (biased to unsigned unless the codes are), and at offset 4 e of every
    // group in all of the group's lanes (lanes past a lone last block meet zero codes).
    const __m512i own = _mm512_maskz_loadu_epi8(code_mask, x.q + (t0 + t) * cols + c);
    const __m512i xb = kUnsignedCodes ? own : _mm512_xor_si512(own, bias);
    const __m512i xe[4] = {
        _mm512_shuffle_epi32(xb, _MM_PERM_AAAA), _mm512_shuffle_epi32(xb, _MM_PERM_BBBB),
        _mm512_shuffle_epi32(xb, _MM_PERM_CCCC), _mm512_shuffle_epi32(xb, _MM_PERM_DDDD)};
    const __m512 xd =
        ExpandGroupScales(_mm_maskz_loadu_ps(scale_mask, x.d + (t0 + t) * groups + c / 16));
#pragma GCC unroll 4
    for (int quad = 0; quad < kQuads; ++quad) {
      const uint8_t* q = chunk + quad * kQuadChunkBytes;
      // Unsigned codes take the dot product's unsigned side; signed ones the signed side, their
      // sums starting from the stored correction.
      __m512i isum =
          kUnsignedCodes ? _mm512_setzero_si512() : _mm512_load_si512(q + kCodeBytes + 64);
#pragma GCC unroll 4
      for (int e = 0; e < 4; ++e) {
        const __m512i codes = _mm512_load_si512(q + 64 * e);
        isum = kUnsignedCodes ? _mm512_dpbusd_epi32(isum, codes, xe[e])
                              : _mm512_dpbusd_epi32(isum, xe[e], codes);
      }
      const __m512 sums = _mm512_cvtepi32_ps(isum);
      const __m512 scales = _mm512_mul_ps(_mm512_load_ps(q + kCodeBytes), xd);
      // A lone last block has groups 0 and 1 only: lanes 0-7.
      chains[t][quad] = kWhole ? _mm512_fmadd_ps(sums, scales, chains[t][quad])
                               : _mm512_mask3_fmadd_ps(sums, scales, chains[t][quad], 0x00FF);
    }
  }
}

template <int MT, bool kMins>
void InterleavedTileT(const QuantizedRows& x, int64_t t0, const uint8_t* block, int nr, float* y,
                      int64_t y_stride) {
  const int64_t cols = x.cols;
  __m512 chains[MT][kQuads];
  for (int t = 0; t < MT; ++t) {
    for (int quad = 0; quad < kQuads; ++quad) chains[t][quad] = _mm512_setzero_ps();
  }
  const int64_t whole_chunks = cols / 64;
  for (int64_t k = 0; k < whole_chunks; ++k) {
    InterleavedChunk<MT, true, kMins>(x, t0, k, block + k * kQuads * kQuadChunkBytes, chains);
  }
  if (cols % 64 != 0) {
    InterleavedChunk<MT, false, kMins>(x, t0, whole_chunks,
                                       block + whole_chunks * kQuads * kQuadChunkBytes, chains);
  }
  // Every token's and quad's totals, rows past nr too, first: chains indexed only by constants
  // stay in registers through the chunk loop (indexed under runtime bounds, GCC kept them in
  // memory there).
  alignas(64) float totals[MT][kInterleavedRows];
#pragma GCC unroll 4
  for (int t = 0; t < MT; ++t) {
#pragma GCC unroll 4
    for (int quad = 0; quad < kQuads; ++quad) {
      _mm_store_ps(&totals[t][4 * quad], ChainTotalsOfRows(chains[t][quad]));
    }
  }
  const int64_t blocks = cols / 32;
  for (int t = 0; t < MT; ++t) {
    // MinsDot for the 16 rows at once, row r in lane r: sums[l] holds its lane l, the fused
    // multiply-adds of sub-blocks l, l + 16, ... in order, finished by MinsDotOfRows; the same
    // operations per row, so the same bits.
    __m512 mins_dots = _mm512_setzero_ps();
    if constexpr (kMins) {
      const auto* row_mins = reinterpret_cast<const float*>(block + MinsOffset(cols));
      const float* xs = x.sum + (t0 + t) * blocks;
      __m512 sums[16];
      for (__m512& sum : sums) sum = _mm512_setzero_ps();
      int64_t s = 0;
      for (; s + 16 <= blocks; s += 16) {
        for (int l = 0; l < 16; ++l) {
          sums[l] = _mm512_fmadd_ps(_mm512_load_ps(row_mins + 16 * (s + l)),
                                    _mm512_set1_ps(xs[s + l]), sums[l]);
        }
      }
      for (int l = 0; s + l < blocks; ++l) {
        sums[l] = _mm512_fmadd_ps(_mm512_load_ps(row_mins + 16 * (s + l)),
                                  _mm512_set1_ps(xs[s + l]), sums[l]);
      }
      mins_dots = MinsDotOfRows(sums, blocks);
    }
    alignas(64) float mins_dot[16];
    _mm512_store_ps(mins_dot, mins_dots);
    for (int row = 0; row < nr; ++row) {
      y[t * y_stride + row] = kMins ? totals[t][row] + mins_dot[row] : totals[t][row];
    }
  }
}

using InterleavedTileFn = void (*)(const QuantizedRows&, int64_t, const uint8_t*, int, float*,
                                   int64_t);

template <bool kMins, int... MTs>
constexpr auto InterleavedVariants(std::integer_sequence<int, MTs...>) {
  return std::array<InterleavedTileFn, sizeof...(MTs)>{&InterleavedTileT<MTs + 1, kMins>...};
}

}  // namespace

size_t InterleavedBlockBytesAvx512(int64_t cols) {
  return static_cast<size_t>(MinsOffset(cols) + cols / kMinGroup * 16 * sizeof(float));
}

namespace {

// Writes one quad's chunk from its codes, already in the four-row layout (codes[e] lane 4 j + r:
// row r's dword e of group j, signed), and its group scales (lane 4 j + r: row r's of group j);
// its corrections only where the tile reads them (types without mins; zeros for the others, so
// that a block's bytes are all written).
inline void StoreQuadChunk(const __m512i (&codes)[4], __m512 scales, bool corrections,
                           uint8_t* dst) {
  for (int e = 0; e < 4; ++e) _mm512_store_si512(dst + 64 * e, codes[e]);
  _mm512_store_ps(reinterpret_cast<float*>(dst + kCodeBytes), scales);
  if (!corrections) {
    _mm512_store_si512(dst + kCodeBytes + 64, _mm512_setzero_si512());
    return;
  }
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i biased_sums = _mm512_setzero_si512();  // 128 * sum of each group's signed codes
  for (int e = 0; e < 4; ++e) biased_sums = _mm512_dpbusd_epi32(biased_sums, bias, codes[e]);
  _mm512_store_si512(dst + kCodeBytes + 64, _mm512_sub_epi32(_mm512_setzero_si512(), biased_sums));
}

// The codes of a quad's chunk in the four-row layout from its four rows' 64 signed codes each
// (rows[r]: +0 past the rows and past the row's end): a 4 x 4 transpose of dwords within each
// 128-bit lane (a group), lane 4 j + r of codes[e] being row r's dword e of group j.
inline void QuadCodesOfRows(const __m512i (&rows)[4], __m512i (&codes)[4]) {
  const __m512i t0 = _mm512_unpacklo_epi32(rows[0], rows[1]);
  const __m512i t1 = _mm512_unpackhi_epi32(rows[0], rows[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(rows[2], rows[3]);
  const __m512i t3 = _mm512_unpackhi_epi32(rows[2], rows[3]);
  codes[0] = _mm512_unpacklo_epi64(t0, t2);
  codes[1] = _mm512_unpackhi_epi64(t0, t2);
  codes[2] = _mm512_unpacklo_epi64(t1, t3);
  codes[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Lane r: r * stride, the offsets of 16 rows stride elements apart for a gather.
inline __m512i LaneMultiples(int stride) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(stride));
}

// A Q8_0 chunk's scales for quad `quad` (rows 4 quad .. 4 quad + 3), from its two blocks' scales
// of 16 rows (row r in lane r): groups 0 and 1 take the first block's, 2 and 3 the second's, so
// lane 4 j + r is row 4 quad + r's of the one or the other.
inline __m512 Q8_0QuadScales(__m512 first, __m512 second, int quad) {
  const __m512i lanes =
      _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 16, 17, 18, 19, 16, 17, 18, 19),
                       _mm512_set1_epi32(4 * quad));
  return _mm512_permutex2var_ps(first, lanes, second);
}

// How far ahead along its row InterleaveQ8_0Rows asks for a row's bytes.
constexpr int kStoredPrefetchBytes = 1024;

// Stored Q8_0 rows: a block's codes are already the signed codes and its scale serves both of its
// groups of 16, so a chunk of 64 columns is two blocks (the row's lone last block: one, then
// zeros).
void InterleaveQ8_0Rows(const uint8_t* rows, size_t row_bytes, int64_t cols, int nr, uint8_t* out) {
  // Where each of the 16 rows starts (rows past nr: not read, masked off).
  const __m512i row_offsets = LaneMultiples(static_cast<int>(row_bytes));
  const __mmask16 live = static_cast<__mmask16>((1u << nr) - 1);
  for (int64_t k = 0; k < Chunks(cols); ++k) {
    const bool whole = 64 * k + 64 <= cols;
    // The chunk's two block scales of all 16 rows at once (each f16 read as the low half of a
    // 32-bit lane), row r in lane r; a lone last block's second scale 0.
    const uint8_t* chunk = rows + 2 * k * static_cast<int64_t>(sizeof(BlockQ8_0));
    const auto halves = [&](const uint8_t* at, __mmask16 mask) {
      const __m512i words =
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, row_offsets, at, 1);
      return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
    };
    const __m512 first_scales = halves(chunk, live);
    const __m512 second_scales = halves(chunk + sizeof(BlockQ8_0), whole ? live : 0);
    for (int quad = 0; quad < kQuads; ++quad) {
      __m512i row_codes[4];
      for (int r = 0; r < 4; ++r) {
        const int row = 4 * quad + r;
        if (row >= nr) {
          row_codes[r] = _mm512_setzero_si512();
          continue;
        }
        const auto* blocks = reinterpret_cast<const BlockQ8_0*>(rows + row * row_bytes) + 2 * k;
        // Sixteen rows are read side by side, more streams than the hardware prefetcher
        // follows in time: ask for each row's bytes a few chunks ahead.
        const char* ahead = reinterpret_cast<const char*>(blocks) + kStoredPrefetchBytes;
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 64, _MM_HINT_T0);
        _mm_prefetch(ahead + 128, _MM_HINT_T0);
        const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[0].qs));
        const __m256i second =
            whole ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[1].qs))
                  : _mm256_setzero_si256();
        row_codes[r] = _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1);
      }
      __m512i codes[4];
      QuadCodesOfRows(row_codes, codes);
      StoreQuadChunk(codes, Q8_0QuadScales(first_scales, second_scales, quad), true,
                     out + (k * kQuads + quad) * kQuadChunkBytes);
    }
  }
}

// The codes of quad kQuad's chunk from its 16 rows' codes of a K-quant chunk: low[u] and high[u]
// hold the codes of the low and high nibbles of code word u (row r's in dword r). Group 0 is the
// low codes of words 0-3, group 1 of words 4-7, groups 2 and 3 the high codes of the same words.
template <int kQuad>
inline void KQuadCodes(const __m512i (&low)[8], const __m512i (&high)[8], __m512i (&codes)[4]) {
  constexpr int kLanes = _MM_SHUFFLE(kQuad, kQuad, kQuad, kQuad);
  for (int e = 0; e < 4; ++e) {
    // [low e, low e, low e + 4, low e + 4] of the quad's rows, the same of high, then taken in
    // the order of groups 0 .. 3.
    const __m512i lows = _mm512_shuffle_i64x2(low[e], low[e + 4], kLanes);
    const __m512i highs = _mm512_shuffle_i64x2(high[e], high[e + 4], kLanes);
    codes[e] = _mm512_shuffle_i64x2(lows, highs, _MM_SHUFFLE(2, 0, 2, 0));
  }
}

// A chunk's four quads (KQuadCodes of `low` and `high`), quad q with quad_scales(q) (q as an
// integral constant), stored from dst on.
template <bool kCorrections, typename QuadScales>
inline void StoreQuadChunks(const __m512i (&low)[8], const __m512i (&high)[8],
                            const QuadScales& quad_scales, uint8_t* dst) {
  __m512i codes[4];
  KQuadCodes<0>(low, high, codes);
  StoreQuadChunk(codes, quad_scales(std::integral_constant<int, 0>{}), kCorrections, dst);
  KQuadCodes<1>(low, high, codes);
  StoreQuadChunk(codes, quad_scales(std::integral_constant<int, 1>{}), kCorrections,
                 dst + kQuadChunkBytes);
  KQuadCodes<2>(low, high, codes);
  StoreQuadChunk(codes, quad_scales(std::integral_constant<int, 2>{}), kCorrections,
                 dst + 2 * kQuadChunkBytes);
  KQuadCodes<3>(low, high, codes);
  StoreQuadChunk(codes, quad_scales(std::integral_constant<int, 3>{}), kCorrections,
                 dst + 3 * kQuadChunkBytes);
}

// A group of 16 Q4_K or Q5_K rows in the row-group layout (row_groups.h: per block, word i of the
// 16 rows at 64 i, row r's at 4 r; words 0: d and dmin, 1-3: the packed scales and mins, then
// Q5_K's fifth-bit masks, then the code words). Codes, scales and mins come out as UnpackBlocks
// gives them: nibble + 16 * fifth bit, d * sc and -(dmin * m), in f32.
template <typename Block>
void InterleaveKGroup(const uint8_t* group, int64_t cols, uint8_t* out) {
  auto* mins = reinterpret_cast<float*>(out + MinsOffset(cols));
  constexpr bool kFifthBits = std::is_same_v<Block, BlockQ5_K>;
  constexpr int64_t kBlockBytes = kRowGroupRows * static_cast<int64_t>(sizeof(Block));
  constexpr int kCodeWord = offsetof(Block, qs) / 4;
  static_assert(offsetof(Block, d) == 0 && offsetof(Block, scales) == 4 && kKScaleBytes == 12);
  const int64_t blocks = cols / kQkK;
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i fifth = _mm512_set1_epi8(0x10);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = group + b * kBlockBytes;
    const __m512i head = _mm512_loadu_si512(p);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
    const PackedScales packed = UnpackScaleBytes(
        _mm512_loadu_si512(p + 64), _mm512_loadu_si512(p + 128), _mm512_loadu_si512(p + 192));
    __m512 scales[8];  // [sub-block] lane r: row r's d * sc
    for (int j = 0; j < 8; ++j) {
      scales[j] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(ByteOfWords(packed.scales[j / 4], j % 4)));
      const __m512 offset =
          _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(ByteOfWords(packed.mins[j / 4], j % 4)));
      _mm512_store_ps(mins + 16 * (b * (kQkK / kMinGroup) + j),
                      _mm512_xor_ps(offset, _mm512_set1_ps(-0.0f)));
    }
    for (int kk = 0; kk < kQkK / 64; ++kk) {
      __m512i low[8], high[8];
      for (int u = 0; u < 8; ++u) {
        const __m512i v = _mm512_loadu_si512(p + 64 * (kCodeWord + 8 * kk + u));
        low[u] = _mm512_and_si512(v, nibble);
        high[u] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
        if constexpr (kFifthBits) {
          low[u] = _mm512_mask_add_epi8(low[u], FifthBits(p, kk, u, 0), low[u], fifth);
          high[u] = _mm512_mask_add_epi8(high[u], FifthBits(p, kk, u, 1), high[u], fifth);
        }
      }
      // Groups 0-1 are sub-block 2 kk, groups 2-3 sub-block 2 kk + 1.
      const __m512 a = scales[2 * kk], c = scales[2 * kk + 1];
      uint8_t* dst = out + ((b * (kQkK / 64) + kk) * kQuads) * kQuadChunkBytes;
      StoreQuadChunks</*kCorrections=*/false>(
          low, high,
          [&](auto quad) {
            constexpr int q = decltype(quad)::value;
            return _mm512_shuffle_f32x4(a, c, _MM_SHUFFLE(q, q, q, q));
          },
          dst);
    }
  }
}

// A group of 16 Q8_0 rows in the row-group layout (row_groups.h: per block, code word u of the
// 16 rows at 64 u, row r's at 4 r, then their 16 scales): a chunk's groups are words 0-3 and 4-7
// of its first block, then of its second, which is KQuadCodes' order with the blocks in place of
// the nibbles. A lone last block: the second block's codes and scales +0.
void InterleaveQ8_0Group(const uint8_t* group, int64_t cols, uint8_t* out) {
  constexpr int64_t kBlockBytes = kRowGroupRows * static_cast<int64_t>(sizeof(BlockQ8_0));
  constexpr int64_t kScalesAt = kRowGroupRows * static_cast<int64_t>(sizeof(BlockQ8_0::qs));
  const int64_t blocks = cols / kQk;
  const auto scales_of = [&](int64_t b) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + b * kBlockBytes + kScalesAt)));
  };
  for (int64_t k = 0; k < Chunks(cols); ++k) {
    const bool whole = 2 * k + 1 < blocks;
    __m512i first[8], second[8];
    for (int u = 0; u < 8; ++u) {
      first[u] = _mm512_loadu_si512(group + 2 * k * kBlockBytes + 64 * u);
      second[u] = whole ? _mm512_loadu_si512(group + (2 * k + 1) * kBlockBytes + 64 * u)
                        : _mm512_setzero_si512();
    }
    const __m512 first_scales = scales_of(2 * k);
    const __m512 second_scales = whole ? scales_of(2 * k + 1) : _mm512_setzero_ps();
    uint8_t* dst = out + k * kQuads * kQuadChunkBytes;
    StoreQuadChunks</*kCorrections=*/true>(
        first, second, [&](auto quad) { return Q8_0QuadScales(first_scales, second_scales, quad); },
        dst);
  }
}

// A group of 16 Q6_K rows in the row-group layout (Q6KGroupCodes). Chunk kk (half n = kk / 2)
// holds groups 8 n + 2 k + h for k = 2 (kk % 2) + j / 2, h = j % 2: their codes as the row-group
// tile assembles them, less the zero point 32, and d * scale, as UnpackBlocks gives them.
void InterleaveQ6KGroup(const uint8_t* group, int64_t cols, uint8_t* out) {
  constexpr int64_t kBlockBytes = kRowGroupRows * static_cast<int64_t>(sizeof(BlockQ6_K));
  const __m512i zero_point = _mm512_set1_epi8(32);
  for (int64_t b = 0; b < cols / kQkK; ++b) {
    const uint8_t* p = group + b * kBlockBytes;
    const __m512 d = Q6KGroupD(p);
    for (int kk = 0; kk < kQkK / 64; ++kk) {
      const int n = kk / 2;
      // The chunk's group j, signed, in KQuadCodes' order (groups 0 and 1 as its low words 0-3
      // and 4-7, groups 2 and 3 as its high ones); scales[j]: its d * scale.
      __m512i low[8], high[8];
      __m512 scales[4];
      for (int j = 0; j < 4; ++j) {
        const int k = 2 * (kk % 2) + j / 2, h = j % 2;
        for (int e = 0; e < 4; ++e) {
          const __m512i codes = _mm512_sub_epi8(Q6KGroupCodes(p, n, k, h, e), zero_point);
          (j < 2 ? low : high)[4 * h + e] = codes;
        }
        scales[j] = Q6KGroupScale(p, d, 8 * n + 2 * k + h);
      }
      // Lane 4 j + r of a quad's scales: group j's of row 4 quad + r.
      const auto quad_scales = [&](auto quad) {
        constexpr int q = decltype(quad)::value;
        const __m512 first = _mm512_shuffle_f32x4(scales[0], scales[1], _MM_SHUFFLE(q, q, q, q));
        const __m512 second = _mm512_shuffle_f32x4(scales[2], scales[3], _MM_SHUFFLE(q, q, q, q));
        return _mm512_shuffle_f32x4(first, second, _MM_SHUFFLE(2, 0, 2, 0));
      };
      uint8_t* dst = out + ((b * (kQkK / 64) + kk) * kQuads) * kQuadChunkBytes;
      StoreQuadChunks</*kCorrections=*/true>(low, high, quad_scales, dst);
    }
  }
}

}  // namespace

void InterleaveRowsAvx512(const UnpackedRows& w, int64_t r0, int nr, uint8_t* out) {
  const int64_t cols = w.cols;
  const int64_t groups = cols / 16;
  const __m512i zero_bytes = _mm512_set1_epi8(static_cast<char>(w.zero_point));
  for (int64_t k = 0; k < Chunks(cols); ++k) {
    const int64_t c = 64 * k;
    const __mmask64 mask = c + 64 <= cols ? ~__mmask64{0} : __mmask64{0xFFFFFFFFull};
    const __mmask8 scale_mask = c + 64 <= cols ? 0xF : 0x3;
    for (int quad = 0; quad < kQuads; ++quad) {
      // Row r's chunk, lanes 4 j + e (e: the 4 codes at offset 4 e of group j), as signed codes,
      // and its four scales.
      __m512i rows[4];
      __m128 four[4];
      for (int r = 0; r < 4; ++r) {
        const int row = 4 * quad + r;
        rows[r] = row < nr ? _mm512_maskz_sub_epi8(
                                 mask, _mm512_maskz_loadu_epi8(mask, w.q + (r0 + row) * cols + c),
                                 zero_bytes)
                           : _mm512_setzero_si512();
        four[r] = row < nr ? _mm_maskz_loadu_ps(scale_mask, w.scale + (r0 + row) * groups + 4 * k)
                           : _mm_setzero_ps();
      }
      __m512i codes[4];
      QuadCodesOfRows(rows, codes);
      // Scales transposed so that 128-bit lane j holds group j's of rows 0 .. 3.
      _MM_TRANSPOSE4_PS(four[0], four[1], four[2], four[3]);
      __m512 scales = _mm512_castps128_ps512(four[0]);
      scales = _mm512_insertf32x4(scales, four[1], 1);
      scales = _mm512_insertf32x4(scales, four[2], 2);
      scales = _mm512_insertf32x4(scales, four[3], 3);
      StoreQuadChunk(codes, scales, w.min == nullptr, out + (k * kQuads + quad) * kQuadChunkBytes);
    }
  }
  if (w.min != nullptr) {
    // The rows' mins transposed after the chunks (MinsOffset), +0 past the rows.
    const int64_t sub_blocks = cols / kMinGroup;
    const __m512i rows = LaneMultiples(static_cast<int>(sub_blocks));
    const __mmask16 live = static_cast<__mmask16>((1u << nr) - 1);
    auto* mins = reinterpret_cast<float*>(out + MinsOffset(cols));
    for (int64_t s = 0; s < sub_blocks; ++s) {
      _mm512_store_ps(mins + 16 * s, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, rows,
                                                              w.min + r0 * sub_blocks + s, 4));
    }
  }
}

bool InterleavesWeightsAvx512(WeightType type, WeightLayout layout) {
  if (layout == WeightLayout::kRowMajor) return type == WeightType::kQ8_0;
  return layout == WeightLayout::kRowGroups &&
         (type == WeightType::kQ8_0 || type == WeightType::kQ4_K || type == WeightType::kQ5_K ||
          type == WeightType::kQ6_K);
}

void InterleaveWeightsAvx512(WeightType type, WeightLayout layout, const uint8_t* rows,
                             size_t row_bytes, int64_t cols, int nr, uint8_t* out) {
  REPRISE_CHECK(InterleavesWeightsAvx512(type, layout), "no direct interleaving for {}",
                WeightTypeName(type));
  if (layout == WeightLayout::kRowMajor) {
    InterleaveQ8_0Rows(rows, row_bytes, cols, nr, out);
  } else {
    REPRISE_CHECK(nr == kRowGroupRows, "a row group has {} rows, not {}", kRowGroupRows, nr);
    if (type == WeightType::kQ8_0) {
      InterleaveQ8_0Group(rows, cols, out);
    } else if (type == WeightType::kQ6_K) {
      InterleaveQ6KGroup(rows, cols, out);
    } else if (type == WeightType::kQ4_K) {
      InterleaveKGroup<BlockQ4_K>(rows, cols, out);
    } else {
      InterleaveKGroup<BlockQ5_K>(rows, cols, out);
    }
  }
}

void InterleavedTileAvx512(const QuantizedRows& x, int64_t t0, int mt, const uint8_t* block,
                           bool mins, int nr, float* y, int64_t y_stride) {
  using Tokens = std::make_integer_sequence<int, kInterleavedTokenTile>;
  static constexpr auto kWithMins = InterleavedVariants<true>(Tokens());
  static constexpr auto kWithoutMins = InterleavedVariants<false>(Tokens());
  const auto& variants = mins ? kWithMins : kWithoutMins;
  variants[mt - 1](x, t0, block, nr, y, y_stride);
}

}  // namespace reprise::kernels
