// Which replica holds which KV block, and where (its memory, its disk tier, or the shared tier it
// wrote it to), as far as the router knows: from the replicas' KV events and snapshots when they
// flow, else from its own record of where it sent which prompt (memory). Bounded: the least
// recently used keys are forgotten first. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/sha256.h"
#include "kvevents/kv_event.h"

namespace reprise::router {

inline constexpr int kMaxReplicas = 64;
using kvevents::KvEventTier;
inline constexpr size_t kTierCount = 3;  // memory, disk, remote

class PrefixDirectory {
 public:
  explicit PrefixDirectory(size_t capacity_keys);

  // `replica` holds the blocks with these keys in `tier`.
  void Record(const std::vector<Digest>& keys, int replica,
              KvEventTier tier = KvEventTier::kMemory);
  // `replica` dropped the block with this key from `tier` (its other tiers keep theirs).
  void Remove(const Digest& key, int replica, KvEventTier tier = KvEventTier::kMemory);
  // `replica` holds nothing any more, in any tier (it restarted, or what we knew is stale).
  void ClearReplica(int replica);
  // What `replica` holds is exactly this, per tier ([kTierCount], indexed by KvEventTier): one
  // step, so that no routing decision sees it half done.
  void ReplaceReplica(int replica, const std::vector<Digest> (&held)[kTierCount]);
  // How many of `keys`, from the first, `replica` holds in one of `tiers` (a chain: stops at
  // the first block it holds in none of them).
  size_t MatchedBlocks(const std::vector<Digest>& keys, int replica,
                       std::initializer_list<KvEventTier> tiers = {KvEventTier::kMemory}) const;
  size_t size() const;
  // How many keys `replica` holds in `tier`: its memory's count is how much of the cache it is
  // trusted with.
  size_t HeldBy(int replica, KvEventTier tier = KvEventTier::kMemory) const;

 private:
  struct Entry {
    uint64_t holders[kTierCount] = {};  // bit per replica, per tier
    std::list<Digest>::iterator age;
  };
  // The caller holds mutex_.
  void RecordLocked(const Digest& key, int replica, size_t tier);
  void ClearLocked(int replica);
  void TrimLocked();
  void EraseIfEmptyLocked(std::unordered_map<Digest, Entry, DigestHash>::iterator it);

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<Digest, Entry, DigestHash> entries_;
  std::list<Digest> lru_;  // front: most recently used
  size_t held_[kTierCount][kMaxReplicas] = {};
};

}  // namespace reprise::router
