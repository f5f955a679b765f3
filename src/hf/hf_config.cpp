#include "hf/hf_config.h"

#include <cmath>

#include "core/error.h"
#include "hf/json_file.h"

namespace reprise::hf {

namespace {

// Bounds far beyond any real model (as for GGUF): a value outside them is refused before
// anything is sized from it.
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxHeads = 16384;
constexpr int64_t kMaxWidth = int64_t{1} << 20;
constexpr int64_t kMaxContext = int64_t{1} << 24;
constexpr int64_t kMaxVocab = int64_t{1} << 24;

int64_t RequireInt(const nlohmann::json& config, const char* key, const std::string& path,
                   int64_t min, int64_t max) {
  auto value = GetInt(config, key, path, min, max);
  if (!value) throw Error(fmt::format("{}: missing field '{}'", path, key));
  return *value;
}

float PositiveFloat(const nlohmann::json& config, const char* key, const std::string& path,
                    double fallback, double max) {
  double value = GetNumber(config, key, path).value_or(fallback);
  if (!std::isfinite(value) || value <= 0 || value > max) {
    throw Error(
        fmt::format("{}: field '{}' is {}, not a finite number in (0, {}]", path, key, value, max));
  }
  return static_cast<float>(value);
}

void CheckLlama(const nlohmann::json& config, const std::string& path) {
  std::string model_type = GetString(config, "model_type", path).value_or("");
  if (model_type != "llama") {
    throw Error(
        fmt::format("{}: field 'model_type' is '{}'; only Llama-family models ('llama') "
                    "are supported",
                    path, model_type));
  }
  if (const nlohmann::json* architectures = GetArray(config, "architectures", path)) {
    for (const nlohmann::json& architecture : *architectures) {
      if (!architecture.is_string() || architecture.get<std::string>() != "LlamaForCausalLM") {
        throw Error(
            fmt::format("{}: field 'architectures' names {}; only LlamaForCausalLM is "
                        "supported",
                        path, architecture.dump()));
      }
    }
  }
  std::string activation = GetString(config, "hidden_act", path).value_or("silu");
  if (activation != "silu") {
    throw Error(
        fmt::format("{}: field 'hidden_act' is '{}'; only 'silu' is supported", path, activation));
  }
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (GetBool(config, key, path).value_or(false)) {
      throw Error(fmt::format("{}: field '{}' is true; biases are not supported", path, key));
    }
  }
}

// rope_scaling: null, or linear (a position scale). Anything else changes the rotary
// frequencies in ways the forward pass does not implement, so it is refused.
void ReadRopeScaling(const nlohmann::json& config, const std::string& path, Metadata& metadata) {
  const nlohmann::json* scaling = GetObject(config, "rope_scaling", path);
  if (scaling == nullptr) return;
  std::string what = path + " rope_scaling";
  std::string type = GetString(*scaling, "rope_type", what)
                         .value_or(GetString(*scaling, "type", what).value_or(""));
  if (type != "linear") {
    throw Error(fmt::format("{}: field 'rope_scaling' has type '{}'; only 'linear' is supported",
                            path, type));
  }
  PutString(metadata, "llama.rope.scaling.type", "linear");
  PutFloat32(metadata, "llama.rope.scaling.factor",
             PositiveFloat(*scaling, "factor", what, 0.0, 1e6));
}

}  // namespace

HfShape ReadConfig(const nlohmann::json& config, const std::string& path, const std::string& name,
                   Metadata& metadata) {
  if (!config.is_object()) throw Error(fmt::format("{}: not a JSON object", path));
  CheckLlama(config, path);
  HfShape shape;
  shape.vocab_size = RequireInt(config, "vocab_size", path, 1, kMaxVocab);
  shape.hidden = RequireInt(config, "hidden_size", path, 1, kMaxWidth);
  shape.n_ff = RequireInt(config, "intermediate_size", path, 1, kMaxWidth);
  shape.n_layer = RequireInt(config, "num_hidden_layers", path, 1, kMaxLayers);
  shape.n_head = RequireInt(config, "num_attention_heads", path, 1, kMaxHeads);
  shape.n_kv_head =
      GetInt(config, "num_key_value_heads", path, 1, shape.n_head).value_or(shape.n_head);
  if (shape.hidden % shape.n_head != 0 || shape.n_head % shape.n_kv_head != 0) {
    throw Error(fmt::format("{}: {} heads and {} KV heads do not divide a hidden size of {}", path,
                            shape.n_head, shape.n_kv_head, shape.hidden));
  }
  shape.head_dim =
      GetInt(config, "head_dim", path, 2, kMaxWidth).value_or(shape.hidden / shape.n_head);
  if (shape.head_dim % 2 != 0) {
    throw Error(fmt::format("{}: field 'head_dim' is {}, not even", path, shape.head_dim));
  }
  shape.tied_embeddings = GetBool(config, "tie_word_embeddings", path).value_or(false);
  const int64_t context =
      GetInt(config, "max_position_embeddings", path, 1, kMaxContext).value_or(2048);

  PutString(metadata, "general.architecture", "llama");
  PutString(metadata, "general.name", name);
  PutUint32(metadata, "llama.vocab_size", static_cast<uint32_t>(shape.vocab_size));
  PutUint32(metadata, "llama.context_length", static_cast<uint32_t>(context));
  PutUint32(metadata, "llama.embedding_length", static_cast<uint32_t>(shape.hidden));
  PutUint32(metadata, "llama.block_count", static_cast<uint32_t>(shape.n_layer));
  PutUint32(metadata, "llama.feed_forward_length", static_cast<uint32_t>(shape.n_ff));
  PutUint32(metadata, "llama.attention.head_count", static_cast<uint32_t>(shape.n_head));
  PutUint32(metadata, "llama.attention.head_count_kv", static_cast<uint32_t>(shape.n_kv_head));
  PutUint32(metadata, "llama.attention.key_length", static_cast<uint32_t>(shape.head_dim));
  PutUint32(metadata, "llama.attention.value_length", static_cast<uint32_t>(shape.head_dim));
  PutUint32(metadata, "llama.rope.dimension_count", static_cast<uint32_t>(shape.head_dim));
  PutFloat32(metadata, "llama.attention.layer_norm_rms_epsilon",
             PositiveFloat(config, "rms_norm_eps", path, 1e-6, 1.0));
  PutFloat32(metadata, "llama.rope.freq_base",
             PositiveFloat(config, "rope_theta", path, 10000.0, 1e12));
  ReadRopeScaling(config, path, metadata);
  return shape;
}

}  // namespace reprise::hf
