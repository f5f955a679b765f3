// Blocks for tier tests: a small identity, chains of real block keys and recognisable payloads.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "kvcache/block_key.h"
#include "tiers/block_format.h"
#include "tiers/kv_tier.h"

namespace reprise::testing {

inline Digest TestDigest(const char* text) {
  Sha256 hasher;
  hasher.Update(text);
  return hasher.Finish();
}

inline TierIdentity TestIdentity(uint64_t block_bytes = 4096, uint32_t block_size = 4,
                                 const char* model = "model-a") {
  TierIdentity identity;
  identity.root_fingerprint = TestDigest(model);
  identity.layout_digest = TestDigest("layout-f16-2x2x8");
  identity.block_size = block_size;
  identity.block_bytes = block_bytes;
  return identity;
}

// A chain of `count` full blocks whose tokens start at `first_token`, keyed as the cache keys them
// (with `salt`, and owned by the tenant whose salt that is).
inline std::vector<BlockMeta> TestChain(const TierIdentity& identity, size_t count,
                                        int32_t first_token = 1, const char* salt = "") {
  std::vector<BlockMeta> chain;
  const Digest extras = ExtrasDigest(CacheKeyExtras{salt, ""});
  Digest parent = identity.root_fingerprint;
  int32_t token = first_token;
  for (size_t i = 0; i < count; ++i) {
    BlockMeta meta;
    meta.parent_key = parent;
    meta.extras_digest = extras;
    meta.owner = TenantSaltDigest(salt);
    for (uint32_t t = 0; t < identity.block_size; ++t) meta.tokens.push_back(token++);
    meta.key = BlockKey(parent, extras, meta.tokens, true);
    parent = meta.key;
    chain.push_back(meta);
  }
  return chain;
}

// Payload bytes that differ per block and per position.
inline std::vector<uint8_t> TestPayload(const TierIdentity& identity, const BlockMeta& meta) {
  std::vector<uint8_t> payload(identity.block_bytes);
  for (size_t i = 0; i < payload.size(); ++i) {
    payload[i] = static_cast<uint8_t>(meta.key[i % meta.key.size()] + i * 7);
  }
  return payload;
}

inline std::vector<Digest> Keys(const std::vector<BlockMeta>& chain) {
  std::vector<Digest> keys;
  for (const auto& meta : chain) keys.push_back(meta.key);
  return keys;
}

// Keeps what a tier told, in order: "+KEYHEX" stored, "-KEYHEX" removed, and each block's ref.
class RecordingListener : public TierListener {
 public:
  void OnTierBlockStored(const char* tier, const TierBlockRef& block) override {
    Note(tier, '+', block);
  }
  void OnTierBlockRemoved(const char* tier, const TierBlockRef& block) override {
    Note(tier, '-', block);
  }
  std::vector<std::string> Told() const {
    std::lock_guard lock(mutex_);
    return told_;
  }
  std::vector<TierBlockRef> Refs() const {
    std::lock_guard lock(mutex_);
    return refs_;
  }
  std::string tier() const {
    std::lock_guard lock(mutex_);
    return tier_;
  }
  static std::string Stored(const BlockMeta& meta) { return Line('+', meta.key); }
  static std::string Removed(const BlockMeta& meta) { return Line('-', meta.key); }

 private:
  static std::string Line(char sign, const Digest& key) {
    std::string line(1, sign);
    line += ToHex(key);
    return line;
  }
  void Note(const char* tier, char sign, const TierBlockRef& block) {
    std::lock_guard lock(mutex_);
    tier_ = tier;
    told_.push_back(Line(sign, block.key));
    refs_.push_back(block);
  }
  mutable std::mutex mutex_;
  std::string tier_;
  std::vector<std::string> told_;
  std::vector<TierBlockRef> refs_;
};

}  // namespace reprise::testing
