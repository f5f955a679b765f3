// The peak probes' AVX2 loops (compiled with -mavx2 -mfma, see module.cmake).
#include "bench/peak_kernels.h"

#if defined(REPRISE_BENCH_AVX2)
#include <immintrin.h>

namespace reprise::bench::peak {

namespace {
float Sum(__m256 v) {
  __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  half = _mm_add_ps(half, _mm_movehl_ps(half, half));
  half = _mm_add_ss(half, _mm_movehdup_ps(half));
  return _mm_cvtss_f32(half);
}
}  // namespace

float FmaLoopAvx2(int64_t iterations, double* flops) {
  constexpr int kChains = 12;  // 16 ymm registers: 12 chains and the two operands
  volatile float seed_a = 0.999999f;
  volatile float seed_b = 1e-6f;
  const __m256 a = _mm256_set1_ps(seed_a);
  const __m256 b = _mm256_set1_ps(seed_b);
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  *flops = static_cast<double>(iterations) * kChains * 8 * 2;
  return Sum(sum);
}

namespace {
// kPrefetch: ask for the lines this far ahead into L2, as the decode kernels do.
constexpr size_t kAheadFloats = 1024;  // 4 KiB

template <bool kPrefetch>
float ReadSum(const float* data, size_t count) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (size_t i = 0; i < count; i += 128) {
    if (kPrefetch && i + kAheadFloats < count) {
      for (int k = 0; k < 8; ++k) {
        _mm_prefetch(reinterpret_cast<const char*>(data + i + kAheadFloats + 16 * k), _MM_HINT_T1);
      }
    }
    for (int k = 0; k < 8; ++k) {
      acc[k] = _mm256_add_ps(acc[k], _mm256_add_ps(_mm256_load_ps(data + i + 16 * k),
                                                   _mm256_load_ps(data + i + 16 * k + 8)));
    }
  }
  for (int k = 1; k < 8; ++k) acc[0] = _mm256_add_ps(acc[0], acc[k]);
  return Sum(acc[0]);
}
}  // namespace

float ReadSumAvx2(const float* data, size_t count) { return ReadSum<false>(data, count); }
float ReadSumPrefetchAvx2(const float* data, size_t count) { return ReadSum<true>(data, count); }

}  // namespace reprise::bench::peak
#endif
