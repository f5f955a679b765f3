// Writes random-weight llama models of realistic shapes with a real vocabulary (a file's, or the
// built-in one), so benchmarks and tests get full-size models without downloads.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/weight_type.h"

namespace reprise::modelgen {

struct ModelShape {
  std::string name;
  int64_t embedding_length;
  int64_t feed_forward_length;
  int n_layer;
  int n_head;
  int n_kv_head;
  int64_t context_length;
  float rope_freq_base;
  bool llama3_rope_scaling;  // writes a rope_freqs tensor as Llama 3.x files have
};

// "135m" (SmolLM2-135M), "360m" (SmolLM2-360M), "1b" (Llama-3.2-1B), "3b" (Llama-3.2-3B),
// "8b" (Llama-3.1-8B, its embeddings tied), "tiny" and "tiny-k" (for tests; tiny-k's rows take
// K-quant super-blocks).
// Throws Error for an unknown name.
ModelShape ShapeByName(const std::string& name);
// The names ShapeByName knows, for help texts and errors: "135m, 360m, ..., 8b or tiny".
std::string ShapeNames();

struct MakeModelOptions {
  std::string shape = "tiny";
  std::string architecture = "llama";  // or "qwen2": NeoX rope and Q/K/V biases
  std::string vocab_path;  // a GGUF holding tokenizer.* metadata; empty: the built-in vocabulary
  kernels::WeightType type = kernels::WeightType::kF16;
  std::string output_path;
  uint64_t seed = 1234;
  int threads = 0;
};

// Writes the model; throws Error on a bad vocabulary file or an unwritable output.
void MakeModel(const MakeModelOptions& options);

}  // namespace reprise::modelgen
