// ScoreRowTile: the query-key dot products of the AVX2 and AVX-512 PagedAttention kernels,
// written once over a vector type. Each target's file instantiates it with its own Lanes (the
// vector type and its operations) under its own compile flags.
#pragma once

namespace reprise::kernels {

// For kRows query rows and kChunks chunks of key slots (one slot per lane), sums[i][c] lane s =
// even + odd, where even and odd sum rows[i][d] * keys(d, c)[s] over the even and over the odd d
// in order, by fused multiply-adds. Two chains halve the wait on the FMA latency; the fixed order
// gives a target the same bits on every call, and a slot's sum is the same whichever chunk of
// whichever tile it is in. Several chunks share each query element's broadcast (a tile of one
// chunk reads more broadcasts than keys and waits on the load ports, not the FMAs). kRows and
// kChunks are constants so that the accumulators stay in registers. Lanes: Vec, Zero(),
// Broadcast(const float*), MultiplyAdd(a, b, c) = a * b + c, Add(a, b); keys(d, c) returns
// dimension d of chunk c's slots as a Vec. each_pair() runs at the start of every pair of
// dimensions (a decode tile asks for the next block's lines there).
template <typename Lanes, int kRows, int kChunks, typename Keys, typename EachPair>
inline void ScoreRowTile(const float* const (&rows)[kRows], int head_dim, const Keys& keys,
                         EachPair& each_pair, typename Lanes::Vec (&sums)[kRows][kChunks]) {
  using Vec = typename Lanes::Vec;
  Vec even[kRows][kChunks], odd[kRows][kChunks];
  for (int i = 0; i < kRows; ++i) {
    for (int c = 0; c < kChunks; ++c) even[i][c] = odd[i][c] = Lanes::Zero();
  }
  int d = 0;
  for (; d + 2 <= head_dim; d += 2) {
    each_pair();
    Vec k0[kChunks], k1[kChunks];
    for (int c = 0; c < kChunks; ++c) {
      k0[c] = keys(d, c);
      k1[c] = keys(d + 1, c);
    }
    for (int i = 0; i < kRows; ++i) {
      const Vec q0 = Lanes::Broadcast(rows[i] + d);
      const Vec q1 = Lanes::Broadcast(rows[i] + d + 1);
      for (int c = 0; c < kChunks; ++c) {
        even[i][c] = Lanes::MultiplyAdd(q0, k0[c], even[i][c]);
        odd[i][c] = Lanes::MultiplyAdd(q1, k1[c], odd[i][c]);
      }
    }
  }
  if (d < head_dim) {
    for (int c = 0; c < kChunks; ++c) {
      const Vec k0 = keys(d, c);
      for (int i = 0; i < kRows; ++i) {
        even[i][c] = Lanes::MultiplyAdd(Lanes::Broadcast(rows[i] + d), k0, even[i][c]);
      }
    }
  }
  for (int i = 0; i < kRows; ++i) {
    for (int c = 0; c < kChunks; ++c) sums[i][c] = Lanes::Add(even[i][c], odd[i][c]);
  }
}

}  // namespace reprise::kernels
