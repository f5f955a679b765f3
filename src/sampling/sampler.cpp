#include "sampling/sampler.h"

#include <xmmintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "core/error.h"

namespace reprise {

int32_t ArgMax(std::span<const float> logits) {
  // Greedy decoding runs this on every token while the kernel threads wait: the largest value by
  // four-lane maxima (a max is exact in any order), then the first index holding it. A loop
  // comparing each logit with the best so far is a chain of dependent loads and branches, about
  // 10x slower over a 32k-150k vocabulary. NaN logits are skipped (maxps returns its second
  // operand when the first is NaN).
  const size_t n = logits.size();
  const float* data = logits.data();
  __m128 lanes[4];
  for (__m128& lane : lanes) lane = _mm_set1_ps(-std::numeric_limits<float>::infinity());
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int k = 0; k < 4; ++k) lanes[k] = _mm_max_ps(_mm_loadu_ps(data + i + 4 * k), lanes[k]);
  }
  const __m128 both = _mm_max_ps(_mm_max_ps(lanes[0], lanes[1]), _mm_max_ps(lanes[2], lanes[3]));
  alignas(16) float four[4];
  _mm_store_ps(four, both);
  float best = std::max(std::max(four[0], four[1]), std::max(four[2], four[3]));
  for (; i < n; ++i) best = data[i] > best ? data[i] : best;
  for (size_t j = 0; j < n; ++j) {
    if (data[j] == best) return static_cast<int32_t>(j);
  }
  return 0;  // every logit NaN (or none)
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
  auto in_range = [&](int32_t token) {
    return token >= 0 && static_cast<size_t>(token) < logits.size();
  };
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

namespace {

// The order of ordered candidates: largest logit first, the lower token first on ties.
bool LargerFirst(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

// A candidate's softmax weight, exp(logit - max); its probability is weight / total.
double Weight(const std::pair<float, int32_t>& candidate, float max_logit) {
  return std::exp(static_cast<double>(candidate.first - max_logit));
}

}  // namespace

size_t Sampler::TopPCount(size_t ordered, double total, float max_logit) {
  // The kept set is the smallest run of the largest candidates whose probabilities reach top_p.
  // Found by quickselect on probability mass: each round places the middle candidate of the
  // undecided range [lo, hi) by nth_element, and keeps to the side where the mass crosses top_p,
  // so a flat distribution (most of the vocabulary kept) costs a few passes, not a sort.
  // Afterwards candidates_[0, count) is the kept set and weights[0, count) their weights.
  std::vector<double>& weights = probabilities_;
  const double target = static_cast<double>(config_.top_p) * total;
  auto at = [&](size_t i) { return candidates_.begin() + static_cast<ptrdiff_t>(i); };
  size_t lo = 0, hi = candidates_.size();
  double above = 0;  // mass of candidates_[0, lo), all larger than those in [lo, hi)
  while (hi - lo > 64 && lo >= ordered) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(at(lo), at(mid), at(hi), LargerFirst);
    double mass = 0;  // of [lo, mid]
    for (size_t j = lo; j <= mid; ++j) mass += (weights[j] = Weight(candidates_[j], max_logit));
    if (above + mass >= target) {
      hi = mid + 1;
    } else {
      above += mass;
      lo = mid + 1;
    }
  }
  if (lo >= ordered) {  // the crossing is in [lo, hi), which holds exactly those ranks: order it
    std::sort(at(lo), at(hi), LargerFirst);
    for (size_t j = lo; j < hi; ++j) weights[j] = Weight(candidates_[j], max_logit);
  }
  for (size_t j = lo; j < hi; ++j) {
    above += weights[j];
    if (above >= target) return j + 1;
  }
  return std::max<size_t>(hi, 1);
}

int32_t Sampler::Sample(std::span<float> logits) {
  ApplyPenalties(logits);
  if (config_.temperature <= 0.0f) return ArgMax(logits);
  REPRISE_CHECK(!logits.empty(), "no logits to sample from");

  // Only what top_k and top_p need is put in order: sorting a whole vocabulary of 32k-150k
  // entries for every token cost more than a small model's forward pass. Ordered candidates are
  // largest first, the lower token first on ties.
  candidates_.clear();
  candidates_.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_.emplace_back(logits[i] / config_.temperature, static_cast<int32_t>(i));
  }
  size_t ordered = 0;  // candidates_[0, ordered) are the largest, in order
  if (config_.top_k > 0 && static_cast<size_t>(config_.top_k) < candidates_.size()) {
    const auto keep = static_cast<ptrdiff_t>(config_.top_k);
    std::nth_element(candidates_.begin(), candidates_.begin() + keep - 1, candidates_.end(),
                     LargerFirst);
    candidates_.resize(static_cast<size_t>(keep));
    std::sort(candidates_.begin(), candidates_.end(), LargerFirst);
    ordered = candidates_.size();
  }

  // Softmax over the candidates: weights exp(logit - max), probabilities weight / total.
  float max_logit = candidates_.front().first;
  for (const auto& candidate : candidates_) max_logit = std::max(max_logit, candidate.first);
  std::vector<double>& weights = probabilities_;
  weights.resize(candidates_.size());
  double total = 0;
  for (size_t i = 0; i < candidates_.size(); ++i)
    total += (weights[i] = Weight(candidates_[i], max_logit));

  // min_p keeps the tokens whose probability is at least min_p times the largest one's (the
  // largest weight is 1); top_p keeps the largest ones until their probabilities reach top_p.
  const double min_weight = config_.min_p > 0.0f ? static_cast<double>(config_.min_p) : 0.0;
  size_t count = candidates_.size();  // with top_p: candidates_[0, count) are kept
  if (config_.top_p < 1.0f) count = TopPCount(ordered, total, max_logit);

  // Draw among the kept candidates, in their order: largest first when ordered, else as arranged.
  double kept_total = 0;
  for (size_t i = 0; i < count; ++i) {
    if (weights[i] >= min_weight) kept_total += weights[i];
  }
  if (!(kept_total > 0.0) || !std::isfinite(kept_total)) return candidates_.front().second;
  const double target = std::uniform_real_distribution<double>(0.0, kept_total)(generator_);
  double cumulative = 0;
  size_t last_kept = 0;
  for (size_t i = 0; i < count; ++i) {
    if (weights[i] < min_weight) continue;
    last_kept = i;
    cumulative += weights[i];
    if (cumulative > target) return candidates_[i].second;
  }
  return candidates_[last_kept].second;  // rounding left the target at the very end
}

}  // namespace reprise
