// How the AVX-512 quantized tiles read weights in their stored blocks: shared by the general
// tiles (matmul_avx512.cpp) and the one-token decode tiles (decode_tiles_avx512.h). Include only
// from files compiled for AVX-512; internal to kernels/. Internal linkage: the files that include
// it are built with different instruction sets (decode_avx512_gfni.cpp adds GFNI), and a shared
// copy could hand one file's instructions to another's callers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/reduce_avx512.h"
#include "kernels/simd.h"

namespace reprise::kernels {
namespace {

// Asks for bytes [first_byte, first_byte + bytes) of matrix row `row` (nothing from
// raw.prefetch_end on): a decode tile reads its rows side by side, so "ahead" is the same stretch
// of later tiles' rows (RawRows::prefetch_rows), not further along the row being read. Into L2,
// not L1: prefetches from DRAM into L1 hold the L1 miss buffers that the tile's own loads then
// queue behind (T0 here made Q8_0 decode 1.5x slower).
inline void PrefetchRowStretch(const RawRows& raw, int64_t row, int64_t first_byte, int64_t bytes) {
  // A zero-trip loop rather than an early return: with the return, GCC 12 at -O3 emitted no
  // prefetch at all in the inlined tiles (checked with objdump).
  const int64_t n = row < raw.prefetch_end ? bytes : 0;
  const uint8_t* start = raw.data + static_cast<size_t>(row) * raw.row_bytes + first_byte;
  for (int64_t line = 0; line < n; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(start + line), _MM_HINT_T1);
  }
}

// PrefetchRowStretch for one row, its start and whether to ask at all found once per tile rather
// than per stretch (a multiply and compares per row and span of a one-token tile).
class RowAhead {
 public:
  RowAhead() = default;
  RowAhead(const RawRows& raw, int64_t row)
      : start_(raw.data + static_cast<size_t>(row) * raw.row_bytes),
        live_(row < raw.prefetch_end) {}
  void Ask(int64_t first_byte, int64_t bytes) const {
    const int64_t n = live_ ? bytes : 0;  // a zero-trip loop: see PrefetchRowStretch
    for (int64_t line = 0; line < n; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(start_ + first_byte + line), _MM_HINT_T1);
    }
  }

 private:
  const uint8_t* start_ = nullptr;
  bool live_ = false;
};

// The sub-block scales d * sc_j of the super-blocks of NR rows (1 to 4), two rows to a register
// (rows 2h and 2h + 1 in lanes 0-7 and 8-15 of scales[h]), and their mins -(dmin m_j) written to
// mins[r]: the products UnpackBlocks writes, so the same values. A row's 16-byte head (d, dmin and
// the 12 packed scale bytes, the first bytes of a Q4_K or Q5_K block) fills one 128-bit lane, and
// each step unpacks every row's scales together. Scalar unpacking was over half the instructions of
// a one-token Q4_K tile on an Intel core (about 57 of 89 per row and super-block).
template <int NR, typename Block>
inline void KSubBlockScalesOfRows(const Block* const (&blocks)[NR], __m512 (&scales)[(NR + 1) / 2],
                                  float* const (&mins)[NR]) {
  static_assert(NR >= 1 && NR <= 4);
  static_assert(offsetof(Block, d) == 0 && offsetof(Block, dmin) == 2 &&
                offsetof(Block, scales) == 4 && kKScaleBytes == 12);
  auto head = [&](int r) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(&blocks[r]->d));
  };
  // Dwords of lane r: e0 = d | dmin << 16, e1 = packed bytes 0-3 (a), e2 = 4-7 (b), e3 = 8-11 (c).
  __m512i heads = _mm512_zextsi128_si512(head(0));
  if constexpr (NR > 1) heads = _mm512_inserti32x4(heads, head(1), 1);
  if constexpr (NR > 2) heads = _mm512_inserti32x4(heads, head(2), 2);
  if constexpr (NR > 3) heads = _mm512_inserti32x4(heads, head(3), 3);
  // e1: scales 0-3 (a & 63), e2: mins 0-3 (b & 63).
  const __m512i low = _mm512_and_si512(heads, _mm512_set1_epi8(0x3F));
  // e1: scales 4-7 ((c & 15) | (a >> 6) << 4), e2: mins 4-7 ((c >> 4) | (b >> 6) << 4).
  const __m512i c =
      _mm512_srlv_epi32(_mm512_shuffle_epi32(heads, _MM_PERM_DDDD), _mm512_set4_epi32(0, 4, 0, 0));
  const __m512i high =
      _mm512_or_si512(_mm512_and_si512(c, _mm512_set1_epi8(0x0F)),
                      _mm512_and_si512(_mm512_srli_epi32(heads, 2), _mm512_set1_epi8(0x30)));
  // Qwords: the eight scale bytes of rows 0-3 (lane r's bytes 8-15 after unpacklo), then the
  // eight min bytes of rows 0-3 (bytes 0-7 after unpackhi).
  const __m512i bytes = _mm512_permutex2var_epi64(_mm512_unpacklo_epi32(low, high),
                                                  _mm512_setr_epi64(1, 3, 5, 7, 8, 10, 12, 14),
                                                  _mm512_unpackhi_epi32(low, high));
  // [d0 dmin0 d1 dmin1 ...] as floats.
  const __m512 d = _mm512_castps256_ps512(_mm256_cvtph_ps(
      _mm512_castsi512_si128(_mm512_permutexvar_epi32(_mm512_set4_epi32(12, 8, 4, 0), heads))));
  // Rows 2h and 2h + 1 side by side: lanes 0-7 and 8-15.
  auto two_rows = [&](int quarter, int first_index) {
    const __m128i eight_each = quarter == 0   ? _mm512_castsi512_si128(bytes)
                               : quarter == 1 ? _mm512_extracti32x4_epi32(bytes, 1)
                               : quarter == 2 ? _mm512_extracti32x4_epi32(bytes, 2)
                                              : _mm512_extracti32x4_epi32(bytes, 3);
    const __m512 factor = _mm512_permutexvar_ps(
        _mm512_add_epi32(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2),
                         _mm512_set1_epi32(first_index)),
        d);
    return _mm512_mul_ps(factor, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(eight_each)));
  };
  for (int h = 0; 2 * h < NR; ++h) {
    scales[h] = two_rows(h, 4 * h);                     // d * sc
    const __m512 offsets = two_rows(2 + h, 4 * h + 1);  // dmin * m
    const __m512 negated = _mm512_xor_ps(offsets, _mm512_set1_ps(-0.0f));
    _mm256_storeu_ps(mins[2 * h], _mm512_castps512_ps256(negated));
    if (2 * h + 1 < NR) _mm256_storeu_ps(mins[2 * h + 1], _mm512_extractf32x8_ps(negated, 1));
  }
}

// Where the scales of a chunk's 16 lanes are: lane i of chunk `quarter` of a 256-column span (4
// codes each, 64 columns) lies in 16-group 4 quarter + i / 4 and in 32-column sub-block
// 2 quarter + i / 8. ChunkGroupLanes indexes a span's 16 group scales; ChunkSubBlockLanes a
// register of sub-block scales whose first is at lane `first` (8 for the second row of a pair).
inline __m512i ChunkGroupLanes(int quarter) {
  return _mm512_add_epi32(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                          _mm512_set1_epi32(4 * quarter));
}
inline __m512i ChunkSubBlockLanes(int quarter, int first) {
  return _mm512_add_epi32(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                          _mm512_set1_epi32(2 * quarter + first));
}

// [s0 s1 s2 s3] -> [s0 x4, s1 x4, s2 x4, s3 x4]: the scale of each lane's 16-group.
inline __m512 ExpandGroupScales(__m128 four) {
  return _mm512_permutexvar_ps(ChunkGroupLanes(0), _mm512_castps128_ps512(four));
}

// Each byte of `bytes` reduced to one of its nibbles: the high one in the qwords whose bit is set
// in kHighQwords, the low one in the others. kGfni: one GF(2) byte affine transform (a bit matrix
// per qword; its byte 7 - i picks the input bits of output bit i); kShift: a shift and a mask.
// The same bytes either way.
template <NibbleSplit kSplit, int kHighQwords>
inline __m512i NibblesOf(__m512i bytes) {
  constexpr auto high = [](int qword) { return (kHighQwords >> qword & 1) != 0; };
  if constexpr (kSplit == NibbleSplit::kGfni) {
    constexpr long long kLow = 0x0102040800000000ll, kHigh = 0x1020408000000000ll;
    constexpr auto m = [high](int qword) { return high(qword) ? kHigh : kLow; };
    return _mm512_gf2p8affine_epi64_epi8(
        bytes, _mm512_setr_epi64(m(0), m(1), m(2), m(3), m(4), m(5), m(6), m(7)), 0);
  } else {
    constexpr auto shift = [high](int qword) { return high(qword) ? 4ll : 0ll; };
    return _mm512_and_si512(
        _mm512_srlv_epi64(bytes, _mm512_setr_epi64(shift(0), shift(1), shift(2), shift(3), shift(4),
                                                   shift(5), shift(6), shift(7))),
        _mm512_set1_epi8(0x0F));
  }
}

// The 32 codes of one Q4_0, Q5_0 or Q8_0 block as UnpackBlocks writes them (Q8_0: q + 128; Q4_0:
// the low nibbles, then the high ones; Q5_0: those plus the fifth bits from qh).
template <typename Block>
inline __m256i LegacyBlockCodes(const Block& block) {
  if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qs));
    return _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));  // q + 128
  } else {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs));
    const __m128i low_mask = _mm_set1_epi8(0x0F);
    const __m256i nibbles = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), low_mask),
                                             _mm_and_si128(packed, low_mask));
    if constexpr (std::is_same_v<Block, BlockQ5_0>) {  // bit j of qh is element j's bit 4
      uint32_t high;
      std::memcpy(&high, block.qh, sizeof(high));
      return _mm256_mask_add_epi8(nibbles, high, nibbles, _mm256_set1_epi8(0x10));
    }
    return nibbles;
  }
}
// The 64 codes of two whole blocks.
template <typename Block, NibbleSplit kSplit = NibbleSplit::kShift>
inline __m512i LegacyPairCodes(const Block* first) {
  if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(LegacyBlockCodes(first[0])),
                              LegacyBlockCodes(first[1]), 1);
  } else {
    // Both blocks' packed bytes in every other 128-bit lane, [qs0 qs0 qs1 qs1], each broadcast
    // as part of its load (no shuffle port: an insert and a qword permute there limited the
    // one-token tiles on Intel cores); the odd lanes keep their high nibbles:
    // [low0 high0 low1 high1].
    const __m512i spread = _mm512_mask_broadcast_i32x4(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(first[0].qs))),
        0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(first[1].qs)));
    const __m512i nibbles = NibblesOf<kSplit, 0b11001100>(spread);
    if constexpr (std::is_same_v<Block, BlockQ5_0>) {  // bit j of qh is element j's bit 4
      uint32_t high[2];
      std::memcpy(&high[0], first[0].qh, sizeof(uint32_t));
      std::memcpy(&high[1], first[1].qh, sizeof(uint32_t));
      const __mmask64 bits = high[0] | static_cast<uint64_t>(high[1]) << 32;
      return _mm512_mask_add_epi8(nibbles, bits, nibbles, _mm512_set1_epi8(0x10));
    }
    return nibbles;
  }
}

// Bytes [64 part, 64 part + 64) of a span whose first `valid` bytes are its blocks: none read
// past them (a row's last span ends the matrix), +0 in their place.
inline __m512i SpanBytes(const uint8_t* bytes, int part, int valid) {
  const int n = valid - 64 * part;
  if (n >= 64) return _mm512_loadu_si512(bytes + 64 * part);
  const __mmask64 mask = n <= 0 ? __mmask64{0} : (__mmask64{1} << n) - 1;
  return _mm512_maskz_loadu_epi8(mask, bytes + 64 * part);
}

// The 16 group scales of a span of Q4_0, Q5_0 or Q8_0 blocks from `b` (eight, or `blocks` at a
// row's end), [d0 d0 d1 d1 .. d7 d7] with +0 past the last block: each block's d is the scale
// of both its 16-groups, as UnpackBlocks writes them.
//
// Q4_0 and Q5_0 take the eight d by word permutes of the span's bytes (block i's d is at byte
// i * sizeof(Block)): one for Q4_0, whose eight d lie in the first 128 bytes, two and a blend
// for Q5_0, where eight word inserts took the shuffle port (the one that limits these tiles on
// Intel cores) eight times. Q8_0's span is too long for that: its eight d are inserted.
template <typename Block>
inline __m512 LegacySpanScales(const Block* b, int blocks) {
  if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    __m128i bits;
    if (blocks == 8) {
      bits = _mm_setr_epi16(static_cast<short>(b[0].d), static_cast<short>(b[1].d),
                            static_cast<short>(b[2].d), static_cast<short>(b[3].d),
                            static_cast<short>(b[4].d), static_cast<short>(b[5].d),
                            static_cast<short>(b[6].d), static_cast<short>(b[7].d));
    } else {
      // +0 past the row's last block. Built in registers: written to a stack array as 16-bit
      // words and read back as one vector, the read waited on a failed store forwarding, in
      // every row's last span (a quarter of the time of a 576-column Q8_0 tile).
      const auto d = [&](int i) { return static_cast<short>(i < blocks ? b[i].d : 0); };
      bits = _mm_setr_epi16(d(0), d(1), d(2), d(3), d(4), d(5), d(6), d(7));
    }
    const __m512i pairs = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_ps(pairs, _mm512_castps256_ps512(_mm256_cvtph_ps(bits)));
  } else {
    constexpr int kSpanBytes = 8 * static_cast<int>(sizeof(Block));
    constexpr short kWords = sizeof(Block) / 2;  // block i's d is word kWords * i
    static_assert(offsetof(Block, d) == 0 && sizeof(Block) % 2 == 0 && kSpanBytes <= 192);
    const auto* bytes = reinterpret_cast<const uint8_t*>(b);
    // Word j of the result: block j / 2's d, from words [32 base, 32 base + 64) of the span.
    const auto each_twice = [](short base) {
      const auto w = [&](short i) { return static_cast<short>(kWords * i - 32 * base); };
      return _mm512_zextsi256_si512(_mm256_setr_epi16(w(0), w(0), w(1), w(1), w(2), w(2), w(3),
                                                      w(3), w(4), w(4), w(5), w(5), w(6), w(6),
                                                      w(7), w(7)));
    };
    const auto halves_of_span = [&](int valid) {
      const __m512i low = SpanBytes(bytes, 0, valid), middle = SpanBytes(bytes, 1, valid);
      __m512i halves = _mm512_permutex2var_epi16(low, each_twice(0), middle);
      if constexpr (7 * sizeof(Block) + 2 > 128) {
        // Blocks whose d lies past byte 127 (Q5_0: blocks 6 and 7) from the second permute.
        static_assert(kWords * 5 < 64 && kWords * 6 >= 64 && kWords * 7 < 96);
        const __m512i high = SpanBytes(bytes, 2, valid);
        halves = _mm512_mask_blend_epi16(0xF000, halves,
                                         _mm512_permutex2var_epi16(middle, each_twice(1), high));
      }
      return _mm512_cvtph_ps(_mm512_castsi512_si256(halves));
    };
    if (blocks == 8) return halves_of_span(kSpanBytes);  // constant masks
    return halves_of_span(blocks * static_cast<int>(sizeof(Block)));
  }
}

// The quantized tiles' arithmetic (every AVX-512 quantized tile, whatever its rows, tokens or
// weight layout, so that an output's bits never depend on which one ran): four float chains per
// output, c_j for the 16-column groups at position j of each 64-column chunk,
//   c_j = fma(float(isum_g), w_scale_g * x_scale_g, c_j)   over the row's chunks in order,
// where isum_g is the exact integer sum of the group's products (a lone last block of 32 has
// groups j = 0 and 1 only; c_2 and c_3 are left as they are), then
//   y = ((c_0 + c_1) + (c_2 + c_3))   plus MinsDot for types with a min.
// A tile over four rows keeps a token's chains in one register, row r's c_j in lane 4 j + r; a
// tile over 16 interleaved rows keeps one register per chain, row r in lane r.

// Four rows' chunk sums (lane i of a row: the exact sum of its products 4i .. 4i + 3) as group
// sums in the four-row layout: lane 4 j + r = row r's group j. Blends and in-lane shuffles only.
inline __m512i GroupSumsOfRows(__m512i a, __m512i b, __m512i c, __m512i d) {
  // Per 128-bit lane (a group): [a0 + a1, b0 + b1, a2 + a3, b2 + b3], the same for c and d.
  const __m512i first =
      _mm512_setr_epi32(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
  const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(1));
  const auto pairs = [&](__m512i p, __m512i q) {
    return _mm512_add_epi32(_mm512_permutex2var_epi32(p, first, q),
                            _mm512_permutex2var_epi32(p, second, q));
  };
  const __m512i ab = pairs(a, b), cd = pairs(c, d);
  // [a01 b01 c01 d01] + [a23 b23 c23 d23].
  const __m512i low = _mm512_setr_epi32(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
  const __m512i high = _mm512_add_epi32(low, _mm512_set1_epi32(2));
  return _mm512_add_epi32(_mm512_permutex2var_epi32(ab, low, cd),
                          _mm512_permutex2var_epi32(ab, high, cd));
}

// Per-lane values of four rows side by side (each row's vector holds its group j's value in
// every lane of group j, as ExpandGroupScales gives) in the four-row layout: lane 4 j + r from
// row r's vector.
inline __m512 FourRowLanes(__m512 r0, __m512 r1, __m512 r2, __m512 r3) {
  return _mm512_mask_blend_ps(
      0x8888, _mm512_mask_blend_ps(0x4444, _mm512_mask_blend_ps(0x2222, r0, r1), r2), r3);
}

// The chains of the four-row layout summed per row: ((c_0 + c_1) + (c_2 + c_3)) in lane r.
inline __m128 ChainTotalsOfRows(__m512 chains) {
  const __m128 c0 = _mm512_castps512_ps128(chains), c1 = _mm512_extractf32x4_ps(chains, 1);
  const __m128 c2 = _mm512_extractf32x4_ps(chains, 2), c3 = _mm512_extractf32x4_ps(chains, 3);
  return _mm_add_ps(_mm_add_ps(c0, c1), _mm_add_ps(c2, c3));
}

// sum over blocks b of w_min[b] * x_sum[b], in lanes b % 16 then HorizontalSum: the min term of
// types with a min.
inline float MinsDot(const float* wm, const float* xs, int64_t blocks) {
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
  return HorizontalSum(min_acc);
}

}  // namespace
}  // namespace reprise::kernels
