#include "kvcache/eviction_queue.h"

#include <utility>

namespace reprise {

EvictionQueue::EvictionQueue(int64_t num_blocks, TimeSource now)
    : now_(std::move(now)), order_(num_blocks), running_(num_blocks) {}

void EvictionQueue::Add(BlockId id, int priority, bool is_protected, double expiry,
                        uint64_t last_used) {
  bool ttl_running = expiry > 0 && expiry > now_();
  order_.Push(id, OrderKey{ttl_running, priority, is_protected, last_used});
  if (ttl_running) running_.Push(id, ExpiryKey{expiry, id});
}

void EvictionQueue::Remove(BlockId id) {
  order_.Erase(id);
  if (running_.Contains(id)) running_.Erase(id);
}

std::optional<BlockId> EvictionQueue::PopVictim() {
  if (order_.empty()) return std::nullopt;
  Expire();
  BlockId victim = order_.Top();
  Remove(victim);
  return victim;
}

void EvictionQueue::Expire() {
  if (running_.empty()) return;
  double now = now_();
  while (!running_.empty() && running_.TopKey().expiry <= now) {
    BlockId id = running_.Top();
    running_.Erase(id);
    OrderKey key = order_.KeyOf(id);
    key.ttl_running = false;
    order_.Update(id, key);
  }
}

}  // namespace reprise
