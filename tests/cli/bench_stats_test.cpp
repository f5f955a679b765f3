// Percentiles and friends, checked against numpy's linear interpolation.
#include <gtest/gtest.h>

#include <cmath>

#include "cli/bench_stats.h"

namespace reprise::cli {
namespace {

TEST(BenchStatsTest, PercentileInterpolatesBetweenClosestRanks) {
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 100), 4);
  // numpy.percentile(range(1, 101), 99) == 99.01
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_NEAR(Percentile(hundred, 99), 99.01, 1e-9);
  EXPECT_NEAR(Percentile({10, 20, 30}, 25), 15, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({1, 2}, 150), 2);  // clamped
}

TEST(BenchStatsTest, EmptySamplesGiveNan) {
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
  EXPECT_TRUE(std::isnan(Median({})));
  EXPECT_TRUE(std::isnan(Mean({})));
  EXPECT_TRUE(std::isnan(Min({})));
  EXPECT_TRUE(std::isnan(Max({})));
}

TEST(BenchStatsTest, MedianMeanMinMaxRatio) {
  EXPECT_DOUBLE_EQ(Median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(Mean({1, 2, 3, 6}), 3);
  EXPECT_DOUBLE_EQ(Min({3, -1, 2}), -1);
  EXPECT_DOUBLE_EQ(Max({3, -1, 2}), 3);
  EXPECT_DOUBLE_EQ(Ratio(3, 2), 1.5);
  EXPECT_TRUE(std::isnan(Ratio(1, 0)));
  EXPECT_TRUE(std::isnan(Ratio(std::nan(""), 1)));
}

}  // namespace
}  // namespace reprise::cli
