// Per-target loops of the peak probes (bench_peak_*.cpp, each compiled for its instruction set).
// Internal to bench_peak.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace reprise::bench::peak {

// Runs `iterations` rounds of independent FMA chains; returns the chains' sum (so the work is
// kept) and sets *flops to the floating-point operations done.
float FmaLoopScalar(int64_t iterations, double* flops);
float FmaLoopAvx2(int64_t iterations, double* flops);
float FmaLoopAvx512(int64_t iterations, double* flops);

// Sums `count` floats (count a multiple of 128, data 64-byte aligned) with wide loads.
float ReadSumScalar(const float* data, size_t count);
float ReadSumAvx2(const float* data, size_t count);
float ReadSumAvx512(const float* data, size_t count);
// The same over four streams (the quarters of the range) read side by side: more misses in
// flight, which some memory systems need to reach their bandwidth.
float ReadSum4Avx512(const float* data, size_t count);
// ReadSum4Avx512 / ReadSumAvx2 asking for each stream's lines a few KiB ahead into L2, as the
// decode kernels do: on some cores software prefetch reaches more bandwidth than the hardware
// prefetcher alone, and the peak must not be lower than what a kernel can read.
float ReadSum4PrefetchAvx512(const float* data, size_t count);
float ReadSumPrefetchAvx2(const float* data, size_t count);

}  // namespace reprise::bench::peak
