// PrefixCacheListener: told of every block the prefix cache indexes or drops, on the engine
// thread, while the block's bytes are still there. Whoever keeps blocks elsewhere (a slower tier,
// an event stream) listens here; the cache itself knows nothing of them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/sha256.h"
#include "kvcache/block_pool.h"

namespace reprise {

// One indexed block, valid only during the call.
struct CachedBlockInfo {
  BlockId block = kNoBlock;
  const Digest* key = nullptr;
  const Digest* parent_key = nullptr;  // the root fingerprint for a sequence's first block
  const Digest* extras_digest = nullptr;
  const Digest* owner = nullptr;    // RetentionPolicy::owner (zero: none)
  std::span<const int32_t> tokens;  // block_size of them for a full block, fewer for a tail
  std::span<const uint8_t> data;    // the block's KV bytes (final once indexed)
  bool full = true;
  bool pinned = false;
  int priority = 0;
};

enum class BlockRemoval {
  kEvicted,     // room was needed: its memory is handed out right after the call
  kCleared,     // an operator cleared the cache
  kSuperseded,  // a tail whose tokens a longer sibling holds
};

class PrefixCacheListener {
 public:
  virtual ~PrefixCacheListener() = default;
  // The block was just committed to the index.
  virtual void OnBlockStored(const CachedBlockInfo& block) = 0;
  // The block is leaving the index; copy what you need now.
  virtual void OnBlockRemoved(const CachedBlockInfo& block, BlockRemoval reason) = 0;
};

// Tells several listeners (the tiers, the KV event stream) in turn; the cache takes one.
class PrefixCacheListeners : public PrefixCacheListener {
 public:
  void Add(PrefixCacheListener* listener) { listeners_.push_back(listener); }
  bool empty() const { return listeners_.empty(); }
  void OnBlockStored(const CachedBlockInfo& block) override {
    for (PrefixCacheListener* listener : listeners_) listener->OnBlockStored(block);
  }
  void OnBlockRemoved(const CachedBlockInfo& block, BlockRemoval reason) override {
    for (PrefixCacheListener* listener : listeners_) listener->OnBlockRemoved(block, reason);
  }

 private:
  std::vector<PrefixCacheListener*> listeners_;
};

}  // namespace reprise
