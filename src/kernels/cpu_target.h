// The instruction sets the kernels are compiled for. The best one the CPU supports is picked once
// at start-up; tests and benchmarks may name one explicitly.
#pragma once

#include <string>
#include <string_view>

namespace reprise::kernels {

enum class CpuTarget : int {
  kScalar = 0,  // portable C++, always available
  kAvx2 = 1,    // AVX2 + FMA + F16C
  kAvx512 = 2,  // AVX-512 F/BW/VL/DQ + VNNI, FMA, F16C
};

// Whether this build has kernels for `target` and this CPU can run them.
bool CpuTargetSupported(CpuTarget target);

// The best target this build has and this CPU runs, whatever REPRISE_CPU_TARGET names.
CpuTarget HighestCpuTarget();

// The best supported target, detected once (cpuid) and then fixed for the process; the
// environment variable REPRISE_CPU_TARGET (scalar, avx2, avx512) may name another supported one.
CpuTarget BestCpuTarget();

std::string_view CpuTargetName(CpuTarget target);

// The version of the kernels' arithmetic: raise it whenever a change moves any kernel's output
// bits on any target (another summation order, another rounding), so that KV blocks kept on disk
// or in Redis by an older build are not reused by one that would compute other bits.
inline constexpr int kKernelNumericsVersion = 6;

// What a KV block computed by this process can be reused under, e.g. "avx512.6": the target's
// name and kKernelNumericsVersion. Each target sums in its own order, so the same prompt gives
// other K/V bits on another target; reusing them there would change that replica's answers.
std::string KernelNumerics(CpuTarget target);

}  // namespace reprise::kernels
