#include "model/kv_layout.h"

#include <fmt/format.h>

#include "core/error.h"

namespace reprise {

kernels::KvType ParseKvType(const std::string& name) {
  if (name == "f16") return kernels::KvType::kF16;
  if (name == "f32") return kernels::KvType::kF32;
  throw Error(fmt::format("unknown KV cache type '{}' (f16 or f32)", name));
}

kernels::PagedKv KvLayout(const ModelConfig& config, kernels::KvType type, int block_size) {
  kernels::PagedKv layout;
  layout.type = type;
  layout.n_layer = config.n_layer;
  layout.n_kv_head = config.n_kv_head;
  layout.head_dim = config.head_dim;
  layout.block_size = block_size;
  return layout;
}

}  // namespace reprise
