// The online softmax of the AVX-512 PagedAttention kernels, written once: its exp and its step
// over one span of positions (the f32/f16 kernel's; the q8 kernel codes its probabilities in a
// step of its own), and the rows' last normalization (both). Include only from files compiled
// for AVX-512.
#pragma once

#include <algorithm>
#include <limits>

#include "kernels/paged_attention_internal.h"
#include "kernels/reduce_avx512.h"
#include "kernels/simd.h"

namespace reprise::kernels {

// A row's scores of one softmax span, kScoreStride floats apart.
inline constexpr int kScoreStride = std::max(kMaxAttentionBlockSize, kSoftmaxSpanPositions);

inline __mmask16 ChunkMask(int length, int offset) {
  const int n = std::min(16, length - offset);
  return static_cast<__mmask16>((1u << n) - 1);
}

// exp(x) for x <= 0 (Cephes' expf polynomial, about 1 ulp; deterministic): x = n ln2 + r,
// e^r by a degree-7 polynomial, times 2^n. Arguments below -104 give 0.
inline __m512 ExpNonPositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

// exp(x - m) for finite x and m, as 2^t with t = x log2(e) - m log2(e) in one fused step, t = n + f
// with f in [-1/2, 1/2], 2^f by a polynomial of degree kDegree interpolating at Chebyshev nodes,
// times 2^n. Very negative t gives 0. `m_log2e`: m x log2(e). Degree 5: 2.3e-7 relative (about
// ExpNonPositive's accuracy in five steps fewer than its clamp, split of n ln 2 and degree-7
// polynomial); degree 4: 3.5e-6, for probabilities that become 8-bit codes.
template <int kDegree>
inline __m512 ExpOfDifference(__m512 x, __m512 m_log2e) {
  static_assert(kDegree == 4 || kDegree == 5);
  const __m512 t = _mm512_fmsub_ps(x, _mm512_set1_ps(1.44269504088896341f), m_log2e);
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p;
  if constexpr (kDegree == 5) {
    p = _mm512_set1_ps(0.00133908633f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.00967603177f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.0555035695f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.240221068f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.693147182f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.00000012f));
  } else {
    p = _mm512_set1_ps(0.00966636837f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.0559219755f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.240223497f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.693121016f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  }
  return _mm512_scalef_ps(p, n);
}

// The online-softmax step of rows [first_row, num_rows) over `span`, whose scores are in
// scores[r * kScoreStride + j] (a row's own positions in the span: j < state.PositionsIn(span, r)):
// first each row's new max, then the corrections exp(old max - new max) of 16 rows per
// ExpNonPositive (the same lane operations as one row's, so the same values; one row at a time,
// each waited on its own exp's dependency chain), then each row's probabilities (written over its
// scores), sum, and accumulators times the correction.
inline void SoftmaxSpanStep(AttentionRows& state, int head_dim, int first_row,
                            const SoftmaxSpan& span, float* scores) {
  const int num_rows = state.num_rows;
  float span_max[kMaxAttentionRows];
  alignas(64) float corrections[kMaxAttentionRows + 16];
  for (int r = first_row; r < num_rows; ++r) {
    const int n = state.PositionsIn(span, r);
    const float* row = scores + r * kScoreStride;
    const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __m512 maxes = minus_inf;  // a max is exact in any order
    int j = 0;
    for (; j + 16 <= n; j += 16) maxes = _mm512_max_ps(maxes, _mm512_loadu_ps(row + j));
    for (; j < n; j += 16) {
      maxes = _mm512_max_ps(maxes, _mm512_mask_loadu_ps(minus_inf, ChunkMask(n, j), row + j));
    }
    span_max[r] = std::max(state.running_max[r], _mm512_reduce_max_ps(maxes));
  }
  for (int r = first_row; r < num_rows; r += 16) {
    const __mmask16 mask = ChunkMask(num_rows - r, 0);
    const __m512 old_max = _mm512_maskz_loadu_ps(mask, state.running_max + r);
    const __m512 new_max = _mm512_maskz_loadu_ps(mask, span_max + r);
    _mm512_store_ps(corrections + (r - first_row),
                    ExpNonPositive(_mm512_maskz_sub_ps(mask, old_max, new_max)));
  }
  for (int r = first_row; r < num_rows; ++r) {
    const int n = state.PositionsIn(span, r);
    float* row = scores + r * kScoreStride;
    const float new_max = span_max[r];
    const float correction = corrections[r - first_row];
    // The span's probabilities summed lane-wise over its 16-slot chunks, then by the fixed tree
    // of HorizontalSum.
    // exp(s - max) of the difference taken first (exact for scores near the max), not in the
    // fused step: that rounds max x log2(e), an error of |max| x 2^-24 in every exponent of
    // the span, where a q8 probability's 8-bit code would not see it.
    const __m512 max = _mm512_set1_ps(new_max);
    const __m512 zero = _mm512_setzero_ps();
    __m512 sums = _mm512_setzero_ps();
    int j = 0;
    for (; j + 16 <= n; j += 16) {  // whole chunks: the operations below, unmasked
      const __m512 e = ExpOfDifference<5>(_mm512_sub_ps(_mm512_loadu_ps(row + j), max), zero);
      _mm512_storeu_ps(row + j, e);
      sums = _mm512_add_ps(sums, e);
    }
    for (; j < n; j += 16) {
      const __mmask16 mask = ChunkMask(n, j);
      const __m512 e =
          ExpOfDifference<5>(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, row + j), max), zero);
      _mm512_mask_storeu_ps(row + j, mask, e);
      sums = _mm512_mask_add_ps(sums, mask, sums, e);
    }
    state.running_max[r] = new_max;
    state.running_sum[r] = state.running_sum[r] * correction + HorizontalSum(sums);
    if (correction == 1.0f) continue;  // the max held: acc * 1 is acc
    float* acc = state.out_rows[r];
    const __m512 c = _mm512_set1_ps(correction);
    for (int d = 0; d < head_dim; d += 16) {
      const __mmask16 mask = ChunkMask(head_dim, d);
      _mm512_mask_storeu_ps(acc + d, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, acc + d), c));
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
    const __m512 inverse = _mm512_set1_ps(1.0f / state.running_sum[r]);
    float* acc = state.out_rows[r];
    for (int d = 0; d < head_dim; d += 16) {
      const __mmask16 mask = ChunkMask(head_dim, d);
      _mm512_mask_storeu_ps(acc + d, mask,
                            _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, acc + d), inverse));
    }
  }
}

}  // namespace reprise::kernels
