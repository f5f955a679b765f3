// RedisTier: KV blocks in Redis or a Redis Cluster, shared by every replica that uses the same
// store, so one replica loads what another computed. A block is one value under
// NAMESPACE:ROOT-FINGERPRINT:BLOCK-KEY (hex), in the shared block format (header, checksum) and
// with a TTL; a prompt's chain is fetched with one pipelined GET per block (one round trip per
// node, not per block) and every loaded block is verified as the disk tier's are. The size bound
// covers what this process wrote: past it, its oldest blocks are deleted (Redis's own maxmemory
// and the TTL bound the rest). Clears, whole or of one owner (BlockMeta::owner), cover the blocks
// this process wrote, as other replicas clear theirs. Redis down, slow or restarted: counted,
// logged once, the tier answers "not held" and the client reconnects with backoff; a request never
// fails for it.
//
// What it tells its listener, and lists in Blocks, is the blocks this process wrote, each until it
// is deleted, found gone, or its TTL (counted from its last write here) has passed: several
// replicas share one store, and each tells only of its own writes, so a reader keeping one record
// per writer never counts a block twice and never keeps one that its writer saw end.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>

#include "redis/redis_client.h"
#include "tiers/block_format.h"
#include "tiers/kv_tier.h"

namespace reprise {

struct RedisTierConfig {
  std::string name_space = "reprise";
  std::chrono::seconds ttl{24 * 3600};
  uint64_t capacity_bytes = 0;  // of blocks this process wrote; 0: no bound
  // A key found missing is not looked up again for this long (ProbablyHeld must not block, so
  // it answers from what the tier saw).
  std::chrono::milliseconds miss_memory{2000};
  // Told of the blocks this process wrote and of their end: deleted by it (size bound, clears,
  // refused at load), found gone at a load, or their TTL passed without a new write (may be null).
  TierListener* listener = nullptr;
};

class RedisTier : public KvTier {
 public:
  RedisTier(const TierIdentity& identity, const RedisTierConfig& config,
            std::shared_ptr<redis::RedisClient> client);

  const char* name() const override { return "remote"; }
  size_t ProbablyHeld(std::span<const Digest> keys) const override;
  bool ShouldStore(const Digest& key) const override;
  bool Store(const BlockMeta& meta, std::span<const uint8_t> payload) override;
  size_t LoadPrefix(std::span<const BlockMeta> blocks, std::span<uint8_t* const> dests) override;
  bool Remove(const Digest& key) override;
  size_t Clear() override;
  size_t ClearOwned(const Digest& owner) override;
  TierStats Stats() const override;
  std::vector<TierBlockRef> Blocks() const override;
  // Forgets (and tells of) the blocks whose TTL has passed.
  void Maintain() override;

  // The Redis key of a block.
  std::string RedisKey(const Digest& key) const;

 private:
  // Runs commands; on failure counts it, logs the first failure of an outage, and returns
  // false. Logs when the store answers again.
  bool Run(const std::vector<redis::RedisCommand>& commands, std::vector<redis::RedisReply>& out);
  // Caller holds mutex_.
  void NoteWritten(const TierBlockRef& ref, uint64_t bytes);
  // Forgets a block this process wrote, telling the listener it is gone when it was told stored.
  void ForgetWrittenLocked(const Digest& key);
  // DELs `keys` and forgets them; returns how many the store still held.
  size_t DeleteWritten(const std::vector<Digest>& keys);
  std::vector<redis::RedisCommand> TrimLocked();  // DELs to get under the bound

  TierIdentity identity_;
  RedisTierConfig config_;
  std::shared_ptr<redis::RedisClient> client_;
  std::string prefix_;  // NAMESPACE:ROOT:

  mutable std::mutex mutex_;  // guards everything below
  struct Written {
    uint64_t bytes = 0;
    TierBlockRef ref;
    std::chrono::steady_clock::time_point expires;  // its TTL, from its last write here
    bool confirmed = false;                         // the store said OK (else: being written)
    std::list<Digest>::iterator age;
  };
  std::unordered_map<Digest, Written, DigestHash> written_;  // by this process, still counted
  std::list<Digest> written_order_;  // oldest first (so also soonest to expire)
  mutable std::unordered_map<Digest, std::chrono::steady_clock::time_point, DigestHash> missing_;
  TierStats stats_;
  bool down_ = false;
  std::chrono::steady_clock::time_point last_failure_{};
};

}  // namespace reprise
