#include "engine/tier_link.h"

#include <cstring>

#include "core/error.h"

namespace reprise {

TierLink::TierLink(std::unique_ptr<TierSet> tiers, PrefixCache& cache, int write_through_priority)
    : tiers_(std::move(tiers)), cache_(cache), write_through_priority_(write_through_priority) {}

void TierLink::Offer(const CachedBlockInfo& block, bool wait_for_room) {
  if (!block.full) return;  // tails change as a chat goes on: only full blocks are kept beyond RAM
  BlockMeta meta;
  meta.key = *block.key;
  meta.parent_key = *block.parent_key;
  meta.extras_digest = *block.extras_digest;
  meta.owner = *block.owner;
  meta.tokens.assign(block.tokens.begin(), block.tokens.end());
  tiers_->Offer(meta, block.data, wait_for_room);
}

void TierLink::OnBlockStored(const CachedBlockInfo& block) {
  // Pinned blocks are few and precious (task prompts): they wait for room rather than be lost.
  if (block.pinned) {
    Offer(block, /*wait_for_room=*/true);
  } else if (block.priority >= write_through_priority_) {
    Offer(block, /*wait_for_room=*/false);
  }
}

void TierLink::OnBlockRemoved(const CachedBlockInfo& block, BlockRemoval reason) {
  switch (reason) {
    case BlockRemoval::kEvicted:
      Offer(block, /*wait_for_room=*/false);  // the engine thread never waits on a disk
      break;
    case BlockRemoval::kCleared:
      Offer(block, /*wait_for_room=*/true);  // an operator's request: keep everything
      break;
    case BlockRemoval::kSuperseded:
      break;
  }
}

void TierLink::PersistAll() {
  cache_.ForEachIndexed([this](const CachedBlockInfo& block) { Offer(block, true); });
  tiers_->Flush();
}

size_t TierLink::ProbablyHeld(std::span<const Digest> keys) { return tiers_->ProbablyHeld(keys); }

void TierLink::StartLoad(Sequence& sequence, size_t first_block) {
  const auto block_size = static_cast<size_t>(cache_.block_size());
  const size_t count = sequence.blocks.size() - first_block;
  std::vector<BlockMeta> blocks(count);
  std::vector<uint8_t*> dests(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t index = first_block + i;
    BlockMeta& meta = blocks[i];
    meta.key = sequence.key_chain.keys()[index];
    meta.parent_key = sequence.key_chain.ParentOf(index);
    meta.extras_digest = sequence.key_chain.extras_digest();
    meta.tokens.assign(sequence.tokens.begin() + static_cast<ptrdiff_t>(index * block_size),
                       sequence.tokens.begin() + static_cast<ptrdiff_t>((index + 1) * block_size));
    dests[i] = cache_.BlockData(sequence.blocks[index]);
  }
  REPRISE_CHECK(loading_.emplace(sequence.id, &sequence).second, "sequence {} loads twice",
                sequence.id);
  tiers_->StartLoad(sequence.id, std::move(blocks), std::move(dests));
}

std::vector<TierLink::Finished> TierLink::TakeFinished() {
  std::vector<Finished> finished;
  const auto block_size = static_cast<size_t>(cache_.block_size());
  for (const TierLoad& load : tiers_->TakeFinished()) {
    auto found = loading_.find(load.ticket);
    REPRISE_CHECK(found != loading_.end(), "a load finished for unknown sequence {}", load.ticket);
    Finished done;
    done.sequence = found->second;
    done.loaded = load.loaded;
    for (int source : load.sources) {
      const bool disk = std::strcmp(tiers_->TierName(static_cast<size_t>(source)), "disk") == 0;
      (disk ? done.sources.disk : done.sources.remote) += block_size;
    }
    loading_.erase(found);
    finished.push_back(done);
  }
  return finished;
}

}  // namespace reprise
