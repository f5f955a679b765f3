// <immintrin.h> for the SIMD kernel files. GCC 12's AVX-512 headers trip -Wuninitialized on their
// own _mm512_undefined_* placeholders when inlined (GCC PR105593); silence it for the header only.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
