#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"
#include "test_util.h"

namespace reprise::kernels {
namespace {

using testing::kAllTypes;
using testing::RandomValues;

// Root mean square error of a QuantizeRow -> DequantizeRow round trip, relative to the RMS of
// the input.
double RoundTripError(WeightType type, const std::vector<float>& values) {
  const int64_t cols = static_cast<int64_t>(values.size());
  std::vector<uint8_t> bytes(RowBytes(type, cols));
  QuantizeRow(type, values.data(), cols, bytes.data());
  std::vector<float> back(values.size());
  WeightView view{.type = type, .data = bytes.data(), .rows = 1, .cols = cols};
  DequantizeRow(view, 0, back.data());
  double error = 0.0, norm = 0.0;
  for (size_t i = 0; i < values.size(); ++i) {
    error += (back[i] - values[i]) * static_cast<double>(back[i] - values[i]);
    norm += values[i] * static_cast<double>(values[i]);
  }
  return std::sqrt(error / norm);
}

double ToleranceFor(WeightType type) {
  switch (type) {
    case WeightType::kF32:
      return 0.0;
    case WeightType::kF16:
      return 1e-3;
    case WeightType::kBF16:
      return 5e-3;
    case WeightType::kQ8_0:
      return 0.01;
    case WeightType::kQ6_K:
      return 0.04;
    case WeightType::kQ5_0:
    case WeightType::kQ5_1:
    case WeightType::kQ5_K:
      return 0.07;
    default:
      return 0.14;
  }
}

TEST(KernelQuantizeTest, RoundTripIsClose) {
  for (WeightType type : kAllTypes) {
    for (uint32_t seed : {1u, 2u, 3u}) {
      std::vector<float> values = RandomValues(1024, seed, 3.0f);
      // Some structure: a few outliers and a block of zeros.
      values[5] = 9.0f;
      values[300] = -7.5f;
      std::fill(values.begin() + 512, values.begin() + 768, 0.0f);
      EXPECT_LE(RoundTripError(type, values), ToleranceFor(type)) << WeightTypeName(type);
    }
  }
}

TEST(KernelQuantizeTest, AllZeroRowStaysZero) {
  for (WeightType type : kAllTypes) {
    std::vector<float> zeros(256, 0.0f);
    std::vector<uint8_t> bytes(RowBytes(type, 256));
    QuantizeRow(type, zeros.data(), 256, bytes.data());
    std::vector<float> back(256, 1.0f);
    WeightView view{.type = type, .data = bytes.data(), .rows = 1, .cols = 256};
    DequantizeRow(view, 0, back.data());
    for (float v : back) ASSERT_EQ(v, 0.0f) << WeightTypeName(type);
  }
}

// Random bytes make a valid block of every quantized type (scales are f16 bits we choose).
std::vector<uint8_t> RandomBlockBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

std::vector<float> Dequantize(WeightType type, const void* data, int64_t cols) {
  std::vector<float> out(cols);
  WeightView view{.type = type, .data = data, .rows = 1, .cols = cols};
  DequantizeRow(view, 0, out.data());
  return out;
}

// Expected values below follow ggml's dequantize_row_* definitions, element by element.

TEST(KernelDequantizeTest, Q4_0) {
  BlockQ4_0 block;
  block.d = FloatToHalf(0.5f);
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> out = Dequantize(WeightType::kQ4_0, &block, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], (j - 8) * 0.5f);
    EXPECT_EQ(out[j + 16], ((15 - j) - 8) * 0.5f);
  }
}

TEST(KernelDequantizeTest, Q4_1) {
  BlockQ4_1 block;
  block.d = FloatToHalf(0.25f);
  block.m = FloatToHalf(-1.5f);
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(((j * 3) % 16) | (j << 4));
  std::vector<float> out = Dequantize(WeightType::kQ4_1, &block, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], ((j * 3) % 16) * 0.25f + -1.5f);
    EXPECT_EQ(out[j + 16], j * 0.25f + -1.5f);
  }
}

TEST(KernelDequantizeTest, Q5_0AndQ5_1) {
  std::vector<uint8_t> bytes = RandomBlockBytes(sizeof(BlockQ5_1), 11);
  BlockQ5_0 b0;
  BlockQ5_1 b1;
  std::memcpy(b0.qh, bytes.data(), 4);
  std::memcpy(b0.qs, bytes.data() + 4, 16);
  std::memcpy(b1.qh, bytes.data(), 4);
  std::memcpy(b1.qs, bytes.data() + 4, 16);
  b0.d = b1.d = FloatToHalf(0.125f);
  b1.m = FloatToHalf(2.0f);
  uint32_t qh;
  std::memcpy(&qh, b0.qh, 4);
  std::vector<float> out0 = Dequantize(WeightType::kQ5_0, &b0, 32);
  std::vector<float> out1 = Dequantize(WeightType::kQ5_1, &b1, 32);
  for (int j = 0; j < 16; ++j) {
    int lo = (b0.qs[j] & 0xF) | (((qh >> j) & 1) << 4);
    int hi = (b0.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    EXPECT_EQ(out0[j], (lo - 16) * 0.125f);
    EXPECT_EQ(out0[j + 16], (hi - 16) * 0.125f);
    EXPECT_EQ(out1[j], lo * 0.125f + 2.0f);
    EXPECT_EQ(out1[j + 16], hi * 0.125f + 2.0f);
  }
}

TEST(KernelDequantizeTest, Q8_0) {
  BlockQ8_0 block;
  block.d = FloatToHalf(0.0625f);
  for (int j = 0; j < 32; ++j) block.qs[j] = static_cast<int8_t>(j * 8 - 128);
  std::vector<float> out = Dequantize(WeightType::kQ8_0, &block, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], (j * 8 - 128) * 0.0625f);
}

// ggml's get_scale_min_k4, restated.
void ScaleMin(int j, const uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

TEST(KernelDequantizeTest, Q4_KAndQ5_K) {
  for (uint32_t seed : {21u, 22u}) {
    std::vector<uint8_t> bytes = RandomBlockBytes(sizeof(BlockQ5_K), seed);
    BlockQ4_K b4;
    BlockQ5_K b5;
    std::memcpy(&b5, bytes.data(), sizeof(b5));
    b5.d = FloatToHalf(0.01f);
    b5.dmin = FloatToHalf(0.02f);
    b4.d = b5.d;
    b4.dmin = b5.dmin;
    std::memcpy(b4.scales, b5.scales, 12);
    std::memcpy(b4.qs, b5.qs, 128);
    std::vector<float> out4 = Dequantize(WeightType::kQ4_K, &b4, 256);
    std::vector<float> out5 = Dequantize(WeightType::kQ5_K, &b5, 256);
    float d = HalfToFloat(b4.d), dmin = HalfToFloat(b4.dmin);
    for (int e = 0; e < 256; ++e) {
      int sub = e / 32, l = e % 32;
      int sc, m;
      ScaleMin(sub, b4.scales, &sc, &m);
      uint8_t byte = b4.qs[(sub / 2) * 32 + l];
      int q4 = sub % 2 == 0 ? (byte & 0xF) : (byte >> 4);
      int q5 = q4 + (((b5.qh[l] >> sub) & 1) ? 16 : 0);
      float d1 = d * sc, m1 = dmin * m;
      EXPECT_EQ(out4[e], d1 * q4 - m1) << e;
      EXPECT_EQ(out5[e], d1 * q5 - m1) << e;
    }
  }
}

TEST(KernelDequantizeTest, Q6_K) {
  std::vector<uint8_t> bytes = RandomBlockBytes(sizeof(BlockQ6_K), 31);
  BlockQ6_K block;
  std::memcpy(&block, bytes.data(), sizeof(block));
  block.d = FloatToHalf(0.003f);
  std::vector<float> out = Dequantize(WeightType::kQ6_K, &block, 256);
  float d = HalfToFloat(block.d);
  for (int e = 0; e < 256; ++e) {
    int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
    const uint8_t* ql = block.ql + 64 * half;
    uint8_t qh = block.qh[32 * half + l];
    int low = quarter == 0   ? (ql[l] & 0xF)
              : quarter == 1 ? (ql[l + 32] & 0xF)
              : quarter == 2 ? (ql[l] >> 4)
                             : (ql[l + 32] >> 4);
    int q = (low | (((qh >> (2 * quarter)) & 3) << 4)) - 32;
    EXPECT_EQ(out[e], d * block.scales[e / 16] * q) << e;
  }
}

TEST(KernelDequantizeTest, FloatTypes) {
  std::vector<float> values = {1.0f, -2.5f, 3.1415926f, 1e-6f};
  std::vector<uint16_t> halves, bf16s;
  for (float v : values) {
    halves.push_back(FloatToHalf(v));
    bf16s.push_back(FloatToBfloat16(v));
  }
  std::vector<float> f32 = Dequantize(WeightType::kF32, values.data(), 4);
  std::vector<float> f16 = Dequantize(WeightType::kF16, halves.data(), 4);
  std::vector<float> bf16 = Dequantize(WeightType::kBF16, bf16s.data(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(f32[i], values[i]);
    EXPECT_EQ(f16[i], HalfToFloat(halves[i]));
    EXPECT_EQ(bf16[i], Bfloat16ToFloat(bf16s[i]));
  }
}

TEST(KernelDequantizeTest, PicksTheRequestedRow) {
  testing::TestWeights w(WeightType::kQ4_K, 3, 512, 5);
  std::vector<float> row(512), expected(512);
  DequantizeRow(w.view, 2, row.data());
  WeightView third{.type = WeightType::kQ4_K,
                   .data = w.bytes.data() + 2 * RowBytes(WeightType::kQ4_K, 512),
                   .rows = 1,
                   .cols = 512};
  DequantizeRow(third, 0, expected.data());
  EXPECT_EQ(row, expected);
  EXPECT_ANY_THROW(DequantizeRow(w.view, 3, row.data()));
}

}  // namespace
}  // namespace reprise::kernels
