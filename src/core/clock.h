// Monotonic time in seconds, for TTFT and throughput figures.
#pragma once

#include <chrono>

namespace reprise {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace reprise
