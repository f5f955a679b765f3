// The float row-group tile written once for the SIMD targets (row_groups_avx512.cpp over 16-row
// groups, row_groups_avx2.cpp over 8-row streams): F16 and BF16 rows laid out a column at a time
// (one element per row, row r in lane r). Include only from files compiled for a SIMD target.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/stream_ahead.h"
#include "kernels/weight_type.h"

namespace reprise::kernels {

// Columns per stretch of FloatRowsTokens (2 KiB of a 16-row group): short passes over a stretch
// in L1 keep memory streaming what was asked for ahead. 16384 x 4096 F16, 2 threads, Zen 5,
// AVX-512, as fast as the four-row tiles on stored rows at 2 / 4 / 6 tokens with stretches of 512
// columns: 1.0x / 0.82x / 0.83x; of 64: 1.17x / 1.22x / 1.06x (in L2, 4 tokens: 0.67x / 0.68x).
inline constexpr int64_t kFloatStretchColumns = 64;

// One stretch of FloatRowsTokens: the kFloatStretchColumns columns of `rows` from c0 (fewer at
// the end) added into `saved` ([token][lane l][row r]), in passes over kLanes of the lanes.
template <typename Lanes, WeightType kType, int MT, int kLanes, typename Ahead>
void FloatStretch(const float* x, int64_t x_stride, const uint8_t* rows, int64_t cols, int64_t c0,
                  Ahead& ahead, float (&saved)[MT][Lanes::kRows][Lanes::kRows]) {
  using Vec = typename Lanes::Vec;
  constexpr int kRows = Lanes::kRows;
  constexpr int64_t kColumnBytes = 2 * kRows;
  const int64_t c1 = std::min(cols, c0 + kFloatStretchColumns);
  const int64_t whole_end = c0 + (c1 - c0) / kRows * kRows;
  const int64_t tail = c1 == cols ? cols - whole_end : 0;
  for (int first = 0; first < kRows; first += kLanes) {
    // Plain loops of constant counts, fully unrolled: GCC keeps these accumulators in
    // registers (through lambdas it kept them on the stack).
    Vec acc[MT][kLanes];
#pragma GCC unroll 16
    for (int t = 0; t < MT; ++t) {
#pragma GCC unroll 16
      for (int i = 0; i < kLanes; ++i) acc[t][i] = Lanes::Load(saved[t][first + i]);
    }
    // Lanes first .. first + kLanes - 1 of every kRows columns from c0 + first, then of the
    // last chunk the lanes it has.
    for (int64_t c = c0 + first; c < whole_end; c += kRows) {
      if (first == 0) ahead.Upto(rows + (c + kRows) * kColumnBytes);
#pragma GCC unroll 16
      for (int i = 0; i < kLanes; ++i) {
        const Vec w = Lanes::template Widen<kType>(rows + (c + i) * kColumnBytes);
#pragma GCC unroll 16
        for (int t = 0; t < MT; ++t) {
          acc[t][i] = Lanes::MultiplyAdd(Lanes::Broadcast(x + t * x_stride + c + i), w, acc[t][i]);
        }
      }
    }
    const int64_t c = whole_end + first;
#pragma GCC unroll 16
    for (int i = 0; i < kLanes; ++i) {
      if (first + i < tail) {
        const Vec w = Lanes::template Widen<kType>(rows + (c + i) * kColumnBytes);
#pragma GCC unroll 16
        for (int t = 0; t < MT; ++t) {
          acc[t][i] = Lanes::MultiplyAdd(Lanes::Broadcast(x + t * x_stride + c + i), w, acc[t][i]);
        }
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < MT; ++t) {
#pragma GCC unroll 16
      for (int i = 0; i < kLanes; ++i) Lanes::Store(saved[t][first + i], acc[t][i]);
    }
  }
}

// FloatRowsTokens' results from its `saved` lanes: token t's kRows sums at y + t * y_stride.
template <typename Lanes, int MT>
void StoreFloatSums(float (&saved)[MT][Lanes::kRows][Lanes::kRows], int64_t cols, float* y,
                    int64_t y_stride) {
  using Vec = typename Lanes::Vec;
  constexpr int kRows = Lanes::kRows;
  for (int t = 0; t < MT; ++t) {
    Vec sums[kRows];
    for (int l = 0; l < kRows; ++l) sums[l] = Lanes::Load(saved[t][l]);
    Lanes::StoreU(y + t * y_stride, Lanes::SumsOfRows(sums, cols));
  }
}

// The target's float tile arithmetic (per row, Lanes::kRows lanes of column residues, a masked
// last chunk, then its HorizontalSum) for Lanes::kRows rows at once, transposed: acc[l] lane r is
// row r's lane l, adding x[c] * w[r][c] over the columns c = l mod kRows in order by fused
// multiply-adds; the lanes past the last chunk's columns +0 (as a masked load of zeros gives);
// then the HorizontalSum tree across the registers (Lanes::SumsOfRows). So the bits of the
// target's float tile on the stored rows. Each widened column serves all MT tokens; the MT x
// kRows accumulators do not fit in registers beside it, so each stretch of columns is read in
// passes over kLanes of the lanes (the stretch stays in L1 meanwhile), the others kept in memory.
//
// Lanes: Vec; kRows; Widen<kType>(column) (the column's kRows 16-bit elements as f32);
// Broadcast(const float*); MultiplyAdd(a, b, c) = a * b + c; Load and Store (aligned); StoreU;
// SumsOfRows(Vec (&)[kRows], int64_t cols). `rows` points at the first column; y + t * y_stride
// receives token t's kRows sums.
template <typename Lanes, WeightType kType, int MT, int kLanes, typename Ahead>
void FloatRowsTokens(const float* x, int64_t x_stride, const uint8_t* rows, int64_t cols,
                     Ahead& ahead, float* y, int64_t y_stride) {
  constexpr int kRows = Lanes::kRows;
  alignas(64) float saved[MT][kRows][kRows] = {};  // [token][lane l][row r], from +0
  for (int64_t c0 = 0; c0 < cols; c0 += kFloatStretchColumns) {
    FloatStretch<Lanes, kType, MT, kLanes>(x, x_stride, rows, cols, c0, ahead, saved);
  }
  StoreFloatSums<Lanes, MT>(saved, cols, y, y_stride);
}

// FloatRowsTokens for one token over two groups of rows (GroupRead: a group's first column, where
// its asks ahead stop, its kRows outputs), a stretch of each in turn, each group's sums
// FloatRowsTokens' bits: two streams of bytes, which memory answers faster than one. 1B model
// layer matrices (F16 and BF16), 2 threads, Zen 5: 1.17-1.36x as fast as a group at a time with
// the pair's asks ahead (PairAhead), 0.9-1.1x without.
template <typename Lanes, WeightType kType>
void FloatRowsPair(const float* x, int64_t cols, const GroupRead (&reads)[2]) {
  constexpr int kRows = Lanes::kRows;
  PairAhead ahead(reads);
  alignas(64) float saved[2][1][kRows][kRows] = {};
  for (int64_t c0 = 0; c0 < cols; c0 += kFloatStretchColumns) {
    for (int s = 0; s < 2; ++s) {
      FloatStretch<Lanes, kType, 1, kRows>(x, 0, reads[s].group, cols, c0, ahead.Along(s),
                                           saved[s]);
    }
  }
  for (int s = 0; s < 2; ++s) StoreFloatSums<Lanes, 1>(saved[s], cols, reads[s].y, 0);
}

// Lanes per pass of FloatRowsTokens for `tokens` tokens: the most, a power of two up to `rows`,
// whose tokens x lanes accumulators stay within `accumulators` registers (the rest hold the
// widened column and the broadcasts).
constexpr int LanesPerPass(int tokens, int rows, int accumulators) {
  int lanes = rows;
  while (lanes > 1 && tokens * lanes > accumulators) lanes /= 2;
  return lanes;
}

// run(std::integral_constant<WeightType, kType>{}) for the 16-bit float type `type` (F16, else
// BF16): the element type as the constant the tiles take.
template <typename Run>
void WithHalfType(WeightType type, const Run& run) {
  if (type == WeightType::kF16) {
    run(std::integral_constant<WeightType, WeightType::kF16>{});
  } else {
    run(std::integral_constant<WeightType, WeightType::kBF16>{});
  }
}

// run(std::integral_constant<int, MT>{}) for MT = mt (1 .. kMaxTokens): a call's token count as
// the constant the tiles take.
template <int kMaxTokens, typename Run>
void WithTokenCount(int mt, const Run& run) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (void)((mt == I + 1 ? (run(std::integral_constant<int, I + 1>{}), true) : false) || ...);
  }
  (std::make_integer_sequence<int, kMaxTokens>());
}

}  // namespace reprise::kernels
