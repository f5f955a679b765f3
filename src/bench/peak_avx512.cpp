// The peak probes' AVX-512 loops (compiled with -mavx512f -mfma, see module.cmake).
#include "bench/peak_kernels.h"

#if defined(REPRISE_BENCH_AVX512)
#include <immintrin.h>

namespace reprise::bench::peak {

namespace {
// Lane sum through memory (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized).
float Sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0;
  for (float lane : lanes) sum += lane;
  return sum;
}
}  // namespace

float FmaLoopAvx512(int64_t iterations, double* flops) {
  // 16 independent chains: more than FMA latency x FMA ports on current x86 cores.
  constexpr int kChains = 16;
  volatile float seed_a = 0.999999f;
  volatile float seed_b = 1e-6f;
  const __m512 a = _mm512_set1_ps(seed_a);
  const __m512 b = _mm512_set1_ps(seed_b);
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  *flops = static_cast<double>(iterations) * kChains * 16 * 2;
  return Sum(sum);
}

float ReadSumAvx512(const float* data, size_t count) {
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (size_t i = 0; i < count; i += 128) {
    for (int k = 0; k < 8; ++k) acc[k] = _mm512_add_ps(acc[k], _mm512_load_ps(data + i + 16 * k));
  }
  for (int k = 1; k < 8; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  return Sum(acc[0]);
}

namespace {
// kPrefetch: ask for each stream's lines this far ahead into L2, as the decode kernels do.
constexpr size_t kAheadFloats = 1024;  // 4 KiB per stream

template <bool kPrefetch>
float ReadSum4(const float* data, size_t count) {
  const size_t quarter = count / 4;  // a multiple of 32 since count is a multiple of 128
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (size_t i = 0; i < quarter; i += 32) {
    for (int s = 0; s < 4; ++s) {
      const float* p = data + s * quarter + i;
      if (kPrefetch && i + kAheadFloats < quarter) {
        _mm_prefetch(reinterpret_cast<const char*>(p + kAheadFloats), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(p + kAheadFloats + 16), _MM_HINT_T1);
      }
      acc[2 * s] = _mm512_add_ps(acc[2 * s], _mm512_load_ps(p));
      acc[2 * s + 1] = _mm512_add_ps(acc[2 * s + 1], _mm512_load_ps(p + 16));
    }
  }
  for (int k = 1; k < 8; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  return Sum(acc[0]);
}
}  // namespace

float ReadSum4Avx512(const float* data, size_t count) { return ReadSum4<false>(data, count); }
float ReadSum4PrefetchAvx512(const float* data, size_t count) {
  return ReadSum4<true>(data, count);
}

}  // namespace reprise::bench::peak
#endif
