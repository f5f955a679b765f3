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

std::vector<double> OneTo(int n) {
  std::vector<double> values;
  for (int i = n; i >= 1; --i) values.push_back(i);  // unsorted on purpose
  return values;
}

// Ranks from the binomial tail, checked against Python's math.comb: the classic [x_(2), x_(9)]
// for 10 samples, and the ranks the unique benchmark's 36 and 48 pairs get.
TEST(BenchStatsTest, MedianIntervalTakesOrderStatisticsFromTheBinomialTail) {
  Interval ten = MedianInterval(OneTo(10));
  EXPECT_DOUBLE_EQ(ten.low, 2);
  EXPECT_DOUBLE_EQ(ten.high, 9);
  Interval six = MedianInterval(OneTo(6));
  EXPECT_DOUBLE_EQ(six.low, 1);
  EXPECT_DOUBLE_EQ(six.high, 6);
  Interval thirty_six = MedianInterval(OneTo(36));
  EXPECT_DOUBLE_EQ(thirty_six.low, 12);
  EXPECT_DOUBLE_EQ(thirty_six.high, 25);
  Interval forty_eight = MedianInterval(OneTo(48));
  EXPECT_DOUBLE_EQ(forty_eight.low, 17);
  EXPECT_DOUBLE_EQ(forty_eight.high, 32);
  Interval hundred = MedianInterval(OneTo(100));
  EXPECT_DOUBLE_EQ(hundred.low, 40);
  EXPECT_DOUBLE_EQ(hundred.high, 61);
  // A lower confidence narrows it: 10 samples at 80% give [x_(3), x_(8)] (P(B <= 2) = 0.055).
  Interval eighty = MedianInterval(OneTo(10), 0.80);
  EXPECT_DOUBLE_EQ(eighty.low, 3);
  EXPECT_DOUBLE_EQ(eighty.high, 8);
}

TEST(BenchStatsTest, MedianIntervalNeedsEnoughSamples) {
  Interval five = MedianInterval(OneTo(5));
  EXPECT_TRUE(std::isnan(five.low));
  EXPECT_TRUE(std::isnan(five.high));
  EXPECT_TRUE(std::isnan(MedianInterval({}).low));
}

}  // namespace
}  // namespace reprise::cli
