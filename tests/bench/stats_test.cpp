// Percentiles and friends, checked against numpy's linear interpolation.
#include "bench/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace reprise::bench {
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

TEST(BenchStatsTest, RocAucCountsOrderedPairsWithTiesAsHalf) {
  EXPECT_DOUBLE_EQ(RocAuc({3, 4}, {1, 2}), 1.0);
  EXPECT_DOUBLE_EQ(RocAuc({1, 2}, {3, 4}), 0.0);
  EXPECT_DOUBLE_EQ(RocAuc({1, 1}, {1, 1}), 0.5);
  // 3 beats 1 and 2, 1 ties 1 and loses to 2: (2 + 0.5) / 4.
  EXPECT_DOUBLE_EQ(RocAuc({3, 1}, {1, 2}), 0.625);
  EXPECT_TRUE(std::isnan(RocAuc({}, {1})));
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
  // {samples 1..n, confidence, expected low, expected high}
  struct Case {
    int n;
    double confidence;
    double low, high;
  };
  const Case cases[] = {{10, 0.95, 2, 9},
                        {6, 0.95, 1, 6},
                        {36, 0.95, 12, 25},
                        {48, 0.95, 17, 32},
                        {100, 0.95, 40, 61},
                        // A lower confidence narrows it: P(B <= 2) = 0.055 for 10 samples.
                        {10, 0.80, 3, 8}};
  for (const Case& c : cases) {
    Interval interval = MedianInterval(OneTo(c.n), c.confidence);
    EXPECT_DOUBLE_EQ(interval.low, c.low) << c.n << " samples at " << c.confidence;
    EXPECT_DOUBLE_EQ(interval.high, c.high) << c.n << " samples at " << c.confidence;
  }
}

TEST(BenchStatsTest, MedianIntervalNeedsEnoughSamples) {
  Interval five = MedianInterval(OneTo(5));
  EXPECT_TRUE(std::isnan(five.low));
  EXPECT_TRUE(std::isnan(five.high));
  EXPECT_TRUE(std::isnan(MedianInterval({}).low));
}

}  // namespace
}  // namespace reprise::bench
