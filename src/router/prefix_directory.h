// Which replica holds which KV block, as far as the router knows: from the replicas' KV events
// when they flow, else from its own record of where it sent which prompt. Bounded: the least
// recently used keys are forgotten first. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/sha256.h"

namespace reprise::router {

inline constexpr int kMaxReplicas = 64;

class PrefixDirectory {
 public:
  explicit PrefixDirectory(size_t capacity_keys);

  // `replica` holds the blocks with these keys.
  void Record(const std::vector<Digest>& keys, int replica);
  // `replica` dropped the block with this key.
  void Remove(const Digest& key, int replica);
  // `replica` holds nothing any more (it restarted, or cleared its cache).
  void ClearReplica(int replica);
  // How many of `keys`, from the first, `replica` holds (a chain: stops at the first gap).
  size_t MatchedBlocks(const std::vector<Digest>& keys, int replica) const;
  size_t size() const;
  // How many keys `replica` holds: a measure of how much of the cache it is trusted with.
  size_t HeldBy(int replica) const;

 private:
  struct Entry {
    uint64_t holders = 0;  // bit per replica
    std::list<Digest>::iterator age;
  };
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<Digest, Entry, DigestHash> entries_;
  std::list<Digest> lru_;  // front: most recently used
  size_t held_[kMaxReplicas] = {};
  void Drop(uint64_t holders);
};

}  // namespace reprise::router
