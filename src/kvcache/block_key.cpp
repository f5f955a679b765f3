#include "kvcache/block_key.h"

#include <bit>

namespace reprise {
namespace {

void UpdateLength(Sha256& hasher, uint64_t length) {
  static_assert(std::endian::native == std::endian::little, "keys assume a little-endian host");
  hasher.UpdateValue(length);
}

}  // namespace

Digest TenantSaltDigest(std::string_view tenant_salt) {
  if (tenant_salt.empty()) return Digest{};
  Sha256 hasher;
  hasher.Update("reprise.kv.tenant.v1");
  hasher.Update(tenant_salt);
  return hasher.Finish();
}

Digest ExtrasDigest(const CacheKeyExtras& extras) {
  Sha256 hasher;
  hasher.Update("reprise.kv.extras.v1");
  UpdateLength(hasher, extras.cache_salt.size());
  hasher.Update(extras.cache_salt);
  UpdateLength(hasher, extras.extra.size());
  hasher.Update(extras.extra);
  return hasher.Finish();
}

Digest BlockKey(const Digest& parent_key, const Digest& extras_digest,
                std::span<const int32_t> tokens, bool full) {
  Sha256 hasher;
  hasher.Update(full ? std::string_view("reprise.kv.full.v1")
                     : std::string_view("reprise.kv.tail.v1"));
  hasher.Update(parent_key.data(), parent_key.size());
  hasher.Update(extras_digest.data(), extras_digest.size());
  UpdateLength(hasher, tokens.size());
  hasher.UpdateSpan(tokens);  // int32 little-endian (checked above)
  return hasher.Finish();
}

void BlockKeyChain::Extend(std::span<const int32_t> tokens, size_t block_size) {
  while ((keys_.size() + 1) * block_size <= tokens.size()) {
    const size_t index = keys_.size();
    keys_.push_back(BlockKey(ParentOf(index), extras_digest_,
                             tokens.subspan(index * block_size, block_size), true));
  }
}

}  // namespace reprise
