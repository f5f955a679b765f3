#include "model/model_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>

#include "core/error.h"

namespace reprise {

namespace {

// Bounds far beyond any real model: a value outside them is a broken or hostile file, refused
// before anything is sized from it.
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxHeads = 16384;
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // embedding, feed-forward, head width
constexpr int64_t kMaxContext = int64_t{1} << 24;
constexpr int64_t kMaxVocab = int64_t{1} << 24;

// An integer hyper-parameter read at its stored width and checked against [min, max].
int64_t GetCount(const gguf::GgufFile& file, const std::string& key, int64_t min, int64_t max,
                 std::optional<int64_t> fallback = std::nullopt) {
  int64_t value = fallback ? file.GetInt(key, *fallback) : file.GetInt(key);
  if (value < min || value > max) {
    throw Error(fmt::format("{}: metadata key '{}' is {}, outside {}..{}", file.path(), key, value,
                            min, max));
  }
  return value;
}

// A real hyper-parameter that must be finite and within (min, max].
double GetPositive(const gguf::GgufFile& file, const std::string& key, double fallback,
                   double max) {
  double value = file.GetFloat(key, fallback);
  if (!std::isfinite(value) || value <= 0 || value > max) {
    throw Error(fmt::format("{}: metadata key '{}' is {}, not a finite number in (0, {}]",
                            file.path(), key, value, max));
  }
  return value;
}

// The number of layers the tensor table holds: one more than the largest N of "blk.N." names.
int64_t LayersInTensorTable(const gguf::GgufFile& file) {
  int64_t layers = 0;
  for (const auto& tensor : file.tensors()) {
    std::string_view name = tensor.name;
    if (!name.starts_with("blk.")) continue;
    name.remove_prefix(4);
    int64_t index = 0;
    auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), index);
    if (error != std::errc() || end == name.data() || *end != '.' || index < 0) continue;
    layers = std::max(layers, std::min(index, kMaxLayers) + 1);
  }
  return layers;
}

}  // namespace

ModelConfig ModelConfig::FromGguf(const gguf::GgufFile& file) {
  ModelConfig config;
  const std::string path = file.path();
  config.architecture = file.GetString("general.architecture");
  const std::string& arch = config.architecture;
  if (arch != "llama" && arch != "qwen2") {
    throw Error(
        fmt::format("{}: architecture '{}' is not supported (llama and qwen2 are)", path, arch));
  }
  config.name = file.GetString("general.name", arch);
  config.embedding_length = GetCount(file, arch + ".embedding_length", 1, kMaxWidth);
  config.feed_forward_length = GetCount(file, arch + ".feed_forward_length", 1, kMaxWidth);
  config.n_layer = static_cast<int>(GetCount(file, arch + ".block_count", 1, kMaxLayers));
  config.n_head = static_cast<int>(GetCount(file, arch + ".attention.head_count", 1, kMaxHeads));
  config.n_kv_head = static_cast<int>(
      GetCount(file, arch + ".attention.head_count_kv", 1, config.n_head, config.n_head));
  config.context_length = GetCount(file, arch + ".context_length", 1, kMaxContext, 2048);
  config.rms_eps =
      static_cast<float>(GetPositive(file, arch + ".attention.layer_norm_rms_epsilon", 1e-5, 1.0));
  config.rope_freq_base =
      static_cast<float>(GetPositive(file, arch + ".rope.freq_base", 10000.0, 1e12));
  config.rope_style = arch == "qwen2" ? kernels::RopeStyle::kNeox : kernels::RopeStyle::kNormal;
  config.has_qkv_bias = file.FindTensor("blk.0.attn_q.bias") != nullptr;

  // Per-layer structures are sized from block_count, so it must agree with the tensor table
  // before anything is allocated.
  const int64_t layers_in_table = LayersInTensorTable(file);
  if (layers_in_table != config.n_layer) {
    throw Error(fmt::format("{}: {}.block_count is {} but the tensor table holds {} layers", path,
                            arch, config.n_layer, layers_in_table));
  }
  if (config.embedding_length % config.n_head != 0 || config.n_head % config.n_kv_head != 0) {
    throw Error(fmt::format("{}: {} heads and {} KV heads do not divide an embedding of {}", path,
                            config.n_head, config.n_kv_head, config.embedding_length));
  }
  config.head_dim = static_cast<int>(GetCount(file, arch + ".attention.key_length", 1, kMaxWidth,
                                              config.embedding_length / config.n_head));
  config.rope_dim = static_cast<int>(
      GetCount(file, arch + ".rope.dimension_count", 1, kMaxWidth, config.head_dim));
  if (config.rope_dim > config.head_dim || config.rope_dim % 2 != 0) {
    throw Error(fmt::format("{}: rope dimension {} does not fit a head of {}", path,
                            config.rope_dim, config.head_dim));
  }
  std::string scaling = file.GetString(arch + ".rope.scaling.type", "none");
  if (scaling == "linear") {
    double factor = GetPositive(file, arch + ".rope.scaling.factor", 1.0, 1e6);
    config.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none" && scaling != "llama3") {
    // llama3 scaling is carried by the rope_freqs tensor; yarn and others are not supported.
    throw Error(fmt::format("{}: rope scaling '{}' is not supported", path, scaling));
  }
  const gguf::TensorInfo* embedding = file.FindTensor("token_embd.weight");
  if (embedding == nullptr || embedding->shape.size() != 2) {
    throw Error(fmt::format("{}: missing tensor 'token_embd.weight'", path));
  }
  if (embedding->shape[1] > static_cast<uint64_t>(kMaxVocab)) {
    throw Error(fmt::format("{}: token_embd.weight has {} rows, beyond a vocabulary of {}", path,
                            embedding->shape[1], kMaxVocab));
  }
  config.vocab_size = static_cast<int64_t>(embedding->shape[1]);
  return config;
}

}  // namespace reprise
