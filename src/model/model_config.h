// Hyper-parameters of a llama-family model, read from GGUF metadata.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf_file.h"
#include "kernels/ops.h"

namespace reprise {

struct ModelConfig {
  std::string architecture;  // "llama" (Llama 2/3, Mistral, SmolLM, TinyStories) or "qwen2"
  std::string name;
  int64_t vocab_size = 0;
  int64_t context_length = 0;
  int64_t embedding_length = 0;  // n_embd
  int64_t feed_forward_length = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  float rms_eps = 1e-5f;
  kernels::RopeStyle rope_style = kernels::RopeStyle::kNormal;
  int rope_dim = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  bool has_qkv_bias = false;

  int64_t q_dim() const { return int64_t{n_head} * head_dim; }  // a token's query width
  int64_t kv_dim() const {
    return int64_t{n_kv_head} * head_dim;
  }  // a token's key (or value) width

  // Throws Error naming the key for a missing or inconsistent hyper-parameter.
  static ModelConfig FromGguf(const gguf::GgufFile& file);
};

}  // namespace reprise
