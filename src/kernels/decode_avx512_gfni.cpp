// The one-token decode tiles of decode_tiles_avx512.h with packed 4-bit codes split by GFNI byte
// affine transforms: one operation where shifts take two or three per register of codes (the
// tiles' busiest ports on Intel cores). Compiled with GFNI; DecodeTileAvx512 calls in here only
// where the CPU has it.
#include "kernels/decode_tiles_avx512.h"

namespace reprise::kernels {

QuantTileRawFn DecodeTileAvx512Gfni(WeightType type, int nr) {
  const DecodeVariants* variants = DecodeVariantsFor<NibbleSplit::kGfni>(type);
  return variants == nullptr ? nullptr : (*variants)[nr - 1];
}

}  // namespace reprise::kernels
