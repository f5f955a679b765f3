#include "model/kv_layout.h"

#include <fmt/format.h>

#include "core/error.h"

namespace reprise {

kernels::KvType ParseKvType(const std::string& name) {
  if (name == "f16") return kernels::KvType::kF16;
  if (name == "f32") return kernels::KvType::kF32;
  if (name == "q8") return kernels::KvType::kQ8;
  throw Error(fmt::format("unknown KV cache type '{}' (f16, f32 or q8)", name));
}

kernels::PagedKv KvLayout(const ModelConfig& config, kernels::KvType type, int block_size) {
  if (type == kernels::KvType::kQ8 && (config.head_dim % 4 != 0 || block_size % 4 != 0)) {
    // Its codes are laid out in fours of dimensions (keys) and of slots (values).
    throw Error(fmt::format(
        "the q8 KV cache needs a head size and a block size that are multiples of 4 (head size "
        "{}, block size {})",
        config.head_dim, block_size));
  }
  kernels::PagedKv layout;
  layout.type = type;
  layout.n_layer = config.n_layer;
  layout.n_kv_head = config.n_kv_head;
  layout.head_dim = config.head_dim;
  layout.block_size = block_size;
  return layout;
}

}  // namespace reprise
