// The one integer form every quantized weight type is unpacked to before a product, so that one
// kernel per CPU target serves all of them. Internal to kernels/.
//
// A row of `cols` weights becomes
//   q:     [cols]      uint8 codes
//   scale: [cols / 16] f32, one per 16 consecutive elements
//   min:   [cols / 32] f32, one per 32 (only for types with an offset; see HasMin)
// and   weight[e] = scale[e / 16] * (q[e] - ZeroPoint(type)) + min[e / 32].
// The unpacking is exact (the formula gives ggml's dequantized values), so how a target unpacks
// never changes a result.
#pragma once

#include <cstdint>

#include "kernels/weight_type.h"

namespace reprise::kernels {

inline constexpr int kScaleGroup = 16;  // elements per `scale` entry
inline constexpr int kMinGroup = 32;    // elements per `min` entry

// The code subtracted before scaling: 8 for Q4_0, 16 for Q5_0, 32 for Q6_K, 128 for Q8_0 (whose
// signed values are stored offset by 128), else 0.
int ZeroPoint(WeightType type);
bool HasMin(WeightType type);  // Q4_1, Q5_1, Q4_K, Q5_K
// Whether both 16-groups of every block of 32 have the same scale: every quantized type but Q6_K.
bool ScalesPer32(WeightType type);
bool IsQuantized(WeightType type);

// Unpacks blocks [first_block, first_block + num_blocks) of one row of a quantized type.
// Outputs start at the first unpacked element: q [n], scale [n / 16], min [n / 32] (min may be
// null when !HasMin), n = num_blocks * BlockElements(type).
void UnpackBlocks(WeightType type, const void* row, int64_t first_block, int64_t num_blocks,
                  uint8_t* q, float* scale, float* min);

}  // namespace reprise::kernels
