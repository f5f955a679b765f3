// The row-group tiles' prefetch along their one stream of bytes (row_groups_avx512.cpp,
// row_groups_avx2.cpp, k_quant_streams_avx2.cpp). Include only from files compiled for a SIMD
// target.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/matmul_kernels.h"
#include "kernels/simd.h"

namespace reprise::kernels {

// Asks for a tile's bytes ahead of its reads, as it goes: where kFarBytes > 0, kFarBytes ahead
// into L2 (one stream, so about as far as memory needs to answer), and, where kNearBytes > 0,
// kNearBytes ahead into L1 (from L2, or from memory where nothing asked further). The AVX-512 pair
// tiles take only the second (row_groups_avx512.cpp says why); the one-group tiles only the first:
// the K-quants, which compute longer per byte, lost with both (88% -> 82% of the read bandwidth on
// an Emerald Rapids core), and so did Q4_0 on Zen 5 (2 threads, 2048 bytes near: 71 against 92
// GB/s), though it had gained on Emerald Rapids (86% -> 91%). PREFETCHT1 also on Zen 4 and 5, where
// it fills L2 only: PREFETCHNTA (into L1) 16-48 KiB ahead read no faster there from cold caches
// (Zen 5, 2 threads, 128 MiB matrices, each run after a 256 MiB read pass, GB/s T1 against NTA 24
// KiB: Q4_K 71-74 / 68-72, Q5_K 69-72 / 66-69, Q8_0 70-73 / 65-67, F16 64-66 / 66-70), nor did T1
// further ahead (Q4_K at 8 KiB 71-74, at 12-24 KiB 58-66). Runs of one matrix back to back had
// shown NTA 10-20% faster, and faster than any read loop: most likely part of the matrix was still
// in L3 from the run before (the hints leave lines there differently), which a model many times the
// size of L3 never finds from one token to the next. So compare prefetch variants each after a pass
// over other memory.
template <int64_t kFarBytes, int64_t kNearBytes>
class StreamAhead {
 public:
  StreamAhead(const uint8_t* start, const uint8_t* end)
      : far_(start + kFarBytes), near_(start + kNearBytes), end_(end) {}
  // The lines up to the distances past `read_end` (where the tile's next reads end), not past
  // the caller's limit.
  void Upto(const uint8_t* read_end) {
    if constexpr (kFarBytes > 0) {
      for (const uint8_t* stop = std::min(read_end + kFarBytes, end_); far_ < stop; far_ += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(far_), _MM_HINT_T1);
      }
    }
    if constexpr (kNearBytes > 0) {
      for (const uint8_t* stop = std::min(read_end + kNearBytes, end_); near_ < stop; near_ += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(near_), _MM_HINT_T0);
      }
    }
  }

 private:
  const uint8_t* far_;
  const uint8_t* near_;
  const uint8_t* end_;
};

// A pair tile's asks ahead, one per group (GroupRead::ahead_end its limit): 3 KiB ahead into L1.
// Without hints the pairs read slower than one group, and 2-4 KiB into L1 beat 2-8 KiB into L2
// (Zen 5; the float pair: 6 KiB and 1.5-2 KiB slower than 3).
class PairAhead {
 public:
  using Stream = StreamAhead<0, 3072>;
  explicit PairAhead(const GroupRead (&reads)[2])
      : streams_{Stream(reads[0].group, reads[0].ahead_end),
                 Stream(reads[1].group, reads[1].ahead_end)} {}
  // Group s's stream.
  Stream& Along(int s) { return streams_[s]; }

 private:
  Stream streams_[2];
};

// A tile's stream left to the hardware prefetchers.
struct NoStreamAhead {
  void Upto(const uint8_t*) {}
};

}  // namespace reprise::kernels
