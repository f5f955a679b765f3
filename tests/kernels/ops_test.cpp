#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
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
