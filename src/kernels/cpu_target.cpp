#include "kernels/cpu_target.h"

#include <cstdlib>
#include <iterator>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace reprise::kernels {

namespace {

// F16C from CPUID directly: clang's __builtin_cpu_supports does not know "f16c".
[[maybe_unused]] bool HasF16c() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

}  // namespace

namespace {

bool Probe(CpuTarget target) {
  switch (target) {
    case CpuTarget::kScalar:
      return true;
    case CpuTarget::kAvx2:
#if defined(REPRISE_KERNELS_AVX2)
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
#else
      return false;
#endif
    case CpuTarget::kAvx512:
#if defined(REPRISE_KERNELS_AVX512)
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") && HasF16c();
#else
      return false;
#endif
  }
  return false;
}

}  // namespace

// Probed once: CPUID traps to the hypervisor in a virtual machine (microseconds), and the
// kernels ask on every call (7% of decode time when asked each time).
bool CpuTargetSupported(CpuTarget target) {
  static const bool supported[] = {Probe(CpuTarget::kScalar), Probe(CpuTarget::kAvx2),
                                   Probe(CpuTarget::kAvx512)};
  const auto index = static_cast<size_t>(target);
  return index < std::size(supported) && supported[index];
}

CpuTarget BestCpuTarget() {
  static const CpuTarget best = [] {
    // REPRISE_CPU_TARGET=scalar|avx2|avx512 picks a lower supported target, to run the engine
    // (and its exactness tests) on every dispatch path of this machine.
    if (const char* name = std::getenv("REPRISE_CPU_TARGET"); name != nullptr) {
      for (CpuTarget target : {CpuTarget::kScalar, CpuTarget::kAvx2, CpuTarget::kAvx512}) {
        if (CpuTargetName(target) == name && CpuTargetSupported(target)) return target;
      }
    }
    return HighestCpuTarget();
  }();
  return best;
}

CpuTarget HighestCpuTarget() {
  for (CpuTarget target : {CpuTarget::kAvx512, CpuTarget::kAvx2}) {
    if (CpuTargetSupported(target)) return target;
  }
  return CpuTarget::kScalar;
}

std::string KernelNumerics(CpuTarget target) {
  return std::string(CpuTargetName(target)) + "." + std::to_string(kKernelNumericsVersion);
}

std::string_view CpuTargetName(CpuTarget target) {
  switch (target) {
    case CpuTarget::kScalar:
      return "scalar";
    case CpuTarget::kAvx2:
      return "avx2";
    case CpuTarget::kAvx512:
      return "avx512";
  }
  return "unknown";
}

}  // namespace reprise::kernels
