#include "router/prefix_directory.h"

#include "core/error.h"

namespace reprise::router {
namespace {

uint64_t Bit(int replica) {
  REPRISE_CHECK(replica >= 0 && replica < kMaxReplicas, "replica index {} out of range", replica);
  return uint64_t{1} << replica;
}

size_t Index(KvEventTier tier) { return static_cast<size_t>(tier); }

}  // namespace

PrefixDirectory::PrefixDirectory(size_t capacity_keys) : capacity_(capacity_keys) {}

void PrefixDirectory::RecordLocked(const Digest& key, int replica, size_t tier) {
  const uint64_t bit = Bit(replica);
  auto [it, inserted] = entries_.try_emplace(key);
  if (inserted) {
    lru_.push_front(key);
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.age);
  }
  it->second.age = lru_.begin();
  if ((it->second.holders[tier] & bit) == 0) ++held_[tier][replica];
  it->second.holders[tier] |= bit;
}

void PrefixDirectory::TrimLocked() {
  while (entries_.size() > capacity_ && !lru_.empty()) {
    auto oldest = entries_.find(lru_.back());
    for (size_t tier = 0; tier < kTierCount; ++tier) {
      for (int r = 0; r < kMaxReplicas; ++r) {
        if ((oldest->second.holders[tier] & (uint64_t{1} << r)) != 0) --held_[tier][r];
      }
    }
    entries_.erase(oldest);
    lru_.pop_back();
  }
}

void PrefixDirectory::EraseIfEmptyLocked(
    std::unordered_map<Digest, Entry, DigestHash>::iterator it) {
  for (uint64_t holders : it->second.holders) {
    if (holders != 0) return;
  }
  lru_.erase(it->second.age);
  entries_.erase(it);
}

void PrefixDirectory::Record(const std::vector<Digest>& keys, int replica, KvEventTier tier) {
  std::lock_guard lock(mutex_);
  for (const Digest& key : keys) RecordLocked(key, replica, Index(tier));
  TrimLocked();
}

void PrefixDirectory::Remove(const Digest& key, int replica, KvEventTier tier) {
  const uint64_t bit = Bit(replica);
  const size_t t = Index(tier);
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end() || (it->second.holders[t] & bit) == 0) return;
  --held_[t][replica];
  it->second.holders[t] &= ~bit;
  EraseIfEmptyLocked(it);
}

void PrefixDirectory::ClearLocked(int replica) {
  const uint64_t bit = Bit(replica);
  for (auto& counts : held_) counts[replica] = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    for (uint64_t& holders : it->second.holders) holders &= ~bit;
    EraseIfEmptyLocked(it);
    it = next;
  }
}

void PrefixDirectory::ClearReplica(int replica) {
  std::lock_guard lock(mutex_);
  ClearLocked(replica);
}

void PrefixDirectory::ReplaceReplica(int replica, const std::vector<Digest> (&held)[kTierCount]) {
  std::lock_guard lock(mutex_);
  ClearLocked(replica);
  for (size_t tier = 0; tier < kTierCount; ++tier) {
    for (const Digest& key : held[tier]) RecordLocked(key, replica, tier);
  }
  TrimLocked();
}

size_t PrefixDirectory::MatchedBlocks(const std::vector<Digest>& keys, int replica,
                                      std::initializer_list<KvEventTier> tiers) const {
  const uint64_t bit = Bit(replica);
  std::lock_guard lock(mutex_);
  size_t matched = 0;
  for (const Digest& key : keys) {
    auto it = entries_.find(key);
    if (it == entries_.end()) break;
    bool held = false;
    for (KvEventTier tier : tiers) held = held || (it->second.holders[Index(tier)] & bit) != 0;
    if (!held) break;
    ++matched;
  }
  return matched;
}

size_t PrefixDirectory::HeldBy(int replica, KvEventTier tier) const {
  Bit(replica);
  std::lock_guard lock(mutex_);
  return held_[Index(tier)][replica];
}

size_t PrefixDirectory::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace reprise::router
