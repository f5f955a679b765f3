#include "kernels/weight_type.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace reprise::kernels {
namespace {

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

TEST(KernelWeightTypeTest, Geometry) {
  EXPECT_EQ(BlockElements(WeightType::kF32), 1u);
  EXPECT_EQ(BlockBytes(WeightType::kF16), 2u);
  EXPECT_EQ(BlockBytes(WeightType::kBF16), 2u);
  EXPECT_EQ(BlockElements(WeightType::kQ4_0), 32u);
  EXPECT_EQ(BlockBytes(WeightType::kQ4_0), 18u);
  EXPECT_EQ(BlockBytes(WeightType::kQ4_1), 20u);
  EXPECT_EQ(BlockBytes(WeightType::kQ5_0), 22u);
  EXPECT_EQ(BlockBytes(WeightType::kQ5_1), 24u);
  EXPECT_EQ(BlockBytes(WeightType::kQ8_0), 34u);
  EXPECT_EQ(BlockElements(WeightType::kQ4_K), 256u);
  EXPECT_EQ(BlockBytes(WeightType::kQ4_K), 144u);
  EXPECT_EQ(BlockBytes(WeightType::kQ5_K), 176u);
  EXPECT_EQ(BlockBytes(WeightType::kQ6_K), 210u);
  EXPECT_EQ(RowBytes(WeightType::kQ4_K, 4096), 16u * 144u);
  EXPECT_EQ(RowBytes(WeightType::kF16, 7), 14u);
  EXPECT_ANY_THROW(RowBytes(WeightType::kQ8_0, 33));
  EXPECT_EQ(WeightTypeName(WeightType::kQ6_K), "Q6_K");
  EXPECT_TRUE(IsSupportedWeightType(30));
  EXPECT_FALSE(IsSupportedWeightType(4));
  EXPECT_FALSE(IsSupportedWeightType(10));
}

TEST(KernelHalfTest, EdgeCases) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // tie rounds to even: up to infinity
  EXPECT_EQ(FloatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie to even (2)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);  // 0.75 units
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -26)), 0x8000);
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.0f, -24)), 0x03FF);      // largest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(2047.0f, -25)), 0x0400);      // rounds up into the normals
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie, even stays
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie, odd rounds up
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  // A signalling NaN whose payload sits only in low bits must stay a NaN.
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(FromBits(0x7F800001u)))));
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7C00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(Bits(HalfToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
}

TEST(KernelHalfTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float value = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(value)))) << h;
      continue;
    }
    EXPECT_EQ(FloatToHalf(value), h) << h;
  }
}

// For random floats in the half range, the result is the nearest half, ties to even.
TEST(KernelHalfTest, RoundsToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0x477FEFFFu);  // below the overflow threshold
  for (int i = 0; i < 200000; ++i) {
    float value = FromBits(bits(rng));
    uint16_t h = FloatToHalf(value);
    double got = HalfToFloat(h);
    double below = h > 0 ? HalfToFloat(static_cast<uint16_t>(h - 1)) : -1.0;
    double above = HalfToFloat(static_cast<uint16_t>(h + 1));
    double error = std::fabs(got - value);
    ASSERT_LE(error, std::fabs(above - value)) << value;
    if (h > 0) {
      ASSERT_LE(error, std::fabs(below - value)) << value;
    }
    if (error == std::fabs(above - value) || (h > 0 && error == std::fabs(below - value))) {
      ASSERT_EQ(h & 1, 0) << value;
    }
  }
}

// FloatsToHalves (F16C where present) gives FloatToHalf's bits: every exponent with random
// mantissas and signs (NaNs, infinities, denormals and the overflow edge included), at lengths
// that leave a scalar tail.
TEST(KernelHalfTest, BatchConversionMatchesScalar) {
  std::mt19937 rng(3);
  std::vector<float> values;
  for (uint32_t exponent = 0; exponent < 256; ++exponent) {
    for (int k = 0; k < 64; ++k) {
      const uint32_t bits = (rng() & 0x80000000u) | (exponent << 23) | (rng() & 0x7FFFFFu);
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      values.push_back(value);
    }
  }
  for (float edge : {65504.0f, 65519.99f, 65520.0f, 5.9604645e-8f, 2.9802322e-8f, -0.0f}) {
    values.push_back(edge);
  }
  for (size_t n : {values.size(), size_t{7}, size_t{13}}) {
    std::vector<uint16_t> batch(n);
    FloatsToHalves(values.data(), static_cast<int64_t>(n), batch.data());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(batch[i], FloatToHalf(values[i])) << "value " << values[i] << " at " << i;
    }
  }
}

TEST(KernelBfloat16Test, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBfloat16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBfloat16(FromBits(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(FloatToBfloat16(FromBits(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(FloatToBfloat16(FromBits(0x3F808001u)), 0x3F81);
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to infinity
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(FloatToBfloat16(FromBits(0x00000001u)), 0x0000);  // denormal rounds to zero
  uint16_t nan = FloatToBfloat16(FromBits(0xFF800001u));      // payload only in the dropped bits
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(nan)));
  EXPECT_EQ(nan & 0x8000, 0x8000);
  EXPECT_EQ(Bfloat16ToFloat(0x4049), 3.140625f);
}

}  // namespace
}  // namespace reprise::kernels
