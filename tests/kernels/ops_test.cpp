#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <vector>

#include "test_util.h"

namespace reprise::kernels {
namespace {

using testing::RandomValues;

TEST(KernelOpsTest, RmsNorm) {
  std::vector<float> x = RandomValues(100, 1, 3.0f);
  std::vector<float> weight = RandomValues(100, 2);
  std::vector<float> out(100);
  RmsNorm(x.data(), weight.data(), 100, 1e-5f, out.data());
  double sum = 0.0;
  for (float v : x) sum += double(v) * v;
  double inverse = 1.0 / std::sqrt(sum / 100 + 1e-5);
  for (int i = 0; i < 100; ++i) EXPECT_NEAR(out[i], x[i] * inverse * weight[i], 1e-5);
  // In place gives the same bits.
  std::vector<float> in_place = x;
  RmsNorm(in_place.data(), weight.data(), 100, 1e-5f, in_place.data());
  EXPECT_EQ(in_place, out);
}

// theta_i = position * freq_scale * base^(-2i / rope_dim) / factor_i, computed in double here.
void ExpectRope(RopeStyle style, const float* factors, int rope_dim) {
  const int head_dim = 16, heads = 3, position = 37;
  RopeParams params{.head_dim = head_dim,
                    .rope_dim = rope_dim,
                    .freq_base = 500000.0f,
                    .freq_scale = 0.5f,
                    .freq_factors = factors,
                    .style = style};
  std::vector<float> x = RandomValues(heads * head_dim, 3);
  std::vector<float> out = x;
  Rope(out.data(), heads, position, params);
  for (int h = 0; h < heads; ++h) {
    const float* in = x.data() + h * head_dim;
    const float* got = out.data() + h * head_dim;
    for (int i = 0; i < rope_dim / 2; ++i) {
      double theta = position * 0.5 * std::pow(500000.0, -2.0 * i / rope_dim);
      if (factors != nullptr) theta /= factors[i];
      int a = style == RopeStyle::kNormal ? 2 * i : i;
      int b = style == RopeStyle::kNormal ? 2 * i + 1 : i + rope_dim / 2;
      EXPECT_NEAR(got[a], in[a] * std::cos(theta) - in[b] * std::sin(theta), 1e-5);
      EXPECT_NEAR(got[b], in[a] * std::sin(theta) + in[b] * std::cos(theta), 1e-5);
    }
    for (int d = rope_dim; d < head_dim; ++d) EXPECT_EQ(got[d], in[d]);
  }
}

TEST(KernelOpsTest, RopeNormal) { ExpectRope(RopeStyle::kNormal, nullptr, 16); }
TEST(KernelOpsTest, RopeNeox) { ExpectRope(RopeStyle::kNeox, nullptr, 16); }
TEST(KernelOpsTest, RopePartialRotation) {
  ExpectRope(RopeStyle::kNeox, nullptr, 8);
  ExpectRope(RopeStyle::kNormal, nullptr, 8);
}
TEST(KernelOpsTest, RopeFreqFactors) {
  std::vector<float> factors = {1.0f, 2.0f, 4.0f, 8.0f, 1.5f, 1.0f, 3.0f, 1.0f};
  ExpectRope(RopeStyle::kNormal, factors.data(), 16);
  ExpectRope(RopeStyle::kNeox, factors.data(), 16);
}

TEST(KernelOpsTest, RopeAtPositionZeroIsIdentity) {
  std::vector<float> x = RandomValues(64, 4);
  std::vector<float> out = x;
  RopeParams params{.head_dim = 32, .rope_dim = 32};
  Rope(out.data(), 2, 0, params);
  EXPECT_EQ(out, x);
}

TEST(KernelOpsTest, SwiGlu) {
  std::vector<float> gate = RandomValues(50, 5, 4.0f);
  std::vector<float> up = RandomValues(50, 6);
  std::vector<float> out(50);
  SwiGlu(gate.data(), up.data(), 50, out.data());
  for (int i = 0; i < 50; ++i) {
    double g = gate[i];
    EXPECT_NEAR(out[i], g / (1.0 + std::exp(-g)) * up[i], 1e-6);
  }
}

// SwiGlu's own exp: within a few float ulps of the exact value over the whole range where silu
// is not yet g or 0 (and sane beyond it), and every element's bits independent of the length of
// the call and of its place in it (the tail goes through the same lanes).
TEST(KernelOpsTest, SwiGluIsAccurateOverTheRangeAndIndependentOfLength) {
  std::vector<float> gate, up;
  for (float g = -120.0f; g <= 120.0f; g += 0.0137f) {
    gate.push_back(g);
    up.push_back(1.0f + 0.001f * static_cast<float>(gate.size() % 7));
  }
  const auto n = static_cast<int64_t>(gate.size());
  std::vector<float> out(gate.size());
  SwiGlu(gate.data(), up.data(), n, out.data());
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double expected = g / (1.0 + std::exp(-g)) * up[i];
    if (std::fabs(expected) < 1e-30) {
      EXPECT_LT(std::fabs(out[i]), 1e-30) << "g = " << g;
      continue;
    }
    worst = std::max(worst, std::fabs(out[i] - expected) / std::fabs(expected));
  }
  EXPECT_LT(worst, 1e-6);
  for (int64_t length : {1, 2, 3, 5, 7}) {
    for (int64_t first = 0; first + length <= 40; first += 3) {
      std::vector<float> part(static_cast<size_t>(length));
      SwiGlu(gate.data() + first, up.data() + first, length, part.data());
      for (int64_t i = 0; i < length; ++i) ASSERT_EQ(part[i], out[first + i]) << first + i;
    }
  }
}

// Every target's SwiGlu (4, 8 or 16 lanes) gives the bits of the scalar target's, at every
// length and offset: elementwise, with the same operations per lane.
TEST(KernelOpsTest, SwiGluHasTheSameBitsOnEveryTarget) {
  std::vector<float> gate = RandomValues(1000, 11, 30.0f);
  const std::vector<float> up = RandomValues(1000, 12);
  gate[0] = 100.0f;
  gate[1] = -100.0f;
  gate[2] = 0.0f;
  gate[3] = -0.0f;
  gate[4] = 1e-30f;
  std::vector<float> expected(gate.size());
  SwiGluOnTarget(CpuTarget::kScalar, gate.data(), up.data(), 1000, expected.data());
  for (CpuTarget target : {CpuTarget::kAvx2, CpuTarget::kAvx512}) {
    if (!CpuTargetSupported(target)) {
      std::cout << CpuTargetName(target) << " not supported here: not compared\n";
      continue;
    }
    for (int64_t first : {0, 1, 5, 17}) {
      for (int64_t length :
           {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{8}, int64_t{15}, int64_t{16}, int64_t{17},
            int64_t{31}, int64_t{33}, int64_t{500}, 1000 - first}) {
        std::vector<float> out(static_cast<size_t>(length));
        SwiGluOnTarget(target, gate.data() + first, up.data() + first, length, out.data());
        for (int64_t i = 0; i < length; ++i) {
          ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(expected[first + i]))
              << CpuTargetName(target) << " element " << first + i;
        }
      }
    }
  }
}

TEST(KernelOpsTest, RopeAnglesThenRotateIsRope) {
  std::vector<float> factors = {1.0f, 2.0f, 4.0f, 8.0f, 1.5f, 1.0f, 3.0f, 1.0f};
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    RopeParams params{
        .head_dim = 16, .rope_dim = 16, .freq_factors = factors.data(), .style = style};
    std::vector<float> x = RandomValues(48, 8);
    std::vector<float> whole = x, halves = x;
    Rope(whole.data(), 3, 1234, params);
    std::vector<float> angles(16);
    RopeAngles(1234, params, angles.data());
    RopeRotate(halves.data(), 3, angles.data(), params);
    EXPECT_EQ(whole, halves);
  }
}

TEST(KernelOpsTest, RmsNormMatchesDouble) {
  for (int64_t n : {1, 3, 4, 7, 576, 1001}) {
    std::vector<float> x = RandomValues(static_cast<size_t>(n), 9, 3.0f);
    std::vector<float> w = RandomValues(static_cast<size_t>(n), 10);
    std::vector<float> out(static_cast<size_t>(n));
    RmsNorm(x.data(), w.data(), n, 1e-5f, out.data());
    double squares = 0.0;
    for (float v : x) squares += static_cast<double>(v) * v;
    const double inverse = 1.0 / std::sqrt(squares / static_cast<double>(n) + 1e-5);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(out[i], x[i] * inverse * w[i], 1e-5 * std::fabs(x[i] * inverse * w[i]) + 1e-7);
    }
  }
}

TEST(KernelOpsTest, Softmax) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 1000.0f, -1000.0f};
  Softmax(x.data(), 5);
  double total = 0.0;
  for (float v : x) total += v;
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_NEAR(x[3], 1.0f, 1e-6);
  std::vector<float> y = {0.0f, std::log(3.0f)};
  Softmax(y.data(), 2);
  EXPECT_NEAR(y[0], 0.25f, 1e-6);
  EXPECT_NEAR(y[1], 0.75f, 1e-6);
}

TEST(KernelOpsTest, Add) {
  std::vector<float> a = {1.0f, 2.0f}, b = {0.5f, -3.0f};
  Add(a.data(), b.data(), 2, a.data());
  EXPECT_EQ(a, (std::vector<float>{1.5f, -1.0f}));
}

}  // namespace
}  // namespace reprise::kernels
