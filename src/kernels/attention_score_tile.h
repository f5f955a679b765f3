// ScoreRowTile: the query-key dot products of the AVX2 and AVX-512 PagedAttention kernels,
// written once over a vector type. Each target's file instantiates it with its own Lanes (the
// vector type and its operations) under its own compile flags.
#pragma once

namespace reprise::kernels {

// For kRows query rows and one chunk of key slots (one slot per lane), sums[i] lane s =
// even + odd, where even and odd sum rows[i][d] * keys(d)[s] over the even and over the odd d in
// order, by fused multiply-adds. Two chains halve the wait on the FMA latency; the fixed order
// gives a target the same bits on every call. kRows is a constant so that the accumulators stay
// in registers. Lanes: Vec, Zero(), Broadcast(const float*), MultiplyAdd(a, b, c) = a * b + c,
// Add(a, b); keys(d) returns dimension d of the chunk's slots as a Vec. each_pair() runs at the
// start of every pair of dimensions (a decode tile asks for the next block's lines there).
template <typename Lanes, int kRows, typename Keys, typename EachPair>
inline void ScoreRowTile(const float* const (&rows)[kRows], int head_dim, const Keys& keys,
                         EachPair& each_pair, typename Lanes::Vec (&sums)[kRows]) {
  using Vec = typename Lanes::Vec;
  Vec even[kRows], odd[kRows];
  for (int i = 0; i < kRows; ++i) even[i] = odd[i] = Lanes::Zero();
  int d = 0;
  for (; d + 2 <= head_dim; d += 2) {
    each_pair();
    const Vec k0 = keys(d);
    const Vec k1 = keys(d + 1);
    for (int i = 0; i < kRows; ++i) {
      even[i] = Lanes::MultiplyAdd(Lanes::Broadcast(rows[i] + d), k0, even[i]);
      odd[i] = Lanes::MultiplyAdd(Lanes::Broadcast(rows[i] + d + 1), k1, odd[i]);
    }
  }
  if (d < head_dim) {
    const Vec k0 = keys(d);
    for (int i = 0; i < kRows; ++i) {
      even[i] = Lanes::MultiplyAdd(Lanes::Broadcast(rows[i] + d), k0, even[i]);
    }
  }
  for (int i = 0; i < kRows; ++i) sums[i] = Lanes::Add(even[i], odd[i]);
}

}  // namespace reprise::kernels
