#include "kernels/weight_type.h"

#include "core/error.h"
#include "kernels/cpu_target.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace reprise::kernels {

namespace {

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Shifts `value` right by `shift` (1..31) rounding to nearest, ties to even.
uint32_t ShiftRightRoundEven(uint32_t value, int shift) {
  uint32_t kept = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u))) ++kept;
  return kept;
}

}  // namespace

bool IsSupportedWeightType(uint32_t type) {
  switch (static_cast<WeightType>(type)) {
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
    case WeightType::kQ4_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_0:
    case WeightType::kQ5_1:
    case WeightType::kQ8_0:
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K:
      return true;
  }
  return false;
}

size_t BlockElements(WeightType type) {
  switch (type) {
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
      return 1;
    case WeightType::kQ4_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_0:
    case WeightType::kQ5_1:
    case WeightType::kQ8_0:
      return kQk;
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K:
      return kQkK;
  }
  REPRISE_CHECK(false, "unknown weight type {}", static_cast<uint32_t>(type));
}

size_t BlockBytes(WeightType type) {
  switch (type) {
    case WeightType::kF32:
      return 4;
    case WeightType::kF16:
    case WeightType::kBF16:
      return 2;
    case WeightType::kQ4_0:
      return sizeof(BlockQ4_0);
    case WeightType::kQ4_1:
      return sizeof(BlockQ4_1);
    case WeightType::kQ5_0:
      return sizeof(BlockQ5_0);
    case WeightType::kQ5_1:
      return sizeof(BlockQ5_1);
    case WeightType::kQ8_0:
      return sizeof(BlockQ8_0);
    case WeightType::kQ4_K:
      return sizeof(BlockQ4_K);
    case WeightType::kQ5_K:
      return sizeof(BlockQ5_K);
    case WeightType::kQ6_K:
      return sizeof(BlockQ6_K);
  }
  REPRISE_CHECK(false, "unknown weight type {}", static_cast<uint32_t>(type));
}

size_t RowBytes(WeightType type, int64_t cols) {
  size_t block = BlockElements(type);
  REPRISE_CHECK(cols >= 0 && static_cast<size_t>(cols) % block == 0,
                "{} columns is not a multiple of {}'s block of {}", cols, WeightTypeName(type),
                block);
  return static_cast<size_t>(cols) / block * BlockBytes(type);
}

std::string_view WeightTypeName(WeightType type) {
  switch (type) {
    case WeightType::kF32:
      return "F32";
    case WeightType::kF16:
      return "F16";
    case WeightType::kBF16:
      return "BF16";
    case WeightType::kQ4_0:
      return "Q4_0";
    case WeightType::kQ4_1:
      return "Q4_1";
    case WeightType::kQ5_0:
      return "Q5_0";
    case WeightType::kQ5_1:
      return "Q5_1";
    case WeightType::kQ8_0:
      return "Q8_0";
    case WeightType::kQ4_K:
      return "Q4_K";
    case WeightType::kQ5_K:
      return "Q5_K";
    case WeightType::kQ6_K:
      return "Q6_K";
  }
  return "unknown";
}

uint16_t FloatToHalf(float value) {
  uint32_t bits = FloatBits(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) {
    if (magnitude == 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u);
    // NaN: keep the top payload bits, force quiet so it cannot turn into infinity.
    return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  }
  // 65520 is half way between the largest half (65504) and 65536: ties to even go up.
  if (magnitude >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (magnitude >= 0x38800000u) {  // a normal half (>= 2^-14)
    uint32_t rebiased = magnitude - (112u << 23);
    return static_cast<uint16_t>(sign | ShiftRightRoundEven(rebiased, 13));
  }
  // Subnormal half: units of 2^-24. The float is m * 2^(e - 150) with the implicit bit in m.
  int exponent = static_cast<int>(magnitude >> 23);
  if (exponent < 102) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
  uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  return static_cast<uint16_t>(sign | ShiftRightRoundEven(mantissa, 126 - exponent));
}

void FloatsToHalves(const float* src, int64_t n, uint16_t* dst) {
#if defined(REPRISE_KERNELS_AVX2)
  if (CpuTargetSupported(CpuTarget::kAvx2)) {  // AVX2 here implies F16C (cpu_target.cpp)
    FloatsToHalvesF16c(src, n, dst);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

float HalfToFloat(uint16_t value) {
  uint32_t sign = static_cast<uint32_t>(value & 0x8000u) << 16;
  uint32_t exponent = (value >> 10) & 0x1Fu;
  uint32_t mantissa = value & 0x3FFu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return BitsToFloat(sign | FloatBits(magnitude));
  }
  if (exponent == 31) return BitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToBfloat16(float value) {
  uint32_t bits = FloatBits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN, sign and payload kept
  }
  uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace reprise::kernels
