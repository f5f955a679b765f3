// Workloads not written yet: they say so instead of printing made-up figures.
#include "cli/bench_workloads.h"
#include "core/error.h"

namespace reprise::cli {

WorkloadResult RunUniqueWorkload(const BenchContext&) { throw Error("bench unique: not built yet"); }
WorkloadResult RunConcurrentWorkload(const BenchContext&) { throw Error("bench concurrent: not built yet"); }

}  // namespace reprise::cli
