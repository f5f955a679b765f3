// PrefixCache::CheckInvariants: a full walk over the bookkeeping, for tests and debugging.
#include <vector>

#include "core/error.h"
#include "kvcache/prefix_cache.h"

namespace reprise {

void PrefixCache::CheckInvariants() const {
  const int64_t n = config_.num_blocks;
  std::vector<int32_t> children(static_cast<size_t>(n), 0);
  std::vector<int32_t> held_children(static_cast<size_t>(n), 0);
  for (BlockId id = 0; id < n; ++id) {
    if (!index_.Contains(id)) continue;
    const BlockId parent = index_.Parent(id);
    if (parent == kNoBlock) continue;
    REPRISE_CHECK(index_.Contains(parent) && !index_.IsPartial(parent),
                  "block {} hangs under {} which is not an indexed full block", id, parent);
    ++children[static_cast<size_t>(parent)];
    if (Held(id)) ++held_children[static_cast<size_t>(parent)];
  }

  int64_t in_use = 0, cached = 0, free = 0, pinned = 0, evictable = 0, queued = 0;
  int64_t protected_count = 0;
  size_t indexed = 0;
  for (BlockId id = 0; id < n; ++id) {
    const BlockState& state = state_[static_cast<size_t>(id)];
    const int32_t refs = pool_.RefCount(id);
    REPRISE_CHECK(refs >= 0, "block {} has ref count {}", id, refs);
    const bool is_indexed = index_.Contains(id);
    if (pool_.IsFree(id)) {
      REPRISE_CHECK(refs == 0 && !is_indexed && !state.pinned && !state.duplicate,
                    "free block {} is referenced, indexed, pinned or a duplicate", id);
      ++free;
    } else if (refs > 0) {
      ++in_use;
    } else {
      REPRISE_CHECK(is_indexed, "block {} is neither free, in use nor cached (leaked)", id);
      ++cached;
    }
    if (state.pinned) {
      REPRISE_CHECK(is_indexed, "pinned block {} is not indexed", id);
      ++pinned;
    }
    if (queue_.Contains(id)) ++queued;
    REPRISE_CHECK(protected_.Contains(id) == state.is_protected,
                  "block {} is_protected={} but in the protected heap={}", id, state.is_protected,
                  protected_.Contains(id));
    if (!is_indexed) {
      REPRISE_CHECK(!queue_.Contains(id), "block {} is queued but not indexed", id);
      REPRISE_CHECK(!state.is_protected, "block {} is protected but not indexed", id);
      continue;
    }
    if (state.is_protected) {
      ++protected_count;
      REPRISE_CHECK(protected_.KeyOf(id) == state.last_used,
                    "protected block {} is ordered by a stale use {} (last used {})", id,
                    protected_.KeyOf(id), state.last_used);
    }
    ++indexed;
    REPRISE_CHECK(!state.duplicate, "indexed block {} is marked as a duplicate", id);
    REPRISE_CHECK(index_.NumChildren(id) == children[static_cast<size_t>(id)],
                  "block {} counts {} children, has {}", id, index_.NumChildren(id),
                  children[static_cast<size_t>(id)]);
    REPRISE_CHECK(state.held_children == held_children[static_cast<size_t>(id)],
                  "block {} counts {} held children, has {}", id, state.held_children,
                  held_children[static_cast<size_t>(id)]);
    REPRISE_CHECK(!index_.IsPartial(id) || children[static_cast<size_t>(id)] == 0,
                  "tail block {} has children", id);
    const bool held = Held(id);
    if (!held) ++evictable;
    const bool wanted = !held && index_.NumChildren(id) == 0;
    REPRISE_CHECK(queue_.Contains(id) == wanted, "block {} queued={} but evictable leaf={}", id,
                  queue_.Contains(id), wanted);
    // The key is what the content says.
    const BlockId parent = index_.Parent(id);
    const Digest& parent_key = parent == kNoBlock ? config_.root_fingerprint : index_.Key(parent);
    REPRISE_CHECK(BlockKey(parent_key, index_.Extras(id), index_.Tokens(id),
                           !index_.IsPartial(id)) == index_.Key(id),
                  "key of block {} does not match its content", id);
    REPRISE_CHECK(index_.Find(index_.Key(id)) == id, "block {} is not found by its key", id);
  }
  REPRISE_CHECK(indexed == index_.size(), "index holds {} keys for {} indexed blocks",
                index_.size(), indexed);
  REPRISE_CHECK(static_cast<size_t>(free) == pool_.NumFree(), "free stack size is off");
  REPRISE_CHECK(queued == static_cast<int64_t>(queue_.size()), "eviction queue size is off");
  REPRISE_CHECK(evictable == num_evictable_, "evictable count {} but {} found", num_evictable_,
                evictable);
  REPRISE_CHECK(in_use + cached + free == n, "census does not add up");
  REPRISE_CHECK(protected_.size() <= protected_capacity_,
                "protected tier holds {} blocks, more than its {}", protected_.size(),
                protected_capacity_);
  REPRISE_CHECK(protected_count == static_cast<int64_t>(protected_.size()) &&
                    protected_count == Stats().blocks_protected,
                "protected count {} differs from the heap ({}) or the stats ({})", protected_count,
                protected_.size(), Stats().blocks_protected);
  const CacheStats stats = Stats();
  REPRISE_CHECK(stats.blocks_in_use == in_use && stats.blocks_cached == cached &&
                    stats.blocks_free == free && stats.blocks_pinned == pinned,
                "stats census ({}, {}, {}, {}) differs from the blocks ({}, {}, {}, {})",
                stats.blocks_in_use, stats.blocks_cached, stats.blocks_free, stats.blocks_pinned,
                in_use, cached, free, pinned);
}

}  // namespace reprise
