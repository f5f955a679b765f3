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
__attribute__((always_inline)) inline void Unroll(const F& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) __attribute__((always_inline)) {
    (f(std::integral_constant<int, I>{}), ...);
  }
  (std::make_integer_sequence<int, N>());
}

// Marks v as changed here, so the compiler keeps a running sum a chain: left alone, GCC
// reassociates a long chain of vector adds into a tree, keeps every term live at once and spills
// them to the stack, which costs more load and store slots than the sum saves in latency.
template <typename V>
inline void KeepChain(V& v) {
  asm("" : "+x"(v));
}

// *p in every lane of a 256-bit vector, as vbroadcastss from memory. GCC takes
// _mm256_broadcast_ss(p) for an opaque access to any memory, which stops it from keeping a
// loop's accumulator arrays in registers (it stores them back on every pass); a plain load it
// can see through.
inline __m256 BroadcastFloat(const float* p) { return _mm256_broadcastss_ps(_mm_load_ss(p)); }

#if defined(__AVX512VNNI__)
// acc + the dot products of a's unsigned bytes with b's signed bytes, four per 32-bit lane
// (VPDPBUSD), as _mm512_dpbusd_epi32. GCC 12 gives that intrinsic's accumulator a register of
// its own and copies it there and back around every dot product of a loop that carries it (two
// moves per dot product), which halved the instruction's throughput (16 accumulators, Zen 5: 4.5
// against 8.5 dot products per ns); written as an instruction whose operand is the accumulator,
// it stays in place. `b` may be a memory operand.
inline __m512i DotBytes(__m512i acc, __m512i a, __m512i b) {
#if defined(__clang__)
  return _mm512_dpbusd_epi32(acc, a, b);
#else
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(b));
  return acc;
#endif
}
#endif

}  // namespace reprise::kernels
