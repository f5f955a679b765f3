#include "cli/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace reprise::cli {

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

double Ratio(double a, double b) {
  if (b == 0.0 || std::isnan(a) || std::isnan(b)) return kNan;
  return a / b;
}

}  // namespace reprise::cli
