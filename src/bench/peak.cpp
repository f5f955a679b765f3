#include "bench/peak.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <string>
#include <vector>

#include "bench/peak_kernels.h"
#include "core/aligned_buffer.h"
#include "core/clock.h"
#include "core/error.h"

namespace reprise::bench {

namespace peak {

float FmaLoopScalar(int64_t iterations, double* flops) {
  constexpr int kChains = 8;
  volatile float seed_a = 0.999999f;
  volatile float seed_b = 1e-6f;
  const float a = seed_a;
  const float b = seed_b;
  float acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = static_cast<float>(c);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
  }
  float sum = 0;
  for (float value : acc) sum += value;
  *flops = static_cast<double>(iterations) * kChains * 2;
  return sum;
}

float ReadSumScalar(const float* data, size_t count) {
  float acc[8] = {};
  for (size_t i = 0; i < count; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += data[i + k];
  }
  float sum = 0;
  for (float value : acc) sum += value;
  return sum;
}

}  // namespace peak

namespace {

using FmaLoop = float (*)(int64_t, double*);
using ReadSum = float (*)(const float*, size_t);

FmaLoop FmaLoopFor(kernels::CpuTarget target) {
  REPRISE_CHECK(kernels::CpuTargetSupported(target), "CPU target {} not supported",
                kernels::CpuTargetName(target));
  switch (target) {
#if defined(REPRISE_BENCH_AVX512)
    case kernels::CpuTarget::kAvx512:
      return peak::FmaLoopAvx512;
#endif
#if defined(REPRISE_BENCH_AVX2)
    case kernels::CpuTarget::kAvx2:
      return peak::FmaLoopAvx2;
#endif
    default:
      return peak::FmaLoopScalar;
  }
}

// The read loops `target` can run, widest first; the probe keeps the best of them all.
std::vector<ReadSum> ReadSumsFor(kernels::CpuTarget target) {
  switch (target) {
#if defined(REPRISE_BENCH_AVX512)
    case kernels::CpuTarget::kAvx512:
      return {peak::ReadSumAvx512, peak::ReadSum4Avx512, peak::ReadSum4PrefetchAvx512,
              peak::ReadSumAvx2, peak::ReadSumPrefetchAvx2};
#endif
#if defined(REPRISE_BENCH_AVX2)
    case kernels::CpuTarget::kAvx2:
      return {peak::ReadSumAvx2, peak::ReadSumPrefetchAvx2};
#endif
    default:
      return {peak::ReadSumScalar};
  }
}

// Runs `loop` on every thread of the pool; returns total flops and sets *seconds.
double RunFmaOnAllThreads(FmaLoop loop, int64_t iterations, ThreadPool& pool, double* seconds) {
  const int threads = pool.num_threads();
  std::vector<double> flops(static_cast<size_t>(threads), 0.0);
  std::atomic<float> sink{0};
  Clock::time_point start = Clock::now();
  pool.ParallelFor(static_cast<size_t>(threads), [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      float value = loop(iterations, &flops[t]);
      sink.store(value, std::memory_order_relaxed);
    }
  });
  *seconds = SecondsSince(start);
  double total = 0;
  for (double f : flops) total += f;
  return total;
}

}  // namespace

double MeasureFmaPeak(kernels::CpuTarget target, ThreadPool& pool, double seconds, int trials) {
  FmaLoop loop = FmaLoopFor(target);
  // Calibrate the iteration count to about `seconds` a trial.
  int64_t iterations = 1 << 16;
  double elapsed = 0;
  for (;;) {
    RunFmaOnAllThreads(loop, iterations, pool, &elapsed);
    if (elapsed >= seconds / 8 || iterations > (int64_t{1} << 40)) break;
    iterations *= 4;
  }
  iterations = std::max<int64_t>(
      1, static_cast<int64_t>(static_cast<double>(iterations) * seconds / std::max(elapsed, 1e-9)));
  double best = 0;
  for (int trial = 0; trial < std::max(1, trials); ++trial) {
    double flops = RunFmaOnAllThreads(loop, iterations, pool, &elapsed);
    best = std::max(best, flops / elapsed / 1e9);
  }
  return best;
}

struct ReadBandwidthProbe::State {
  ThreadPool& pool;
  std::vector<ReadSum> reads;
  size_t floats;
  size_t chunks;                // threads split whole 512-byte chunks
  AlignedBuffer<float> buffer;  // [floats]
  size_t next = 0;              // read loop of the next pass
  std::atomic<float> sink{0};
};

ReadBandwidthProbe::ReadBandwidthProbe(kernels::CpuTarget target, ThreadPool& pool, size_t bytes) {
  REPRISE_CHECK(kernels::CpuTargetSupported(target), "CPU target {} not supported",
                kernels::CpuTargetName(target));
  const size_t floats = std::max<size_t>(bytes / sizeof(float) / 128, 1) * 128;
  state_.reset(new State{.pool = pool,
                         .reads = ReadSumsFor(target),
                         .floats = floats,
                         .chunks = floats / 128,
                         .buffer = AlignedBuffer<float>(floats)});
  State& s = *state_;
  // Each thread writes the share it will read, so its pages sit near it.
  pool.ParallelFor(s.chunks, [&](size_t begin, size_t end) {
    std::fill(s.buffer.data() + begin * 128, s.buffer.data() + end * 128, 1.0f);
  });
}

ReadBandwidthProbe::~ReadBandwidthProbe() = default;

double ReadBandwidthProbe::Pass() {
  State& s = *state_;
  ReadSum read = s.reads[s.next++ % s.reads.size()];
  Clock::time_point start = Clock::now();
  s.pool.ParallelFor(s.chunks, [&](size_t begin, size_t end) {
    s.sink.store(read(s.buffer.data() + begin * 128, (end - begin) * 128),
                 std::memory_order_relaxed);
  });
  const double elapsed = SecondsSince(start);
  return static_cast<double>(s.floats * sizeof(float)) / elapsed / 1e9;
}

double ReadBandwidthProbe::Best(int passes) {
  double best = 0;
  for (int pass = 0; pass < std::max(1, passes); ++pass) best = std::max(best, Pass());
  return best;
}

}  // namespace reprise::bench

namespace reprise::bench {

size_t LastLevelCacheBytes() {
  // sysfs describes the cache this CPU shares; glibc's sysconf may report a whole host's L3.
  size_t largest = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", index));
    std::string text;
    if (!(in >> text) || text.empty()) continue;
    size_t scale = 1;
    if (text.back() == 'K') scale = size_t{1} << 10;
    if (text.back() == 'M') scale = size_t{1} << 20;
    if (scale != 1) text.pop_back();
    try {
      largest = std::max(largest, static_cast<size_t>(std::stoull(text)) * scale);
    } catch (const std::exception&) {
    }
  }
  if (largest > 0) return largest;
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    long bytes = ::sysconf(name);
    if (bytes > 0) return static_cast<size_t>(bytes);
  }
  return size_t{32} << 20;
}

}  // namespace reprise::bench
