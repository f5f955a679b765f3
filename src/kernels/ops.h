// Element-wise and per-row operations of the llama forward pass. All are per row, with no
// reduction across rows, so a row's result never depends on the rest of the batch.
#pragma once

#include <cstdint>

#include "kernels/cpu_target.h"

namespace reprise::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]; x, weight, out: [n] (out may alias x).
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

enum class RopeStyle {
  kNormal,  // rotates adjacent pairs (x[2i], x[2i+1]): llama
  kNeox,    // rotates (x[i], x[i + rope_dim/2]): qwen2, NeoX
};

struct RopeParams {
  int head_dim = 0;
  int rope_dim = 0;  // leading dimensions of each head that rotate (usually head_dim)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // linear position scaling (1 = none)
  // [rope_dim/2] divisors of each frequency (Llama 3), or null
  const float* freq_factors = nullptr;
  RopeStyle style = RopeStyle::kNormal;
};

// Rotates every head of x in place for token position `position`. x: [num_heads][head_dim]
void Rope(float* x, int num_heads, int32_t position, const RopeParams& params);

// Rope in two halves, so that a forward pass computes a position's angles once for every layer
// and for both Q and K (the same bits as Rope):
//   RopeAngles writes cos_sin[2i] = cos(theta_i), cos_sin[2i + 1] = sin(theta_i), i < rope_dim/2;
//   RopeRotate rotates every head of x by those angles.
void RopeAngles(int32_t position, const RopeParams& params, float* cos_sin);
void RopeRotate(float* x, int num_heads, const float* cos_sin, const RopeParams& params);

// out[i] = silu(gate[i]) * up[i]; gate, up, out: [n] (out may alias gate). The same bits on
// every x86 target (the widest this CPU runs is used); SwiGluOnTarget names one (tests).
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);
void SwiGluOnTarget(CpuTarget target, const float* gate, const float* up, int64_t n, float* out);

// In-place softmax over x: [n].
void Softmax(float* x, int64_t n);

// out[i] = a[i] + b[i]; [n] (out may alias a).
void Add(const float* a, const float* b, int64_t n, float* out);

}  // namespace reprise::kernels
