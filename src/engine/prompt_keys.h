// The root fingerprint that every KV block key starts from, derived from the model file before
// any weights are used. The engine and `reprise route` (which loads only the tokenizer) both use
// it, so a router computes the very block keys the replicas compute.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "gguf/gguf_file.h"
#include "kernels/paged_attention.h"
#include "reprise/engine.h"
#include "tokenizer/tokenizer.h"

namespace reprise {

// The cache's root fingerprint: the model file's weights fingerprint, the KV type, the block
// size and the kernels' numerics (kernels::KernelNumerics). Blocks of another model, KV setting
// or arithmetic can never match: a replica on another CPU target computes other bits.
Digest KvRootFingerprint(const Digest& weights_fingerprint, kernels::KvType kv_type, int block_size,
                         std::string_view numerics);

}  // namespace reprise
