// One step's worth of tokens from several sequences, as the scheduler packs it for the model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace reprise {

// Token i of the batch belongs to sequence sequence_index[i] at position positions[i]. Its K/V is
// written to block block_tables[s][p / block_size], slot p % block_size, and it attends to
// positions [0, p] of its sequence. Tokens of one sequence appear in position order.
struct ForwardBatch {
  std::vector<int32_t> tokens;                         // [num_tokens]
  std::vector<int32_t> positions;                      // [num_tokens]
  std::vector<int32_t> sequence_index;                 // [num_tokens], indexes block_tables
  std::vector<std::span<const int32_t>> block_tables;  // [num_sequences][blocks]
  std::vector<int32_t> logit_rows;  // batch indices whose next-token logits are wanted

  void Clear() {
    tokens.clear();
    positions.clear();
    sequence_index.clear();
    block_tables.clear();
    logit_rows.clear();
  }
  size_t size() const { return tokens.size(); }
};

}  // namespace reprise
