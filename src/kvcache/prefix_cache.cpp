#include "kvcache/prefix_cache.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/error.h"

namespace reprise {
namespace {

TimeSource SteadySeconds() {
  return [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
}

void Add(std::atomic<int64_t>& counter, int64_t delta) {
  counter.fetch_add(delta, std::memory_order_relaxed);
}

}  // namespace

PrefixCache::PrefixCache(const PrefixCacheConfig& config, TimeSource now)
    : config_(config),
      now_(now ? std::move(now) : SteadySeconds()),
      pool_(config.num_blocks, config.block_bytes),
      index_(config.num_blocks, config.block_size),
      queue_(config.num_blocks, now_),
      state_(static_cast<size_t>(config.num_blocks)),
      protected_(config.num_blocks) {
  REPRISE_CHECK(config.protected_share >= 0 && config.protected_share <= 1,
                "protected share {} is not within 0..1", config.protected_share);
  protected_capacity_ =
      static_cast<size_t>(config.protected_share * static_cast<double>(config.num_blocks));
  blocks_free_.store(config.num_blocks, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// Engine-facing calls.

template <typename Visit>
size_t PrefixCache::WalkFullBlocks(std::span<const Digest> keys, size_t queried,
                                   Visit&& visit) const {
  const size_t block_size = static_cast<size_t>(config_.block_size);
  REPRISE_CHECK(keys.size() >= queried / block_size, "{} block keys for {} tokens", keys.size(),
                queried);
  size_t position = 0;
  for (size_t block = 0; position + block_size <= queried; ++block) {
    std::optional<BlockId> found = index_.Find(keys[block]);
    if (!found) break;
    visit(*found, keys[block], position);
    position += block_size;
  }
  return position;
}

PrefixMatch PrefixCache::Match(std::span<const int32_t> tokens, size_t max_tokens,
                               const CacheKeyExtras& extras, const RetentionPolicy& policy,
                               size_t held_tokens) {
  BlockKeyChain chain(config_.root_fingerprint, extras);
  if (config_.enable_reuse) {
    chain.Extend(tokens.first(std::min(max_tokens, tokens.size())),
                 static_cast<size_t>(config_.block_size));
  }
  return MatchChain(tokens, max_tokens, chain, policy, held_tokens);
}

PrefixMatch PrefixCache::MatchChain(std::span<const int32_t> tokens, size_t max_tokens,
                                    const BlockKeyChain& chain, const RetentionPolicy& policy,
                                    size_t held_tokens) {
  const size_t queried = std::min(max_tokens, tokens.size());
  const size_t block_size = static_cast<size_t>(config_.block_size);
  Add(lookups_, 1);
  PrefixMatch match;
  if (!config_.enable_reuse || queried == 0) {
    Add(miss_tokens_, static_cast<int64_t>(queried));
    return match;
  }
  REPRISE_CHECK(policy.priority >= 0 && policy.priority <= 100 && policy.ttl_seconds >= 0,
                "bad retention policy (priority {}, ttl {})", policy.priority, policy.ttl_seconds);
  const Digest& extras_digest = chain.extras_digest();
  match.blocks.reserve(queried / block_size + 1);

  // Full blocks, by key.
  BlockId parent = kNoBlock;
  size_t position =
      WalkFullBlocks(chain.keys(), queried, [&](BlockId found, const Digest& key, size_t start) {
        Reference(found);
        MergePolicy(found, policy);
        if (start + block_size > held_tokens) NoteReuse(found);
        match.blocks.push_back(found);
        match.last_full_key = key;
        parent = found;
      });

  // Then the longest partial match into one child (full or tail), copied into a fresh block.
  if (position < queried) {
    size_t window = std::min(block_size, queried - position);
    auto [source, length] =
        index_.LongestPartialMatch(parent, extras_digest, tokens.subspan(position, window));
    if (source != kNoBlock) {
      Reference(source);  // so that Allocate cannot evict it
      std::optional<BlockId> copy = Allocate();
      if (copy) {
        pool_.CopyBlock(*copy, source);
        match.blocks.push_back(*copy);
        position += length;
      }
      MergePolicy(source, policy);
      if (copy && position > held_tokens) NoteReuse(source);  // copied beyond what it holds
      Unreference(source);
    }
  }
  match.cached_tokens = position;
  Add(hit_tokens_, static_cast<int64_t>(position));
  Add(miss_tokens_, static_cast<int64_t>(queried - position));
  return match;
}

size_t PrefixCache::CachedPrefixLength(std::span<const int32_t> tokens, size_t max_tokens,
                                       const CacheKeyExtras& extras) const {
  if (!config_.enable_reuse) return 0;
  const size_t queried = std::min(max_tokens, tokens.size());
  BlockKeyChain chain(config_.root_fingerprint, extras);
  chain.Extend(tokens.first(queried), static_cast<size_t>(config_.block_size));
  return CachedChainLength(chain, queried);
}

size_t PrefixCache::CachedChainLength(const BlockKeyChain& chain, size_t max_tokens) const {
  if (!config_.enable_reuse) return 0;
  const size_t block_size = static_cast<size_t>(config_.block_size);
  return WalkFullBlocks(chain.keys(), std::min(max_tokens, chain.size() * block_size),
                        [](BlockId, const Digest&, size_t) {});
}

std::optional<BlockId> PrefixCache::Allocate() {
  std::optional<BlockId> id = pool_.PopFree();
  if (id) {
    Add(blocks_free_, -1);
  } else {
    id = queue_.PopVictim();
    if (!id) return std::nullopt;
    if (protected_capacity_ > 0) {
      RememberGhost(index_.Key(*id), state_[static_cast<size_t>(*id)].last_used);
    }
    const BlockRemoval removal = BlockRemoval::kEvicted;
    Notify(*id, &removal);
    DropFromIndex(*id);
    Add(evictions_, 1);
  }
  state_[static_cast<size_t>(*id)] = BlockState{};
  pool_.AddRef(*id);
  Add(blocks_in_use_, 1);
  return id;
}

Digest PrefixCache::Commit(BlockId block, const std::optional<Digest>& parent_key,
                           std::span<const int32_t> block_tokens, const CacheKeyExtras& extras,
                           const RetentionPolicy& policy) {
  const size_t block_size = static_cast<size_t>(config_.block_size);
  REPRISE_CHECK(pool_.RefCount(block) > 0, "commit of block {} which the caller does not hold",
                block);
  REPRISE_CHECK(!block_tokens.empty() && block_tokens.size() <= block_size,
                "a block holds 1..{} tokens, got {}", block_size, block_tokens.size());
  REPRISE_CHECK(policy.priority >= 0 && policy.priority <= 100 && policy.ttl_seconds >= 0,
                "bad retention policy (priority {}, ttl {})", policy.priority, policy.ttl_seconds);
  BlockState& state = state_[static_cast<size_t>(block)];
  REPRISE_CHECK(!index_.Contains(block) && !state.duplicate, "block {} committed twice", block);

  const Digest extras_digest = ExtrasDigest(extras);
  const bool full = block_tokens.size() == block_size;
  const Digest key =
      BlockKey(parent_key.value_or(config_.root_fingerprint), extras_digest, block_tokens, full);
  if (!config_.enable_reuse) return key;

  if (std::optional<BlockId> twin = index_.Find(key)) {
    // Someone computed the same block first: keep theirs; the caller's stays private.
    state.duplicate = true;
    state.duplicate_key = key;
    MergePolicy(*twin, policy);
    if (policy.pinned) SetPinned(*twin, true);
    NoteReuse(*twin);
    RefreshQueue(*twin, /*requeue=*/true);
    return key;
  }

  BlockId parent = kNoBlock;
  if (parent_key) {
    std::optional<BlockId> found = index_.Find(*parent_key);
    if (!found) return key;  // the parent was evicted (its twin is what the caller holds)
    REPRISE_CHECK(!index_.IsPartial(*found), "block {} committed under a tail block {}", block,
                  *found);
    REPRISE_CHECK(index_.Extras(*found) == extras_digest,
                  "block {} committed with other extra keys than its parent {}", block, *found);
    parent = *found;
  }
  if (!full && index_.LongestPartialMatch(parent, extras_digest, block_tokens).second ==
                   block_tokens.size()) {
    return key;  // a longer sibling already holds these tokens: a tail would add nothing
  }

  const bool parent_was_held = parent != kNoBlock && Held(parent);
  index_.Insert(block, key, parent, extras_digest, block_tokens);
  state.priority = policy.priority;
  state.expiry = ExpiryFor(policy);
  state.last_used = ++tick_;
  state.owner = policy.owner;
  if (policy.pinned) {
    state.pinned = true;
    Add(blocks_pinned_, 1);
  }
  // The new node is referenced, hence held: its ancestors now are too.
  if (parent != kNoBlock) {
    ++state_[static_cast<size_t>(parent)].held_children;
    OnHoldChanged(parent, parent_was_held);
  }
  ConsiderProtecting(block, TakeGhost(key));
  DropSupersededTails(block);
  Notify(block, nullptr);
  return key;
}

void PrefixCache::Release(std::span<const BlockId> blocks) {
  // Last to first: a sequence's head counts as more recently used than its tail.
  for (size_t i = blocks.size(); i-- > 0;) Unreference(blocks[i]);
}

size_t PrefixCache::Pin(std::span<const BlockId> blocks) {
  size_t pinned = 0;
  for (BlockId id : blocks) {
    std::optional<BlockId> target = id;
    if (!index_.Contains(id)) {
      const BlockState& state = state_[static_cast<size_t>(id)];
      target = state.duplicate ? index_.Find(state.duplicate_key) : std::nullopt;
    }
    if (!target) continue;
    SetPinned(*target, true);
    ++pinned;
  }
  return pinned;
}

size_t PrefixCache::Unpin(std::span<const BlockId> blocks) {
  size_t unpinned = 0;
  for (BlockId id : blocks) {
    std::optional<BlockId> target = id;
    if (!index_.Contains(id)) {
      const BlockState& state = state_[static_cast<size_t>(id)];
      target = state.duplicate ? index_.Find(state.duplicate_key) : std::nullopt;
    }
    if (!target || !state_[static_cast<size_t>(*target)].pinned) continue;
    SetPinned(*target, false);
    ++unpinned;
  }
  return unpinned;
}

size_t PrefixCache::ClearUnpinned() {
  protected_filled_ = false;  // a fresh start: the first blocks fill the protected tier again
  size_t dropped = 0;
  const BlockRemoval removal = BlockRemoval::kCleared;
  while (std::optional<BlockId> victim = queue_.PopVictim()) {
    Notify(*victim, &removal);
    DropFromIndex(*victim);
    state_[static_cast<size_t>(*victim)] = BlockState{};
    pool_.PushFree(*victim);
    Add(blocks_free_, 1);
    ++dropped;
  }
  return dropped;
}

size_t PrefixCache::ClearOwned(const Digest& owner) {
  // One pass over the queue: dropping a leaf queues its parent, which this loop pops in turn;
  // the other owners' leaves go back as they were (same order keys).
  size_t dropped = 0;
  std::vector<BlockId> others;
  while (std::optional<BlockId> victim = queue_.PopVictim()) {
    if (state_[static_cast<size_t>(*victim)].owner != owner) {
      others.push_back(*victim);
      continue;
    }
    DropFromIndex(*victim);
    state_[static_cast<size_t>(*victim)] = BlockState{};
    pool_.PushFree(*victim);
    Add(blocks_free_, 1);
    ++dropped;
  }
  for (BlockId id : others) RefreshQueue(id);
  return dropped;
}

CacheStats PrefixCache::Stats() const {
  CacheStats stats;
  stats.lookups = lookups_.load(std::memory_order_relaxed);
  stats.hit_tokens = hit_tokens_.load(std::memory_order_relaxed);
  stats.miss_tokens = miss_tokens_.load(std::memory_order_relaxed);
  stats.evictions = evictions_.load(std::memory_order_relaxed);
  stats.blocks_in_use = blocks_in_use_.load(std::memory_order_relaxed);
  stats.blocks_cached = blocks_cached_.load(std::memory_order_relaxed);
  stats.blocks_free = blocks_free_.load(std::memory_order_relaxed);
  stats.blocks_pinned = blocks_pinned_.load(std::memory_order_relaxed);
  stats.blocks_protected = blocks_protected_.load(std::memory_order_relaxed);
  return stats;
}

// ---------------------------------------------------------------------------------------------
// Bookkeeping.
//
// Every block is in exactly one state:
//   free    ref 0, not indexed, on the pool's free stack
//   in use  ref > 0 (indexed or private)
//   cached  ref 0, indexed
// An indexed block is "held" when it is referenced, pinned, or has a held child; a held block
// is never evicted, and neither are its ancestors (leaves go first). The unheld indexed blocks
// with no children are exactly the eviction queue; evicting one may put its parent there.

bool PrefixCache::Held(BlockId id) const {
  const BlockState& state = state_[static_cast<size_t>(id)];
  return pool_.RefCount(id) > 0 || state.pinned || state.held_children > 0;
}

void PrefixCache::Reference(BlockId id) {
  const bool was_held = Held(id);
  pool_.AddRef(id);
  if (pool_.RefCount(id) == 1) {
    Add(blocks_in_use_, 1);
    if (index_.Contains(id)) Add(blocks_cached_, -1);
  }
  if (index_.Contains(id)) OnHoldChanged(id, was_held);
}

void PrefixCache::Unreference(BlockId id) {
  const bool was_held = Held(id);
  if (pool_.DropRef(id) > 0) return;
  Add(blocks_in_use_, -1);
  if (index_.Contains(id)) {
    Add(blocks_cached_, 1);
    Touch(id);
    OnHoldChanged(id, was_held);
  } else {
    state_[static_cast<size_t>(id)] = BlockState{};
    pool_.PushFree(id);
    Add(blocks_free_, 1);
  }
}

void PrefixCache::OnHoldChanged(BlockId id, bool was_held) {
  for (;;) {
    const bool held = Held(id);
    RefreshQueue(id);
    if (held == was_held) return;
    num_evictable_ += held ? -1 : 1;
    const BlockId parent = index_.Parent(id);
    if (parent == kNoBlock) return;
    const bool parent_was_held = Held(parent);
    state_[static_cast<size_t>(parent)].held_children += held ? 1 : -1;
    id = parent;
    was_held = parent_was_held;
  }
}

void PrefixCache::RefreshQueue(BlockId id, bool requeue) {
  const bool wanted = index_.Contains(id) && !Held(id) && index_.NumChildren(id) == 0;
  const bool queued = queue_.Contains(id);
  if (queued && (!wanted || requeue)) queue_.Remove(id);
  if (wanted && (!queued || requeue)) {
    const BlockState& state = state_[static_cast<size_t>(id)];
    queue_.Add(id, state.priority, state.is_protected, state.expiry, state.last_used);
  }
}

void PrefixCache::MergePolicy(BlockId id, const RetentionPolicy& policy) {
  BlockState& state = state_[static_cast<size_t>(id)];
  const int priority = std::max(state.priority, policy.priority);
  const double expiry = std::max(state.expiry, ExpiryFor(policy));
  if (priority == state.priority && expiry == state.expiry) return;
  state.priority = priority;
  state.expiry = expiry;
  RefreshQueue(id, /*requeue=*/true);
}

void PrefixCache::SetPinned(BlockId id, bool pinned) {
  BlockState& state = state_[static_cast<size_t>(id)];
  if (state.pinned == pinned) return;
  const bool was_held = Held(id);
  state.pinned = pinned;
  Add(blocks_pinned_, pinned ? 1 : -1);
  OnHoldChanged(id, was_held);
}

double PrefixCache::ExpiryFor(const RetentionPolicy& policy) const {
  return policy.ttl_seconds > 0 ? now_() + policy.ttl_seconds : 0;
}

void PrefixCache::DropFromIndex(BlockId id) {
  if (state_[static_cast<size_t>(id)].is_protected) Unprotect(id);
  const BlockId parent = index_.Parent(id);
  index_.Remove(id);
  --num_evictable_;
  Add(blocks_cached_, -1);
  if (parent != kNoBlock) RefreshQueue(parent);
}

void PrefixCache::DropSupersededTails(BlockId id) {
  const BlockId parent = index_.Parent(id);
  const Digest& extras_digest = index_.Extras(id);
  const int32_t own_tail = index_.IsPartial(id) ? 1 : 0;
  if (index_.NumTailChildren(parent, extras_digest) == own_tail) return;  // no other tail
  std::span<const int32_t> tokens = index_.Tokens(id);
  BlockId sibling = index_.FirstChild(parent, extras_digest);
  while (sibling != kNoBlock) {
    const BlockId next = index_.NextSibling(sibling);
    std::span<const int32_t> tail = index_.Tokens(sibling);
    if (sibling != id && index_.IsPartial(sibling) && tail.size() < tokens.size() &&
        !Held(sibling) && std::equal(tail.begin(), tail.end(), tokens.begin())) {
      const BlockRemoval removal = BlockRemoval::kSuperseded;
      Notify(sibling, &removal);
      queue_.Remove(sibling);
      DropFromIndex(sibling);
      state_[static_cast<size_t>(sibling)] = BlockState{};
      pool_.PushFree(sibling);
      Add(blocks_free_, 1);
    }
    sibling = next;
  }
}

void PrefixCache::Notify(BlockId id, const BlockRemoval* removal) {
  if (listener_ == nullptr) return;
  const CachedBlockInfo info = Describe(id);
  if (removal == nullptr) {
    listener_->OnBlockStored(info);
  } else {
    listener_->OnBlockRemoved(info, *removal);
  }
}

void PrefixCache::ForEachIndexed(const std::function<void(const CachedBlockInfo&)>& visit) const {
  for (BlockId id = 0; id < config_.num_blocks; ++id) {
    if (index_.Contains(id)) visit(Describe(id));
  }
}

CachedBlockInfo PrefixCache::Describe(BlockId id) const {
  const BlockId parent = index_.Parent(id);
  const BlockState& state = state_[static_cast<size_t>(id)];
  CachedBlockInfo info;
  info.block = id;
  info.key = &index_.Key(id);
  info.parent_key = parent == kNoBlock ? &config_.root_fingerprint : &index_.Key(parent);
  info.extras_digest = &index_.Extras(id);
  info.tokens = index_.Tokens(id);
  info.data = std::span<const uint8_t>(pool_.BlockData(id), config_.block_bytes);
  info.full = !index_.IsPartial(id);
  info.pinned = state.pinned;
  info.priority = state.priority;
  info.owner = &state.owner;
  return info;
}

// ---------------------------------------------------------------------------------------------
// Scan resistance (see the class comment).

void PrefixCache::Touch(BlockId id) {
  BlockState& state = state_[static_cast<size_t>(id)];
  state.last_used = ++tick_;
  if (state.is_protected) protected_.Update(id, state.last_used);
}

void PrefixCache::NoteReuse(BlockId id) {
  const uint64_t previous_use = state_[static_cast<size_t>(id)].last_used;
  Touch(id);
  ConsiderProtecting(id, previous_use);
}

void PrefixCache::ConsiderProtecting(BlockId id, uint64_t previous_use) {
  BlockState& state = state_[static_cast<size_t>(id)];
  if (protected_capacity_ == 0 || state.is_protected) return;
  if (protected_filled_) {
    // Only a block reused sooner than the protected tier's least recent block was used gets in;
    // a first use, or a reuse after longer (a cyclic scan), stays on probation. This holds when
    // requests too big for probation have evicted protected blocks too: were their places
    // refilled, a cycle larger than the cache would wash through the tier as through LRU;
    // unfilled, the tier shrinks until probation holds the requests in flight.
    if (previous_use == 0 || (!protected_.empty() && previous_use <= protected_.TopKey())) return;
    if (protected_.size() >= protected_capacity_) {
      const BlockId demoted = protected_.Top();  // the two trade places
      Unprotect(demoted);
      RefreshQueue(demoted, /*requeue=*/true);
    }
  }
  state.is_protected = true;
  protected_.Push(id, state.last_used);
  Add(blocks_protected_, 1);
  if (protected_.size() == protected_capacity_) protected_filled_ = true;
  RefreshQueue(id, /*requeue=*/true);
}

void PrefixCache::Unprotect(BlockId id) {
  state_[static_cast<size_t>(id)].is_protected = false;
  protected_.Erase(id);
  Add(blocks_protected_, -1);
}

uint64_t PrefixCache::TakeGhost(const Digest& key) {
  auto found = ghosts_.find(key);
  if (found == ghosts_.end()) return 0;
  const uint64_t last_used = found->second;
  ghosts_.erase(found);
  return last_used;
}

void PrefixCache::RememberGhost(const Digest& key, uint64_t last_used) {
  ghosts_[key] = last_used;
  ghost_order_.emplace_back(key, last_used);
  while (ghost_order_.size() > static_cast<size_t>(config_.num_blocks)) {
    const auto& [old_key, old_use] = ghost_order_.front();
    auto found = ghosts_.find(old_key);
    if (found != ghosts_.end() && found->second == old_use) ghosts_.erase(found);
    ghost_order_.pop_front();
  }
}

}  // namespace reprise
