// The machine's measured limits, the yardsticks of `bench kernels`: f32 FMA throughput and
// streaming-read bandwidth, each on every thread of a pool, with the widest vectors the CPU has.
#pragma once

#include <cstddef>
#include <memory>

#include "core/thread_pool.h"
#include "kernels/cpu_target.h"

namespace reprise::bench {

// Best GFLOP/s (an FMA counts 2) of independent f32 FMA chains on every thread of `pool`, over
// `trials` runs of about `seconds` each. `target` must be supported by this CPU. Short runs, many
// of them: on a shared machine the best short run is the one that had the cores to itself, as
// the kernels' best runs (a few milliseconds each) are.
double MeasureFmaPeak(kernels::CpuTarget target, ThreadPool& pool, double seconds, int trials);

// Bytes of the largest cache of CPU 0 (sysfs, else sysconf), or 32 MiB when neither says.
size_t LastLevelCacheBytes();

// Streaming-read bandwidth: a `bytes` buffer (first touched by the reading threads), each thread
// summing its contiguous share. A pass takes one of the target's read loops (one stream, four
// streams, narrower vectors) in turn. Passes can be interleaved with the runs of a kernel, so
// that kernel and peak see the same moments of a shared machine.
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(kernels::CpuTarget target, ThreadPool& pool, size_t bytes);
  ReadBandwidthProbe(const ReadBandwidthProbe&) = delete;
  ReadBandwidthProbe& operator=(const ReadBandwidthProbe&) = delete;
  ~ReadBandwidthProbe();

  double Pass();            // GB/s (1e9 bytes) of one pass, with the next read loop
  double Best(int passes);  // the best of `passes` passes

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace reprise::bench
