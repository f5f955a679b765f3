// A Hugging Face config.json of a Llama-family model, checked and turned into the GGUF
// hyper-parameter keys that ModelConfig reads.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "hf/metadata.h"

namespace reprise::hf {

// The sizes the tensor table must match.
struct HfShape {
  int64_t vocab_size = 0;
  int64_t hidden = 0;
  int64_t n_ff = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  bool tied_embeddings = false;
};

// Reads `config` (the parsed file `path`) into `metadata` (general.* and llama.* keys). Throws
// Error("<path>: field '<name>' ...") for a model that is not Llama-family, a missing or
// out-of-range hyper-parameter, or a feature Reprise does not run (rope scaling other than
// linear, biases, an activation other than SiLU).
HfShape ReadConfig(const nlohmann::json& config, const std::string& path, const std::string& name,
                   Metadata& metadata);

}  // namespace reprise::hf
