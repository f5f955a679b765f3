// Log-probabilities from a row of logits, for the API's `logprobs`: the log-softmax and the most
// likely tokens.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace reprise {

// out[i] = logits[i] - log(sum_j exp(logits[j])), summed in double. `out` is resized.
void LogSoftmax(std::span<const float> logits, std::vector<float>& out);

// The `k` largest values of `values` as (index, value), largest first; the lower index first on
// ties, so the answer is deterministic. k is clamped to [0, values.size()].
std::vector<std::pair<int32_t, float>> TopEntries(std::span<const float> values, int k);

}  // namespace reprise
