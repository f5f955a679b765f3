#include "router/prefix_directory.h"

#include "core/error.h"

namespace reprise::router {
namespace {

uint64_t Bit(int replica) {
  REPRISE_CHECK(replica >= 0 && replica < kMaxReplicas, "replica index {} out of range", replica);
  return uint64_t{1} << replica;
}

}  // namespace

void PrefixDirectory::Drop(uint64_t holders) {
  for (int r = 0; r < kMaxReplicas; ++r) {
    if ((holders & (uint64_t{1} << r)) != 0) --held_[r];
  }
}

PrefixDirectory::PrefixDirectory(size_t capacity_keys) : capacity_(capacity_keys) {}

void PrefixDirectory::Record(const std::vector<Digest>& keys, int replica) {
  uint64_t bit = Bit(replica);
  std::lock_guard lock(mutex_);
  for (const Digest& key : keys) {
    auto [it, inserted] = entries_.try_emplace(key);
    if (inserted) {
      lru_.push_front(key);
    } else {
      lru_.splice(lru_.begin(), lru_, it->second.age);
    }
    it->second.age = lru_.begin();
    if ((it->second.holders & bit) == 0) ++held_[replica];
    it->second.holders |= bit;
  }
  while (entries_.size() > capacity_ && !lru_.empty()) {
    auto oldest = entries_.find(lru_.back());
    Drop(oldest->second.holders);
    entries_.erase(oldest);
    lru_.pop_back();
  }
}

void PrefixDirectory::Remove(const Digest& key, int replica) {
  uint64_t bit = Bit(replica);
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end() || (it->second.holders & bit) == 0) return;
  --held_[replica];
  it->second.holders &= ~bit;
  if (it->second.holders == 0) {
    lru_.erase(it->second.age);
    entries_.erase(it);
  }
}

void PrefixDirectory::ClearReplica(int replica) {
  uint64_t bit = Bit(replica);
  std::lock_guard lock(mutex_);
  held_[replica] = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    it->second.holders &= ~bit;
    if (it->second.holders == 0) {
      lru_.erase(it->second.age);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t PrefixDirectory::MatchedBlocks(const std::vector<Digest>& keys, int replica) const {
  uint64_t bit = Bit(replica);
  std::lock_guard lock(mutex_);
  size_t matched = 0;
  for (const Digest& key : keys) {
    auto it = entries_.find(key);
    if (it == entries_.end() || (it->second.holders & bit) == 0) break;
    ++matched;
  }
  return matched;
}

size_t PrefixDirectory::HeldBy(int replica) const {
  Bit(replica);
  std::lock_guard lock(mutex_);
  return held_[replica];
}

size_t PrefixDirectory::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace reprise::router
