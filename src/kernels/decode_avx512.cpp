// One-token decode tiles for AVX-512: rows read straight from their stored blocks (Q4_K, Q5_K,
// Q6_K, Q8_0, Q5_0, Q4_0), with the arithmetic of every quantized tile (quant_reads_avx512.h), so
// the same bits. The tiles are written in decode_tiles_avx512.h; this file instantiates them with
// nibbles split by shifts and picks them, or decode_avx512_gfni.cpp's where the CPU has GFNI.
//
// Arranged for a single token: the columns are walked in spans of 256 (a K-quant super-block, or
// eight blocks of 32), and each span's 16 group scales are multiplied by the token's 16 group
// scales once per span and row, where the general tile multiplies them per chunk of 64. The
// product is the same float (w_scale * x_scale of the lane's group); only where it is computed
// moves. Measured on one Zen 4 thread (k = 4096, weights in L2 or streamed alike: the tiles are
// compute-bound there): Q4_K 16.5 -> 17.9 GB/s, Q5_K 9.3 -> 19.3, Q6_K 15.5 -> 29.8, Q8_0 23.8 ->
// 29, Q5_0 10.0 -> 17.7. On an Intel core (Emerald Rapids) the shuffle port and scalar scale
// unpacking limited them; see KSubBlockScalesOfRows and LegacySpanScales.
#include "kernels/decode_tiles_avx512.h"

namespace reprise::kernels {

NibbleSplit BestNibbleSplit() {
  return __builtin_cpu_supports("gfni") ? NibbleSplit::kGfni : NibbleSplit::kShift;
}

QuantTileRawFn DecodeTileAvx512(WeightType type, int nr, NibbleSplit split) {
  if (split == NibbleSplit::kGfni) return DecodeTileAvx512Gfni(type, nr);
  const DecodeVariants* variants = DecodeVariantsFor<NibbleSplit::kShift>(type);
  return variants == nullptr ? nullptr : (*variants)[nr - 1];
}

}  // namespace reprise::kernels
