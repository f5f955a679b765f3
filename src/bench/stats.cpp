#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace reprise::bench {

namespace {
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
}

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return kNan;
  std::sort(samples.begin(), samples.end());
  p = std::clamp(p, 0.0, 100.0);
  double rank = p / 100.0 * static_cast<double>(samples.size() - 1);
  size_t below = static_cast<size_t>(std::floor(rank));
  size_t above = std::min(below + 1, samples.size() - 1);
  double fraction = rank - static_cast<double>(below);
  return samples[below] + (samples[above] - samples[below]) * fraction;
}

double Median(const std::vector<double>& samples) { return Percentile(samples, 50.0); }

double Mean(const std::vector<double>& samples) {
  if (samples.empty()) return kNan;
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

double Min(const std::vector<double>& samples) {
  if (samples.empty()) return kNan;
  return *std::min_element(samples.begin(), samples.end());
}

double Max(const std::vector<double>& samples) {
  if (samples.empty()) return kNan;
  return *std::max_element(samples.begin(), samples.end());
}

Interval MedianInterval(std::vector<double> samples, double confidence) {
  const size_t n = samples.size();
  const double tail = (1.0 - confidence) / 2.0;
  // P(B <= k) for B ~ Binomial(n, 1/2), accumulated term by term in log space so large n does
  // not overflow: C(n, k + 1) = C(n, k) (n - k) / (k + 1).
  const double log_half_n = static_cast<double>(n) * std::log(0.5);
  double log_term = 0.0;  // log C(n, 0)
  double below = 0.0;     // P(B <= j - 1)
  size_t rank = 0;        // the j found so far
  for (size_t k = 0; 2 * k < n; ++k) {
    below += std::exp(log_term + log_half_n);
    if (below > tail) break;
    rank = k + 1;
    log_term += std::log(static_cast<double>(n - k)) - std::log(static_cast<double>(k + 1));
  }
  if (rank == 0) return {kNan, kNan};
  std::sort(samples.begin(), samples.end());
  return {samples[rank - 1], samples[n - rank]};
}

double RocAuc(const std::vector<double>& positives, const std::vector<double>& negatives) {
  if (positives.empty() || negatives.empty()) return std::numeric_limits<double>::quiet_NaN();
  double wins = 0;
  for (double p : positives) {
    for (double n : negatives) wins += p > n ? 1.0 : p == n ? 0.5 : 0.0;
  }
  return wins / (static_cast<double>(positives.size()) * static_cast<double>(negatives.size()));
}

double Ratio(double a, double b) {
  if (b == 0.0 || std::isnan(a) || std::isnan(b)) return kNan;
  return a / b;
}

}  // namespace reprise::bench
