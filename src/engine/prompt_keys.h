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

// The cache's root fingerprint: the model file's weights fingerprint, the KV type and the block
// size. Blocks of another model or KV setting can never match.
Digest KvRootFingerprint(const Digest& weights_fingerprint, kernels::KvType kv_type,
                         int block_size);

}  // namespace reprise
