#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>

namespace reprise {

int32_t ArgMax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

Sampler::Sampler(const SamplerConfig& config, std::span<const int32_t> prompt)
    : config_(config), generator_(config.seed) {
  if (config_.repetition_penalty != 1.0f) {
    for (int32_t token : prompt) seen_[token] = true;
  }
}

void Sampler::Accept(int32_t token) {
  ++output_counts_[token];
  if (config_.repetition_penalty != 1.0f) seen_[token] = true;
}

void Sampler::ApplyPenalties(std::span<float> logits) const {
  auto in_range = [&](int32_t token) { return token >= 0 && static_cast<size_t>(token) < logits.size(); };
  if (config_.repetition_penalty != 1.0f) {
    for (const auto& [token, _] : seen_) {
      if (!in_range(token)) continue;
      float& logit = logits[static_cast<size_t>(token)];
      logit = logit > 0 ? logit / config_.repetition_penalty : logit * config_.repetition_penalty;
    }
  }
  if (config_.frequency_penalty != 0.0f || config_.presence_penalty != 0.0f) {
    for (const auto& [token, count] : output_counts_) {
      if (!in_range(token)) continue;
      logits[static_cast<size_t>(token)] -=
          config_.frequency_penalty * static_cast<float>(count) + config_.presence_penalty;
    }
  }
}

int32_t Sampler::Sample(std::span<float> logits) {
  ApplyPenalties(logits);
  if (config_.temperature <= 0.0f) return ArgMax(logits);

  candidates_.clear();
  candidates_.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_.emplace_back(logits[i] / config_.temperature, static_cast<int32_t>(i));
  }
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  size_t keep = candidates_.size();
  if (config_.top_k > 0 && static_cast<size_t>(config_.top_k) < keep) {
    keep = static_cast<size_t>(config_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(keep),
                      candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);

  // Softmax over the kept candidates (sorted, so the first is the maximum).
  float max_logit = candidates_.front().first;
  std::vector<double>& probabilities = probabilities_;
  probabilities.resize(candidates_.size());
  double total = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    probabilities[i] = std::exp(static_cast<double>(candidates_[i].first - max_logit));
    total += probabilities[i];
  }
  for (double& p : probabilities) p /= total;

  if (config_.min_p > 0.0f) {
    double threshold = config_.min_p * probabilities.front();
    size_t count = 1;
    while (count < probabilities.size() && probabilities[count] >= threshold) ++count;
    probabilities.resize(count);
  }
  if (config_.top_p < 1.0f) {
    double cumulative = 0;
    size_t count = 0;
    while (count < probabilities.size()) {
      cumulative += probabilities[count++];
      if (cumulative >= config_.top_p) break;
    }
    probabilities.resize(std::max<size_t>(count, 1));
  }
  std::discrete_distribution<size_t> pick(probabilities.begin(), probabilities.end());
  return candidates_[pick(generator_)].second;
}

}  // namespace reprise
