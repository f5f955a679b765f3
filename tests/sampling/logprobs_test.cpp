// LogSoftmax and TopEntries against direct computation.
#include "sampling/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace reprise {
namespace {

TEST(LogSoftmaxTest, ExponentsSumToOneAndDifferencesAreKept) {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 30.0f, 30.0f};
  std::vector<float> out;
  LogSoftmax(logits, out);
  ASSERT_EQ(out.size(), logits.size());
  double sum = 0;
  for (float value : out) sum += std::exp(static_cast<double>(value));
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_NEAR(out[0] - out[1], 3.0f, 1e-5);
  EXPECT_NEAR(out[3], std::log(0.5), 1e-5);  // two equal logits far above the rest
}

TEST(LogSoftmaxTest, LargeLogitsDoNotOverflow) {
  std::vector<float> logits = {1000.0f, 999.0f};
  std::vector<float> out;
  LogSoftmax(logits, out);
  EXPECT_NEAR(out[0], -std::log1p(std::exp(-1.0)), 1e-5);
  EXPECT_TRUE(std::isfinite(out[1]));
}

TEST(TopEntriesTest, LargestFirstLowerIndexOnTies) {
  std::vector<float> values = {0.1f, 0.9f, 0.5f, 0.9f, -3.0f};
  auto top = TopEntries(values, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);
  EXPECT_EQ(top[1].first, 3);
  EXPECT_EQ(top[2].first, 2);
  EXPECT_FLOAT_EQ(top[2].second, 0.5f);
  EXPECT_TRUE(TopEntries(values, 0).empty());
  EXPECT_EQ(TopEntries(values, 99).size(), values.size());
  EXPECT_EQ(TopEntries(values, 99).back().first, 4);
}

}  // namespace
}  // namespace reprise
