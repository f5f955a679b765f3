// Workloads not written yet: they say so instead of printing made-up figures.
#include "cli/bench_workloads.h"
#include "core/error.h"

namespace reprise::cli {


}  // namespace reprise::cli
