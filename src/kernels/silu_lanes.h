// silu(g) * u over vectors of any x86 width, written once so that SSE2, AVX2 and AVX-512 give
// every element the same bits (the same IEEE operations per lane, none fused). Internal to
// kernels/: included by ops.cpp (SSE2) and by the files of the wider targets.
#pragma once

#include <algorithm>
#include <cstdint>

namespace reprise::kernels {

// silu(g) * u = g / (1 + e^-g) * u per lane, e^x by Cephes' expf polynomial (about 1 ulp;
// arguments clamped to [-87, 88], where neither the result nor 2^n leave the normal floats),
// with no libm call. Lanes: Vec; kLanes; Set(float), Zero(); Add, Sub, Mul, Div, Min, Max;
// ToInt (to the target's integer vector, rounding to nearest: the MXCSR's default), ToFloat;
// TwoToThe(n) = 2^n for n in range; Load, Store (unaligned).
template <typename Lanes>
inline typename Lanes::Vec SiluTimes(typename Lanes::Vec g, typename Lanes::Vec u) {
  using Vec = typename Lanes::Vec;
  // x = -g, clamped
  const Vec x =
      Lanes::Min(Lanes::Max(Lanes::Sub(Lanes::Zero(), g), Lanes::Set(-87.0f)), Lanes::Set(88.0f));
  // n = round(x / ln2), r = x - n ln2 in two parts, the first exact.
  const auto n_int = Lanes::ToInt(Lanes::Mul(x, Lanes::Set(1.44269504088896341f)));
  const Vec n = Lanes::ToFloat(n_int);
  Vec r = Lanes::Sub(x, Lanes::Mul(n, Lanes::Set(0.693359375f)));
  r = Lanes::Sub(r, Lanes::Mul(n, Lanes::Set(-2.12194440e-4f)));
  Vec p = Lanes::Set(1.9875691500e-4f);
  p = Lanes::Add(Lanes::Mul(p, r), Lanes::Set(1.3981999507e-3f));
  p = Lanes::Add(Lanes::Mul(p, r), Lanes::Set(8.3334519073e-3f));
  p = Lanes::Add(Lanes::Mul(p, r), Lanes::Set(4.1665795894e-2f));
  p = Lanes::Add(Lanes::Mul(p, r), Lanes::Set(1.6666665459e-1f));
  p = Lanes::Add(Lanes::Mul(p, r), Lanes::Set(5.0000001201e-1f));
  const Vec y = Lanes::Add(Lanes::Add(Lanes::Mul(p, Lanes::Mul(r, r)), r), Lanes::Set(1.0f));
  const Vec e = Lanes::Mul(y, Lanes::TwoToThe(n_int));
  return Lanes::Mul(Lanes::Div(g, Lanes::Add(Lanes::Set(1.0f), e)), u);
}

// out[i] = silu(gate[i]) * up[i] (out may alias gate), the tail through the same lanes.
template <typename Lanes>
void SwiGluLanes(const float* gate, const float* up, int64_t n, float* out) {
  constexpr int kLanes = Lanes::kLanes;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Lanes::Store(out + i, SiluTimes<Lanes>(Lanes::Load(gate + i), Lanes::Load(up + i)));
  }
  if (i < n) {
    float g[kLanes] = {}, u[kLanes] = {}, result[kLanes];
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    Lanes::Store(result, SiluTimes<Lanes>(Lanes::Load(g), Lanes::Load(u)));
    std::copy(result, result + (n - i), out + i);
  }
}

// The wider targets' SwiGlu (ops_avx2.cpp, ops_avx512.cpp), where built.
void SwiGluAvx2(const float* gate, const float* up, int64_t n, float* out);
void SwiGluAvx512(const float* gate, const float* up, int64_t n, float* out);

}  // namespace reprise::kernels
