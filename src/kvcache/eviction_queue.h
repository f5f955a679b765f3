// EvictionQueue: the cached blocks that may be evicted right now, in eviction order:
// blocks whose TTL still runs go last; then lowest priority first; then probation before
// protected (see PrefixCache); then least recently used.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "kvcache/block_pool.h"
#include "kvcache/indexed_heap.h"

namespace reprise {

// Seconds on a monotonic clock; injectable so tests can move time.
using TimeSource = std::function<double()>;

class EvictionQueue {
 public:
  // `now` is called only while some queued block has a TTL.
  EvictionQueue(int64_t num_blocks, TimeSource now);

  bool empty() const { return order_.empty(); }
  size_t size() const { return order_.size(); }
  bool Contains(BlockId id) const { return order_.Contains(id); }

  // `priority` 0..100 (higher is kept longer), `is_protected`: the block proved its reuse and
  // goes after every probationary block of its priority, `expiry` in TimeSource seconds (0: no
  // TTL), `last_used` a recency stamp (larger is more recent; unique per block for a total order).
  void Add(BlockId id, int priority, bool is_protected, double expiry, uint64_t last_used);
  void Remove(BlockId id);
  // Takes the next victim out of the queue; nullopt when empty.
  std::optional<BlockId> PopVictim();

 private:
  struct OrderKey {
    bool ttl_running;  // false sorts first
    int priority;
    bool is_protected;  // false sorts first
    uint64_t last_used;
    bool operator<(const OrderKey& other) const {
      if (ttl_running != other.ttl_running) return !ttl_running;
      if (priority != other.priority) return priority < other.priority;
      if (is_protected != other.is_protected) return !is_protected;
      return last_used < other.last_used;
    }
  };
  struct ExpiryKey {
    double expiry;
    BlockId id;
    bool operator<(const ExpiryKey& other) const {
      return expiry != other.expiry ? expiry < other.expiry : id < other.id;
    }
  };

  // Moves every block whose TTL ran out into the ordinary order.
  void Expire();

  TimeSource now_;
  IndexedHeap<OrderKey> order_;     // every queued block
  IndexedHeap<ExpiryKey> running_;  // the queued blocks whose TTL still runs
};

}  // namespace reprise
