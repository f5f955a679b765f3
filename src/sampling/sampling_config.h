// How to choose the next token from logits: penalties, then temperature and truncation.
#pragma once

#include <cstdint>

namespace reprise {

struct SamplerConfig {
  float temperature = 0.0f;  // 0 (or below) means greedy
  int top_k = 0;             // 0 or less: no limit
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;  // over prompt and output tokens (as vLLM / HF)
  float frequency_penalty = 0.0f;   // over output tokens (as OpenAI)
  float presence_penalty = 0.0f;    // over output tokens (as OpenAI)
  uint64_t seed = 0;
};

}  // namespace reprise
