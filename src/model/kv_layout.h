// The shape of the paged KV cache a model needs: per block, for every layer, a K and a V plane
// per KV head (kernels::PagedKv says where each lives). The engine sizes its pool with it.
#pragma once

#include <string>

#include "kernels/paged_attention.h"
#include "model/model_config.h"

namespace reprise {

// "f16", "f32" or "q8"; throws Error naming the accepted names for anything else.
kernels::KvType ParseKvType(const std::string& name);

// The layout of `config`'s KV cache in blocks of `block_size` positions stored as `type`; its
// base is null until the pool that holds the blocks exists.
kernels::PagedKv KvLayout(const ModelConfig& config, kernels::KvType type, int block_size);

}  // namespace reprise
