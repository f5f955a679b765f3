// Weight and KV element types the kernels understand, with their block geometry, and scalar
// conversions between f32 and the 16-bit float formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace reprise::kernels {

// How a matrix's bytes are ordered in memory (row_groups.h describes the grouped layouts).
enum class WeightLayout {
  kRowMajor,    // as a GGUF file stores them: row after row
  kRowGroups,   // groups of 16 rows, a piece of each side by side (the AVX-512 tiles')
  kRowStreams,  // groups of 16 rows as two streams of 8 rows side by side (the AVX2 tiles')
};

// Numbered as ggml numbers them, so that model/ converts a GGUF tensor type by value.
enum class WeightType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

bool IsSupportedWeightType(uint32_t type);
size_t BlockElements(WeightType type);  // elements per quantization block (1 for float types)
size_t BlockBytes(WeightType type);     // bytes per block
size_t RowBytes(WeightType type, int64_t cols);  // cols must be a multiple of BlockElements
std::string_view WeightTypeName(WeightType type);

// IEEE half and bfloat16 conversions (round to nearest even), scalar and exact.
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t value);
// dst[i] = FloatToHalf(src[i]), with F16C where the CPU has it (the same bits: both round to
// nearest even, saturate to infinity at 65520 and keep a NaN's top payload bits, quieted).
void FloatsToHalves(const float* src, int64_t n, uint16_t* dst);
uint16_t FloatToBfloat16(float value);
inline float Bfloat16ToFloat(uint16_t value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

}  // namespace reprise::kernels
