// Order statistics of measured samples (TTFT, throughput): percentiles, median, mean.
#pragma once

#include <vector>

namespace reprise::bench {

// The p-th percentile (p in [0, 100]) with linear interpolation between closest ranks (numpy's
// default): Percentile({1, 2, 3, 4}, 50) == 2.5. NaN for no samples; p is clamped to [0, 100].
double Percentile(std::vector<double> samples, double p);
double Median(const std::vector<double>& samples);
double Mean(const std::vector<double>& samples);  // NaN for no samples
double Min(const std::vector<double>& samples);   // NaN for no samples
double Max(const std::vector<double>& samples);   // NaN for no samples

// A distribution-free confidence interval for the median: order statistics x_(j) and
// x_(n+1-j), j the largest rank with P(Binomial(n, 1/2) < j) <= (1 - confidence) / 2, so the
// interval covers the true median with at least `confidence` whatever the samples' distribution.
// NaN bounds when there are too few samples for that confidence (fewer than 6 for 95%).
struct Interval {
  double low;
  double high;
};
Interval MedianInterval(std::vector<double> samples, double confidence = 0.95);

// The area under the ROC curve of a score that should be higher for `positives` than for
// `negatives`: the probability that a random positive scores above a random negative (ties count
// half), i.e. the Mann-Whitney U over the product of the counts. 0.5: the score tells nothing;
// 1 (or 0): it separates the two perfectly. NaN when either list is empty.
double RocAuc(const std::vector<double>& positives, const std::vector<double>& negatives);

// a / b, NaN when b is zero or either is NaN (ratios of measured figures).
double Ratio(double a, double b);

}  // namespace reprise::bench
