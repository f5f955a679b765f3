// The row-group tiles' prefetch along their one stream of bytes (row_groups_avx512.cpp,
// row_groups_avx2.cpp). Include only from files compiled for a SIMD target.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/simd.h"

namespace reprise::kernels {

// Asks for a tile's bytes ahead of its reads, as it goes: kFarBytes ahead into L2 (one stream, so
// about as far as memory needs to answer), and, where kNearBytes > 0, kNearBytes ahead from L2
// into L1. The AVX-512 tiles take only the first: the K-quants, which compute longer per byte,
// lost with both (88% -> 82% of the read bandwidth on an Emerald Rapids core), and so did Q4_0
// on Zen 5 (2 threads, 2048 bytes near: 71 against 92 GB/s), though it had gained on Emerald
// Rapids (86% -> 91%).
template <int64_t kFarBytes, int64_t kNearBytes>
class StreamAhead {
 public:
  StreamAhead(const uint8_t* start, const uint8_t* end)
      : far_(start + kFarBytes), near_(start + kNearBytes), end_(end) {}
  // The lines up to the distances past `read_end` (where the tile's next reads end), not past
  // the caller's limit.
  void Upto(const uint8_t* read_end) {
    for (const uint8_t* stop = std::min(read_end + kFarBytes, end_); far_ < stop; far_ += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(far_), _MM_HINT_T1);
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

}  // namespace reprise::kernels
