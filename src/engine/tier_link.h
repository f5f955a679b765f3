// TierLink: joins the prefix cache and the scheduler to the tiers beyond memory. As the cache's
// listener it writes evicted and cleared blocks back (and pinned or high-priority blocks through,
// when committed); as the scheduler's loader it starts loads into blocks set aside and hands the
// finished ones back on the engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "kvcache/prefix_cache.h"
#include "kvcache/prefix_cache_listener.h"
#include "tiers/tier_set.h"

namespace reprise {

class TierLink : public PrefixCacheListener, public BlockLoader {
 public:
  TierLink(std::unique_ptr<TierSet> tiers, PrefixCache& cache, int write_through_priority);

  TierSet& tiers() { return *tiers_; }
  const TierSet& tiers() const { return *tiers_; }

  void OnBlockStored(const CachedBlockInfo& block) override;
  void OnBlockRemoved(const CachedBlockInfo& block, BlockRemoval reason) override;

  // Writes every block memory holds that the tiers lack (waiting for room): a clean stop keeps
  // the whole cache for the next start.
  void PersistAll();

  size_t ProbablyHeld(std::span<const Digest> keys) override;
  void StartLoad(Sequence& sequence, size_t first_block) override;

  // A finished load: its sequence, the blocks loaded, and the tokens loaded from each source.
  struct Finished {
    Sequence* sequence = nullptr;
    size_t loaded = 0;
    CacheSources sources;  // memory stays 0
  };
  std::vector<Finished> TakeFinished();
  size_t LoadsInFlight() const { return loading_.size(); }

 private:
  void Offer(const CachedBlockInfo& block, bool wait_for_room);

  std::unique_ptr<TierSet> tiers_;
  PrefixCache& cache_;
  int write_through_priority_;
  std::unordered_map<uint64_t, Sequence*> loading_;  // by sequence id (the load's ticket)
};

}  // namespace reprise
