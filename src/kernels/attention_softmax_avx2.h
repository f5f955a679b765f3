// The online softmax of the AVX2 PagedAttention kernels (f32/f16 and q8 K/V), written once: its
// exp, its step over one span of blocks, and the rows' last normalization, with the masks and
// row helpers they use. Include only from files compiled for AVX2.
#pragma once

#include <algorithm>
#include <limits>

#include "kernels/paged_attention_internal.h"
#include "kernels/reduce_avx2.h"
#include "kernels/simd.h"

// In a namespace of its own: the AVX-512 header has functions of the same names and roles.
namespace reprise::kernels::avx2 {

// exp(x) for x <= 0 (Cephes' expf polynomial, as the AVX-512 kernel's, about 1 ulp;
// deterministic). Arguments below -87 are taken as -87 (about 1.6e-38, where the AVX-512 kernel
// gives 0), which keeps 2^n a normal number.
inline __m256 ExpNonPositive(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(bits));  // y * 2^n, exact
}

// acc row: min(8, n) floats from p (zeros elsewhere), and back.
inline __m256 LoadAcc(const float* p, int n) {
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, LaneMask(n));
}
inline void StoreAcc(float* p, int n, __m256 v) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
  } else {
    _mm256_maskstore_ps(p, LaneMask(n), v);
  }
}

// A row's scores of one softmax span, kSpanScoreStride floats apart.
inline constexpr int kSpanScoreStride = std::max(kMaxAttentionBlockSize, kSoftmaxSpanPositions);

// The online-softmax step of rows [first_row, num_rows) over `span`, whose
// scores are in scores[r * kSpanScoreStride + j] (a row's own positions in the span:
// j < state.PositionsIn(span, r)): first each row's new max, then the corrections
// exp(old max - new max) of 8 rows per ExpNonPositive (the same lane operations as one row's, so
// the same values, without a dependency chain per row), then each row's probabilities (written
// over its scores), sum, and accumulators times the correction.
inline void SoftmaxSpanStep(AttentionRows& state, int head_dim, int first_row,
                            const SoftmaxSpan& span, float* scores) {
  const int num_rows = state.num_rows;
  alignas(32) float span_max[kMaxAttentionRows + 8];
  alignas(32) float corrections[kMaxAttentionRows + 8];
  const __m256 minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int r = first_row; r < num_rows; ++r) {
    const int n = state.PositionsIn(span, r);
    const float* row = scores + r * kSpanScoreStride;
    __m256 maxes = minus_inf;  // a max is exact in any order
    int j = 0;
    for (; j + 8 <= n; j += 8) maxes = _mm256_max_ps(maxes, _mm256_load_ps(row + j));
    if (j < n) {
      const __m256 live = _mm256_castsi256_ps(LaneMask(n - j));
      maxes = _mm256_max_ps(maxes, _mm256_blendv_ps(minus_inf, _mm256_load_ps(row + j), live));
    }
    span_max[r] = std::max(state.running_max[r], HorizontalMax(maxes));
  }
  for (int r = first_row; r < num_rows; r += 8) {
    const __m256i mask = LaneMask(num_rows - r);
    const __m256 old_max = _mm256_maskload_ps(state.running_max + r, mask);
    const __m256 new_max = _mm256_maskload_ps(span_max + r, mask);
    // Lanes past num_rows hold 0 - 0: their exp is computed and never read.
    _mm256_store_ps(corrections + (r - first_row), ExpNonPositive(_mm256_sub_ps(old_max, new_max)));
  }
  for (int r = first_row; r < num_rows; ++r) {
    const int n = state.PositionsIn(span, r);
    float* row = scores + r * kSpanScoreStride;
    const float correction = corrections[r - first_row];
    // The span's probabilities summed lane-wise over its 8-slot chunks, then by the fixed tree of
    // HorizontalSum (0 in the lanes past n, which adds exactly nothing). Whole chunks take no
    // mask.
    const __m256 max = _mm256_set1_ps(span_max[r]);
    __m256 sums = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m256 e = ExpNonPositive(_mm256_sub_ps(_mm256_load_ps(row + j), max));
      _mm256_store_ps(row + j, e);
      sums = _mm256_add_ps(sums, e);
    }
    if (j < n) {
      const __m256 live = _mm256_castsi256_ps(LaneMask(n - j));
      const __m256 e =
          _mm256_and_ps(ExpNonPositive(_mm256_sub_ps(_mm256_load_ps(row + j), max)), live);
      _mm256_store_ps(row + j, e);
      sums = _mm256_add_ps(sums, e);
    }
    state.running_max[r] = span_max[r];
    state.running_sum[r] = state.running_sum[r] * correction + HorizontalSum(sums);
    if (correction == 1.0f) continue;  // the max held: acc * 1 is acc
    float* acc = state.out_rows[r];
    const __m256 c = _mm256_set1_ps(correction);
    for (int d = 0; d < head_dim; d += 8) {
      const int m = std::min(8, head_dim - d);
      StoreAcc(acc + d, m, _mm256_mul_ps(LoadAcc(acc + d, m), c));
    }
  }
}

// The end of a kernel call: each row's out = acc * (1 / sum), or, for a split (blocks.max set),
// its running max and sum handed out with acc left as it is.
inline void FinishRows(const AttentionRows& state, int head_dim, const AttentionBlocks& blocks) {
  const int num_rows = state.num_rows;
  if (blocks.max != nullptr) {  // a split's partial state, merged later
    for (int r = 0; r < num_rows; ++r) {
      blocks.max[r] = state.running_max[r];
      blocks.sum[r] = state.running_sum[r];
    }
    return;
  }
  for (int r = 0; r < num_rows; ++r) {
    const __m256 inverse = _mm256_set1_ps(1.0f / state.running_sum[r]);
    float* acc = state.out_rows[r];
    for (int d = 0; d < head_dim; d += 8) {
      const int m = std::min(8, head_dim - d);
      StoreAcc(acc + d, m, _mm256_mul_ps(LoadAcc(acc + d, m), inverse));
    }
  }
}

}  // namespace reprise::kernels::avx2
