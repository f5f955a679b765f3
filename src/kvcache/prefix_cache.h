// PrefixCache: the engine's view of KV memory. Paged block storage plus automatic prefix
// caching: find the longest already-computed prefix of a prompt, register blocks as soon as they
// are computed, keep released blocks as cache and evict them by retention policy when room is
// needed. Called from one engine thread; Stats() may be read from any thread.
//
// Retention, in eviction order (only unreferenced, unpinned blocks are ever evicted):
//   1. leaves before parents: a block goes only once no indexed block hangs below it, so a
//      referenced or pinned block keeps all its ancestors;
//   2. blocks whose TTL still runs go after every other evictable block, of any priority;
//   3. then lower priority first;  4. then probation before protected (below);
//   5. then least recently used (released, matched, committed).
// Reuse merges policies upwards: priority = max, expiry = the later one (Match and a duplicate
// Commit both apply the request's policy; only Commit and Pin pin).
//
// Scan resistance (protected_share > 0): plain LRU keeps nothing when prompts cycle through more
// documents than fit (each is evicted just before its next visit), and one burst of new prompts
// flushes a reused working set. So, as in LIRS, indexed blocks are in one of two tiers. Until
// the protected tier holds its share of the pool every committed block joins it; after that a
// block joins only when reused (matched, committed again, or computed again while its key is
// remembered from its eviction) with its previous use more recent than the protected tier's
// least recently used block, which moves to probation in its place when the tier is full. Eviction
// takes probation first: a cyclic scan keeps hitting on the protected share, and one-time prompts
// evict each other instead of what is being reused.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/sha256.h"
#include "kvcache/block_key.h"
#include "kvcache/block_pool.h"
#include "kvcache/eviction_queue.h"
#include "kvcache/indexed_heap.h"
#include "kvcache/prefix_cache_listener.h"
#include "kvcache/prefix_index.h"

namespace reprise {

// How long a committed block should stay cached once no sequence uses it.
struct RetentionPolicy {
  int priority = 35;       // 0..100; lower priorities are evicted first
  double ttl_seconds = 0;  // > 0: evicted only after every block without a running TTL
  bool pinned = false;     // never evicted (static task prompts); counts against the pool
  // Who put the block in the cache (TenantSaltDigest of a tenant; zero: nobody in particular),
  // so that ClearOwned drops one tenant's blocks. Not part of the key: set by the first Commit.
  Digest owner{};
};

struct PrefixCacheConfig {
  int64_t num_blocks = 0;     // see BlockPool::NumBlocksForBudget
  int block_size = 16;        // token positions per block
  size_t block_bytes = 0;     // KV bytes per block (all layers, K and V)
  Digest root_fingerprint{};  // identity of everything that changes KV: weights, dtype, rope...
  bool enable_reuse = true;   // false: plain paged storage, Match always misses
  // Share of the pool (0..1) the protected tier may hold; 0: one tier, plain LRU.
  double protected_share = 0;
};

struct PrefixMatch {
  // Referenced for the caller (release with Release). All but possibly the last are shared,
  // read-only full blocks; when cached_tokens % block_size != 0 the last one is a private copy
  // whose positions >= cached_tokens % block_size the caller overwrites before reading.
  std::vector<BlockId> blocks;
  size_t cached_tokens = 0;
  // Key of the last shared full block: the parent_key of the sequence's next Commit
  // (nullopt: the next committed block is the sequence's first).
  std::optional<Digest> last_full_key;
};

// Counters since construction and a census of the blocks (in_use + cached + free = num_blocks;
// pinned blocks are counted in the first two as well). Each field is read atomically.
struct CacheStats {
  int64_t lookups = 0;        // Match calls
  int64_t hit_tokens = 0;     // tokens served from cache
  int64_t miss_tokens = 0;    // tokens queried but not served (queried - hit)
  int64_t evictions = 0;      // cached blocks evicted to make room by Allocate
  int64_t blocks_in_use = 0;  // ref count > 0
  int64_t blocks_cached = 0;  // ref count 0 and indexed
  int64_t blocks_free = 0;    // ref count 0, holding nothing
  int64_t blocks_pinned = 0;
  int64_t blocks_protected = 0;  // indexed blocks in the protected tier (scan resistance)
};

class PrefixCache {
 public:
  // `now` (seconds, monotonic) defaults to std::chrono::steady_clock; it is called only for TTLs.
  explicit PrefixCache(const PrefixCacheConfig& config, TimeSource now = {});
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Longest reusable prefix of tokens[0, min(max_tokens, tokens.size())), token-granular (pass
  // prompt_len - 1 so that one token is always computed). Full blocks are shared by reference;
  // when the next cached block (full or a tail) matches only its first m >= 1 tokens, a fresh
  // block gets a copy of it and ends the match (without a fresh block the match stops at the
  // full blocks). `policy` raises the priority and extends the TTL of the blocks it reuses
  // (never lowers them; never pins). `held_tokens`: a prefix the caller computed or matched
  // already (a running request looking for more); its full blocks do not count as reused.
  PrefixMatch Match(std::span<const int32_t> tokens, size_t max_tokens,
                    const CacheKeyExtras& extras, const RetentionPolicy& policy = {},
                    size_t held_tokens = 0);
  // The same with the tokens' keys computed already: `chain` (rooted at root_fingerprint())
  // keys at least the full blocks of tokens[0, min(max_tokens, tokens.size())).
  PrefixMatch MatchChain(std::span<const int32_t> tokens, size_t max_tokens,
                         const BlockKeyChain& chain, const RetentionPolicy& policy = {},
                         size_t held_tokens = 0);

  // A fresh private block (ref 1, contents undefined), evicting a cached block if needed;
  // nullopt when every block is in use or pinned (the scheduler then preempts).
  std::optional<BlockId> Allocate();
  // How many of tokens[0, min(max_tokens, tokens.size())) full cached blocks hold now, without
  // taking them (no references, no recency, no stats): the scheduler's estimate for ordering
  // requests that wait for admission.
  size_t CachedPrefixLength(std::span<const int32_t> tokens, size_t max_tokens,
                            const CacheKeyExtras& extras) const;
  // The same over the first max_tokens / block_size keys of `chain`.
  size_t CachedChainLength(const BlockKeyChain& chain, size_t max_tokens) const;

  // Blocks Allocate could hand out now: free ones plus every cached block that eviction can
  // reach (unreferenced, unpinned, with no referenced or pinned descendant).
  size_t NumAllocatable() const { return pool_.NumFree() + static_cast<size_t>(num_evictable_); }

  // Registers `block` (held by the caller, holding KV for `block_tokens`: block_size tokens
  // for a full block, 1..block_size-1 for a finished sequence's tail) as the child of the block
  // keyed `parent_key` (nullopt: the sequence's first block), so later requests reuse it.
  // Returns the block's key, to chain the next Commit. The block must not change afterwards.
  // The block stays private (freed on release) when an identical block is indexed already (that
  // one gets `policy` merged in, as in Match, and is pinned if policy.pinned), when the parent
  // is no longer cached, when it is a tail whose tokens a longer sibling already holds, or when
  // reuse is disabled. Tails have no children; committing a block frees the unreferenced
  // sibling tails it covers.
  Digest Commit(BlockId block, const std::optional<Digest>& parent_key,
                std::span<const int32_t> block_tokens, const CacheKeyExtras& extras,
                const RetentionPolicy& policy = {});

  // Drops one reference of each block. Blocks that reach 0 stay cached if indexed (the later
  // blocks of the span count as used earlier: pass a block table in order) or become free.
  void Release(std::span<const BlockId> blocks);

  // Pins the indexed blocks (or, for a private duplicate, the indexed block with its key);
  // returns how many are now pinned (private blocks are skipped). Pinned blocks are never evicted,
  // nor their ancestors.
  size_t Pin(std::span<const BlockId> blocks);
  size_t Unpin(std::span<const BlockId> blocks);
  // Admin: evicts every block eviction can reach, ignoring TTLs; returns how many.
  size_t ClearUnpinned();
  // Likewise for the blocks first committed with policy.owner == `owner` only.
  size_t ClearOwned(const Digest& owner);

  CacheStats Stats() const;

  // Told of every block indexed and dropped (nullptr: nobody); must outlive its use here.
  void SetListener(PrefixCacheListener* listener) { listener_ = listener; }
  // Calls visit(block) for every indexed block (to keep what memory holds elsewhere before a
  // shutdown, say).
  void ForEachIndexed(const std::function<void(const CachedBlockInfo&)>& visit) const;

  int block_size() const { return config_.block_size; }
  int64_t num_blocks() const { return config_.num_blocks; }
  size_t block_bytes() const { return config_.block_bytes; }
  const Digest& root_fingerprint() const { return config_.root_fingerprint; }
  uint8_t* BlockData(BlockId id) { return pool_.BlockData(id); }
  const uint8_t* BlockData(BlockId id) const { return pool_.BlockData(id); }
  int32_t RefCount(BlockId id) const { return pool_.RefCount(id); }
  bool IsIndexed(BlockId id) const { return index_.Contains(id); }
  bool IsPinned(BlockId id) const { return state_[static_cast<size_t>(id)].pinned; }
  bool IsProtected(BlockId id) const { return state_[static_cast<size_t>(id)].is_protected; }

  // Walks every block and checks all bookkeeping (O(num_blocks)); throws InternalError on a
  // broken invariant. For tests and debug builds.
  void CheckInvariants() const;

 private:
  // Retention and tree bookkeeping of one block; meaningful while it is indexed.
  struct BlockState {
    int32_t held_children = 0;  // indexed children that are held (see Held)
    int priority = 0;
    double expiry = 0;       // TimeSource seconds; 0 = no TTL
    uint64_t last_used = 0;  // recency stamp from tick_
    bool pinned = false;
    bool is_protected = false;  // in the protected tier (see the class comment)
    bool duplicate = false;     // private copy of the indexed block keyed duplicate_key
    Digest duplicate_key{};
    Digest owner{};  // RetentionPolicy::owner of the Commit that indexed it
  };

  // A held indexed block cannot be evicted: referenced, pinned, or above a held block.
  bool Held(BlockId id) const;
  void Reference(BlockId id);
  void Unreference(BlockId id);
  // After ref count, pin or held_children of indexed `id` changed (was_held: before).
  void OnHoldChanged(BlockId id, bool was_held);
  // Puts `id` in the eviction queue iff it is an unheld indexed leaf (re-keyed if requeue).
  void RefreshQueue(BlockId id, bool requeue = false);
  void MergePolicy(BlockId id, const RetentionPolicy& policy);
  void SetPinned(BlockId id, bool pinned);
  double ExpiryFor(const RetentionPolicy& policy) const;
  // Takes an unheld indexed leaf (already out of the queue) out of the index; it is then
  // unreferenced and not on the free stack.
  void DropFromIndex(BlockId id);
  // Frees unheld tail siblings of `id` whose tokens are a strict prefix of its tokens.
  void DropSupersededTails(BlockId id);
  // Calls visit(block, key, first position) for each indexed full block, keyed by `keys`, that
  // holds the tokens up to `queried` in order; returns how many tokens they hold. Read-only.
  template <typename Visit>
  size_t WalkFullBlocks(std::span<const Digest> keys, size_t queried, Visit&& visit) const;
  // Tells the listener of indexed `id` (stored when `removal` is null).
  void Notify(BlockId id, const BlockRemoval* removal);
  CachedBlockInfo Describe(BlockId id) const;
  // Marks indexed `id` as used now (a fresh recency stamp).
  void Touch(BlockId id);
  // `id` was reused just now: Touch, and ConsiderProtecting with the use before this one.
  void NoteReuse(BlockId id);
  // `id` was just committed or reused; `previous_use` is the stamp of its use before this one
  // (0: none known). Moves it to the protected tier if the class comment's rule says so.
  void ConsiderProtecting(BlockId id, uint64_t previous_use);
  void Unprotect(BlockId id);
  // The last_used of a block evicted recently with this key (0: none), forgetting it.
  uint64_t TakeGhost(const Digest& key);
  void RememberGhost(const Digest& key, uint64_t last_used);

  PrefixCacheConfig config_;
  TimeSource now_;
  PrefixCacheListener* listener_ = nullptr;
  BlockPool pool_;
  PrefixIndex index_;
  EvictionQueue queue_;
  std::vector<BlockState> state_;  // [num_blocks]
  uint64_t tick_ = 0;
  int64_t num_evictable_ = 0;  // indexed and not held
  // Scan resistance: the protected blocks by last_used (the top is the one to demote), and the
  // keys of the last num_blocks evictions with their last_used ("ghosts": a block computed again
  // soon after its eviction is a reuse that a too small probation tier did not see).
  size_t protected_capacity_ = 0;
  bool protected_filled_ = false;  // the tier was full once: since then only reuse admits
  IndexedHeap<uint64_t> protected_;
  std::unordered_map<Digest, uint64_t, DigestHash> ghosts_;
  std::deque<std::pair<Digest, uint64_t>> ghost_order_;  // oldest first; may hold stale entries

  std::atomic<int64_t> lookups_{0};
  std::atomic<int64_t> hit_tokens_{0};
  std::atomic<int64_t> miss_tokens_{0};
  std::atomic<int64_t> evictions_{0};
  std::atomic<int64_t> blocks_in_use_{0};
  std::atomic<int64_t> blocks_cached_{0};
  std::atomic<int64_t> blocks_free_{0};
  std::atomic<int64_t> blocks_pinned_{0};
  std::atomic<int64_t> blocks_protected_{0};
};

}  // namespace reprise
