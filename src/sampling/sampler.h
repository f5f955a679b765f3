// Chooses tokens for one request: applies penalties, then greedy or temperature sampling with
// top-k / top-p / min-p, from a seeded generator so a seed reproduces a run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "sampling/sampling_config.h"

namespace reprise {

class Sampler {
 public:
  // `prompt` seeds the repetition penalty's history.
  Sampler(const SamplerConfig& config, std::span<const int32_t> prompt);

  // Picks the next token from logits: [vocab]. The logits are modified (penalties applied).
  int32_t Sample(std::span<float> logits);

  // Records a token chosen (or forced) as output, for the penalties.
  void Accept(int32_t token);

  const SamplerConfig& config() const { return config_; }

 private:
  void ApplyPenalties(std::span<float> logits) const;
  // How many candidates top_p keeps (see Sample); `ordered` leading candidates are already sorted.
  size_t TopPCount(size_t ordered, double total, float max_logit);

  SamplerConfig config_;
  std::mt19937_64 generator_;
  std::unordered_map<int32_t, int> output_counts_;
  std::unordered_map<int32_t, bool> seen_;  // prompt and output tokens, for repetition_penalty
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch: (logit, token)
  std::vector<double> probabilities_;                  // scratch: [kept candidates]
};

// Index of the largest logit; the lowest index wins ties, so greedy decoding is deterministic.
int32_t ArgMax(std::span<const float> logits);

}  // namespace reprise
