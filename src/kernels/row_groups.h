// Weight rows rearranged in groups of 16 for one-token products: where a decode tile reads four
// rows' blocks in four streams and adds each row's lanes together, a row-group tile reads one
// stream of 64-byte vectors that each hold a piece of 16 rows (one row per 32-bit lane), so every
// dot product serves 16 rows and the group sums need no shuffles. Internal to kernels/.
//
// The layout: rows [16 g, 16 g + 16) keep their bytes in [16 g, 16 g + 16) x row_bytes (so row
// ranges stay contiguous and any row's group is found by its index), ordered block by block, and
// within a block piece by piece: the 16 rows' copies of a piece side by side. A block's pieces
// are 4-byte words (Q4_K: 36, Q5_K: 44; Q6_K: 52, then its 16-bit d), or, for the legacy blocks
// (Q4_0: 18 bytes, Q8_0: 34), their words of codes then the 16-bit scale. Q5_K's eight words of
// fifth bits (qh) are then recoded, bit for bit, as the masks its tile applies: 64 bits per code
// word u of chunk j and half (low nibbles: sub-block 2j, high: 2j + 1), bit 4 r + i the fifth bit
// of row r's byte i (Q5KFifthBitMask). F16 and BF16 blocks are single elements, so a column of
// the group is its 16 rows' elements side by side (32 bytes). Rows past the last whole group stay
// as stored. That is WeightLayout::kRowGroups, the AVX-512 tiles' (row_groups_avx512.cpp).
//
// WeightLayout::kRowStreams is the AVX2 tiles' (row_groups_avx2.cpp), whose 32-byte vectors hold a
// piece of 8 rows: the same pieces, but a group is two streams of 8 rows (rows 0-7, then 8-15),
// each block by block, so that a tile reads each stream front to back (read as halves of the
// 16-row pieces, Q4_0 streamed at 21-24 GB/s against 35-36 GB/s, 2 threads, Zen 3). Q4_0, Q5_0,
// Q8_0, Q4_K, Q5_K and Q6_K have it: Q4_0's block as above, Q8_0's its eight words of codes then
// d, Q5_0's its four words of codes, its qh word recoded (Q5_0FifthBit), then d; the K-quants'
// their words in order (Q5_K's qh as stored), with each super-block's codes first recoded: Q4_K's
// and Q5_K's in sub-block order (byte 16 j + n holds element 32 j + n in its low nibble and
// 32 j + 16 + n in its high one, so that a word holds codes of one sub-block), Q6_K's ql and qh
// as 48 words of whole 6-bit codes (Q6KCodeByte); F16 and BF16 their elements (a stream's
// column: 8 rows' elements, 16 bytes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weight_type.h"

namespace reprise::kernels {

inline constexpr int kRowGroupRows = 16;
inline constexpr int kRowStreamRows = 8;  // rows of a stream in kRowStreams

// Where a Q5_K group block keeps the fifth-bit mask of code word u (0-7) of chunk j (0-3), half 0
// or 1: in the 512 bytes after the four head vectors, where its qh words would be.
inline constexpr int64_t kQ5KFifthBitsAt = 4 * 64;
constexpr int64_t Q5KFifthBitMask(int j, int u, int half) {
  return kQ5KFifthBitsAt + 8 * (2 * (8 * j + u) + half);
}

// Where a Q5_0 row's recoded qh word keeps the fifth bit of element e (0-31) of its block: byte
// e % 4, bit 2 u + h for e = 4 u + (e % 4) + 16 h. Code word u's low (h = 0) or high (h = 1)
// nibbles then find their fifth bits at one bit of their own bytes: one shift and one mask put
// them at bit 4, where testing stored qh bits took a byte shuffle and a compare.
constexpr int Q5_0FifthBit(int e) { return 8 * (e % 4) + 2 * (e % 16 / 4) + e / 16; }

// Where a Q5_0 stream block (kRowStreams) keeps its rows' qh words: after its four vectors of
// code words.
inline constexpr int64_t kQ5_0StreamQhAt = 4 * 4 * kRowStreamRows;

// Where a Q6_K super-block in kRowStreams keeps its codes, in the 192 bytes of its ql and qh:
// three 4-byte words per group g of 16 elements (scale sc[g]), word 3 g + k (k < 3) holding the
// codes of elements 16 g + 4 k + i in the low six bits of its byte i and bits 2 k and 2 k + 1 of
// element 16 g + 12 + i's code in the top two. A tile takes three codes with a mask each and
// puts the fourth together from the three top pairs, where stored ql and qh took a shift and
// masks for every code's two parts.
constexpr int Q6KCodeByte(int g, int k, int i) { return 4 * (3 * g + k) + i; }

// Whether `type` has the grouped `layout`: kRowGroups for Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, F16 and
// BF16; kRowStreams for Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, F16 and BF16.
bool HasGroupedLayout(WeightType type, WeightLayout layout);

// Rows a stream of a group in the grouped `layout` holds side by side (see above).
constexpr int StreamRows(WeightLayout layout) {
  return layout == WeightLayout::kRowStreams ? kRowStreamRows : kRowGroupRows;
}

// The bytes of one group of 16 whole rows, [16][row_bytes], rearranged into the grouped `layout`
// (`out`, 16 x row_bytes), and back. `cols` is the row length in elements.
void GroupRows(WeightType type, WeightLayout layout, const uint8_t* rows, int64_t cols,
               uint8_t* out);
void UngroupRows(WeightType type, WeightLayout layout, const uint8_t* group, int64_t cols,
                 uint8_t* out);

// A Q5_0 group's rows moved back to stored order (`rows`, [16][row_bytes]) with their qh words
// still recoded: the qh words as stored, in place.
void StoreQ5_0FifthBits(uint8_t* rows, int64_t cols);

// Row `row` of a matrix in the grouped `layout` as stored in a file (row_bytes bytes to `out`).
void UngroupRow(WeightType type, WeightLayout layout, const uint8_t* data, int64_t rows,
                int64_t cols, int64_t row, uint8_t* out);

// Tokens [0, mt) in passes for a row-group tile: pass.template operator()<k>(t) for tokens t ..
// t + k - 1, kMost at a time, then (kMost > 2) one pass of 2, then one of 1 for what remains.
template <int kMost, typename Pass>
void ForTokenPasses(int mt, const Pass& pass) {
  int t = 0;
  for (; t + kMost <= mt; t += kMost) pass.template operator()<kMost>(t);
  if constexpr (kMost > 2) {
    if (mt - t >= 2) {
      pass.template operator()<2>(t);
      t += 2;
    }
  }
  if (t < mt) pass.template operator()<1>(t);
}

}  // namespace reprise::kernels
