// Content keys of KV blocks: SHA-256 over (parent key, extra keys, token ids), with full blocks
// and partly filled tail blocks in separate domains so that the two can never be confused.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/sha256.h"

namespace reprise {

// Everything besides the tokens and the model that changes a block's KV values. Two requests
// whose extras differ never share a block.
struct CacheKeyExtras {
  std::string cache_salt;  // tenant isolation
  std::string extra;       // opaque: adapter id, multimodal hashes, ...
};

// The one name of a tenant outside its requests: SHA-256, in its own domain, of the tenant's
// server-side cache salt. Every block records its owner by it (in memory, in the header of every
// tier's block, in KV events), so per-tenant clears reach every tier while the salt itself (the
// secret that isolates the tenant's keys) is never written anywhere. All zero for "" (no owner).
Digest TenantSaltDigest(std::string_view tenant_salt);

// SHA-256 of the length-prefixed extras: ("ab","c") and ("a","bc") differ.
Digest ExtrasDigest(const CacheKeyExtras& extras);

// Key of a block holding `tokens` (int32 little-endian) whose parent block has key `parent_key`
// (the cache's root fingerprint for a sequence's first block). `full` is true when the block
// holds block_size tokens; a partial (tail) key lives in another domain and never equals a full
// key, whatever the tokens.
Digest BlockKey(const Digest& parent_key, const Digest& extras_digest,
                std::span<const int32_t> tokens, bool full);

// The keys of a sequence's full blocks, computed once and extended as the sequence grows (a
// lookup in memory or in a slower tier then costs no hashing).
class BlockKeyChain {
 public:
  BlockKeyChain() = default;
  BlockKeyChain(const Digest& root, const CacheKeyExtras& extras)
      : root_(root), extras_digest_(ExtrasDigest(extras)) {}

  // Keys every full block of tokens[0, tokens.size()) not keyed yet. `tokens` must extend the
  // tokens of earlier calls.
  void Extend(std::span<const int32_t> tokens, size_t block_size);

  std::span<const Digest> keys() const { return keys_; }
  size_t size() const { return keys_.size(); }
  const Digest& root() const { return root_; }
  const Digest& extras_digest() const { return extras_digest_; }
  // The parent key of block `index`: the root for the first block.
  const Digest& ParentOf(size_t index) const { return index == 0 ? root_ : keys_[index - 1]; }

 private:
  Digest root_{};
  Digest extras_digest_{};
  std::vector<Digest> keys_;
};

}  // namespace reprise
