#include "model/model_config.h"

#include "core/error.h"

namespace reprise {

ModelConfig ModelConfig::FromGguf(const gguf::GgufFile& file) {
  ModelConfig config;
  config.architecture = file.GetString("general.architecture");
  const std::string& arch = config.architecture;
  if (arch != "llama" && arch != "qwen2") {
    throw Error(fmt::format("{}: architecture '{}' is not supported (llama and qwen2 are)",
                            file.path(), arch));
  }
  config.name = file.GetString("general.name", arch);
  config.embedding_length = file.GetInt(arch + ".embedding_length");
  config.feed_forward_length = file.GetInt(arch + ".feed_forward_length");
  config.n_layer = static_cast<int>(file.GetInt(arch + ".block_count"));
  config.n_head = static_cast<int>(file.GetInt(arch + ".attention.head_count"));
  config.n_kv_head =
      static_cast<int>(file.GetInt(arch + ".attention.head_count_kv", config.n_head));
  config.context_length = file.GetInt(arch + ".context_length", 2048);
  config.rms_eps = static_cast<float>(file.GetFloat(arch + ".attention.layer_norm_rms_epsilon", 1e-5));
  config.rope_freq_base = static_cast<float>(file.GetFloat(arch + ".rope.freq_base", 10000.0));
  config.rope_style = arch == "qwen2" ? kernels::RopeStyle::kNeox : kernels::RopeStyle::kNormal;
  config.has_qkv_bias = file.FindTensor("blk.0.attn_q.bias") != nullptr;

  if (config.n_layer <= 0 || config.n_head <= 0 || config.n_kv_head <= 0 ||
      config.embedding_length <= 0 || config.feed_forward_length <= 0 ||
      config.context_length <= 0) {
    throw Error(fmt::format("{}: model hyper-parameters must be positive", file.path()));
  }
  if (config.embedding_length % config.n_head != 0 || config.n_head % config.n_kv_head != 0) {
    throw Error(fmt::format("{}: {} heads and {} KV heads do not divide an embedding of {}",
                            file.path(), config.n_head, config.n_kv_head,
                            config.embedding_length));
  }
  config.head_dim = static_cast<int>(
      file.GetInt(arch + ".attention.key_length", config.embedding_length / config.n_head));
  config.rope_dim = static_cast<int>(file.GetInt(arch + ".rope.dimension_count", config.head_dim));
  if (config.rope_dim <= 0 || config.rope_dim > config.head_dim || config.rope_dim % 2 != 0) {
    throw Error(fmt::format("{}: rope dimension {} does not fit a head of {}", file.path(),
                            config.rope_dim, config.head_dim));
  }
  std::string scaling = file.GetString(arch + ".rope.scaling.type", "none");
  if (scaling == "linear") {
    double factor = file.GetFloat(arch + ".rope.scaling.factor", 1.0);
    if (factor <= 0) throw Error(fmt::format("{}: rope scaling factor must be positive", file.path()));
    config.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none" && scaling != "llama3") {
    // llama3 scaling is carried by the rope_freqs tensor; yarn and others are not supported.
    throw Error(fmt::format("{}: rope scaling '{}' is not supported", file.path(), scaling));
  }
  const gguf::TensorInfo* embedding = file.FindTensor("token_embd.weight");
  if (embedding == nullptr || embedding->shape.size() != 2) {
    throw Error(fmt::format("{}: missing tensor 'token_embd.weight'", file.path()));
  }
  config.vocab_size = static_cast<int64_t>(embedding->shape[1]);
  return config;
}

}  // namespace reprise
