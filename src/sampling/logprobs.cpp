#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace reprise {

void LogSoftmax(std::span<const float> logits, std::vector<float>& out) {
  out.resize(logits.size());
  if (logits.empty()) return;
  float max = -std::numeric_limits<float>::infinity();
  for (float value : logits) max = std::max(max, value);
  double sum = 0;
  for (float value : logits) sum += std::exp(static_cast<double>(value) - max);
  const double log_z = static_cast<double>(max) + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) {
    out[i] = static_cast<float>(static_cast<double>(logits[i]) - log_z);
  }
}

std::vector<std::pair<int32_t, float>> TopEntries(std::span<const float> values, int k) {
  size_t count = std::min(static_cast<size_t>(std::max(k, 0)), values.size());
  std::vector<std::pair<int32_t, float>> top;
  if (count == 0) return top;
  // Larger value first, then lower index: a strict order, so partial_sort is deterministic.
  auto before = [](const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  // A running list of the best `count`, kept sorted: the vocabulary is scanned once and only
  // values that beat the current worst are inserted (count is small, at most a few dozen).
  top.reserve(count + 1);
  for (size_t i = 0; i < values.size(); ++i) {
    std::pair<int32_t, float> entry{static_cast<int32_t>(i), values[i]};
    if (top.size() == count && !before(entry, top.back())) continue;
    top.insert(std::upper_bound(top.begin(), top.end(), entry, before), entry);
    if (top.size() > count) top.pop_back();
  }
  return top;
}

}  // namespace reprise
