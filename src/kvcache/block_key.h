// Content keys of KV blocks: SHA-256 over (parent key, extra keys, token ids), with full blocks
// and partly filled tail blocks in separate domains so that the two can never be confused.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/sha256.h"

namespace reprise {

// Everything besides the tokens and the model that changes a block's KV values. Two requests
// whose extras differ never share a block.
struct CacheKeyExtras {
  std::string cache_salt;  // tenant isolation
  std::string extra;       // opaque: adapter id, multimodal hashes, ...
};

// A nonzero 64-bit tag for a cache owner's name (a tenant): RetentionPolicy::owner. 0 for "".
uint64_t OwnerTag(std::string_view owner);

// SHA-256 of the length-prefixed extras: ("ab","c") and ("a","bc") differ.
Digest ExtrasDigest(const CacheKeyExtras& extras);

// Key of a block holding `tokens` (int32 little-endian) whose parent block has key `parent_key`
// (the cache's root fingerprint for a sequence's first block). `full` is true when the block
// holds block_size tokens; a partial (tail) key lives in another domain and never equals a full
// key, whatever the tokens.
Digest BlockKey(const Digest& parent_key, const Digest& extras_digest,
                std::span<const int32_t> tokens, bool full);

}  // namespace reprise
