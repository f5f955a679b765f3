// <immintrin.h> for the SIMD kernel files. GCC 12's AVX-512 headers trip -Wuninitialized on their
// own _mm512_undefined_* placeholders when inlined (GCC PR105593); silence it for the header only.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <type_traits>
#include <utility>

namespace reprise::kernels {

// f(std::integral_constant<int, i>{}) for i = 0 .. N - 1, unrolled: the index is a constant in
// the body, as intrinsics' immediates and register arrays need.
template <int N, typename F>
inline void Unroll(const F& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }
  (std::make_integer_sequence<int, N>());
}

}  // namespace reprise::kernels
