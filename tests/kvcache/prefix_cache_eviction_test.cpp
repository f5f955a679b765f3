// PrefixCache eviction order: least recently used first, leaves before parents, lower priority
// first, running TTLs last, pinned never. Evicted blocks are handed out by Allocate, so the ids
// Allocate returns once the free blocks are gone are the eviction order.
#include <gtest/gtest.h>

#include <vector>

#include "kv_test_util.h"
#include "kvcache/prefix_cache.h"

namespace reprise {
namespace {

using testing::ExpectNoLeak;
using testing::Range;
using testing::RunPrompt;
using testing::SmallConfig;
using Ids = std::vector<BlockId>;

// A one-block prompt (4 tokens) computed and committed; the block stays held.
BlockId Hold(PrefixCache& cache, int32_t first_token, const RetentionPolicy& policy = {}) {
  std::optional<testing::Request> request =
      RunPrompt(cache, Range(first_token, first_token + 4), {}, policy);
  EXPECT_TRUE(request && request->table.size() == 1);
  return request ? request->table[0] : kNoBlock;
}

// Allocates until nothing is left; returns the ids in order and releases them.
Ids AllocateAll(PrefixCache& cache) {
  Ids ids;
  while (std::optional<BlockId> id = cache.Allocate()) ids.push_back(*id);
  cache.Release(ids);
  return ids;
}

TEST(PrefixCacheEvictionTest, LeastRecentlyReleasedFirst) {
  PrefixCache cache(SmallConfig(4));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Hold(cache, 10 * i), i);
  for (BlockId id : {2, 0, 3, 1}) cache.Release(Ids{id});
  EXPECT_EQ(AllocateAll(cache), (Ids{2, 0, 3, 1}));
  EXPECT_EQ(cache.Stats().evictions, 4);
  EXPECT_EQ(cache.Match(Range(0, 4), 4, {}).cached_tokens, 0u);  // evicted means gone
  ExpectNoLeak(cache);
}

TEST(PrefixCacheEvictionTest, FreeBlocksGoBeforeAnyEviction) {
  PrefixCache cache(SmallConfig(4));
  Hold(cache, 0);
  cache.Release(Ids{0});
  EXPECT_EQ(AllocateAll(cache), (Ids{1, 2, 3, 0}));
  EXPECT_EQ(cache.Stats().evictions, 1);
}

TEST(PrefixCacheEvictionTest, MatchRefreshesRecency) {
  PrefixCache cache(SmallConfig(3));
  for (int i = 0; i < 3; ++i) Hold(cache, 10 * i);
  cache.Release(Ids{0, 1, 2});  // a block table: 2 counts as used first, 0 last
  PrefixMatch match = cache.Match(Range(20, 24), 4, {});
  EXPECT_EQ(match.blocks, Ids{2});
  cache.Release(match.blocks);
  EXPECT_EQ(AllocateAll(cache), (Ids{1, 0, 2}));
}

TEST(PrefixCacheEvictionTest, LeavesBeforeParentsWhateverTheirPriority) {
  PrefixCache cache(SmallConfig(4));
  const std::vector<int32_t> chain = Range(0, 8);
  BlockId parent = *cache.Allocate();
  BlockId child = *cache.Allocate();
  Digest key = cache.Commit(parent, std::nullopt, std::span(chain).first(4), {}, {0, 0, false});
  cache.Commit(child, key, std::span(chain).subspan(4, 4), {}, {100, 0, false});
  BlockId mid = Hold(cache, 100, {50, 0, false});
  BlockId low = Hold(cache, 200, {35, 0, false});
  cache.Release(Ids{parent, child, mid, low});
  // The priority-0 parent waits for its priority-100 child.
  EXPECT_EQ(AllocateAll(cache), (Ids{low, mid, child, parent}));
}

TEST(PrefixCacheEvictionTest, ParentWaitsForItsChildEvenWhenOlder) {
  PrefixCache cache(SmallConfig(6));
  const std::vector<int32_t> prompt = Range(0, 8);
  // Two requests compute the same prompt at once; x's block 0 ends up parent of y's block 3.
  Ids x = {*cache.Allocate(), *cache.Allocate()};
  Ids y = {*cache.Allocate(), *cache.Allocate()};
  Digest k0 = cache.Commit(x[0], std::nullopt, std::span(prompt).first(4), {});
  cache.Commit(y[0], std::nullopt, std::span(prompt).first(4), {});
  Digest k1 = cache.Commit(y[1], k0, std::span(prompt).subspan(4, 4), {});
  cache.Commit(x[1], k0, std::span(prompt).subspan(4, 4), {});
  EXPECT_EQ(Ids({cache.IsIndexed(0), cache.IsIndexed(1), cache.IsIndexed(2), cache.IsIndexed(3)}),
            (Ids{1, 0, 0, 1}));
  cache.Release(x);                  // block 0: least recently used, but y holds its child
  BlockId other = Hold(cache, 100);  // reuses freed block 1
  EXPECT_EQ(other, 1);
  cache.Release(Ids{other});
  cache.Release(y);  // block 3 most recent; block 2 freed
  // Free blocks 2, 4, 5 first; then leaves by recency (1, 3); block 0 only once it is a leaf.
  EXPECT_EQ(AllocateAll(cache), (Ids{2, 4, 5, 1, 3, 0}));
  (void)k1;
}

TEST(PrefixCacheEvictionTest, LowerPriorityFirstBlockByBlock) {
  PrefixCache cache(SmallConfig(4));
  const int priorities[4] = {10, 90, 10, 50};
  for (int i = 0; i < 4; ++i) Hold(cache, 10 * i, {priorities[i], 0, false});
  for (BlockId id : {0, 1, 2, 3}) cache.Release(Ids{id});
  EXPECT_EQ(AllocateAll(cache), (Ids{0, 2, 3, 1}));
}

TEST(PrefixCacheEvictionTest, ReuseRaisesPriorityButNeverLowersIt) {
  PrefixCache cache(SmallConfig(3));
  Hold(cache, 0, {10, 0, false});
  Hold(cache, 10, {50, 0, false});
  Hold(cache, 20, {30, 0, false});
  cache.Release(Ids{0, 1, 2});
  // Block 0 reused by a priority-80 request; block 1 by a priority-0 one (stays 50).
  cache.Release(cache.Match(Range(0, 4), 4, {}, {80, 0, false}).blocks);
  cache.Release(cache.Match(Range(10, 14), 4, {}, {0, 0, false}).blocks);
  EXPECT_EQ(AllocateAll(cache), (Ids{2, 1, 0}));
}

TEST(PrefixCacheEvictionTest, RunningTtlKeepsABlockUntilMemoryIsNeededBeyondIt) {
  double now = 0;
  PrefixCache cache(SmallConfig(4), [&now] { return now; });
  BlockId kept = Hold(cache, 0, {0, 100, false});  // lowest priority, 100 s TTL
  BlockId high = Hold(cache, 10, {100, 0, false});
  BlockId mid = Hold(cache, 20, {35, 0, false});
  cache.Release(Ids{kept, high, mid});
  now = 50;
  EXPECT_EQ(cache.Allocate(), 3);     // a free block: nothing evicted
  EXPECT_EQ(cache.Allocate(), mid);   // every block without a running TTL goes first,
  EXPECT_EQ(cache.Allocate(), high);  // whatever its priority
  EXPECT_TRUE(cache.IsIndexed(kept));
  EXPECT_EQ(cache.Allocate(), kept);  // memory is needed beyond it
  EXPECT_EQ(cache.Allocate(), std::nullopt);
  cache.Release(Ids{3, mid, high, kept});
  ExpectNoLeak(cache);
}

TEST(PrefixCacheEvictionTest, ExpiredTtlIsAnOrdinaryBlockAgain) {
  double now = 0;
  PrefixCache cache(SmallConfig(3), [&now] { return now; });
  Hold(cache, 0, {0, 100, false});
  Hold(cache, 10, {35, 0, false});
  Hold(cache, 20, {35, 0, false});
  cache.Release(Ids{0, 1, 2});
  now = 100;                                      // expired exactly now
  EXPECT_EQ(AllocateAll(cache), (Ids{0, 2, 1}));  // priority 0 first again
}

TEST(PrefixCacheEvictionTest, ReuseExtendsTtl) {
  double now = 0;
  PrefixCache cache(SmallConfig(2), [&now] { return now; });
  Hold(cache, 0, {35, 10, false});
  Hold(cache, 10, {35, 30, false});
  cache.Release(Ids{0, 1});
  now = 5;
  cache.Release(cache.Match(Range(0, 4), 4, {}, {35, 60, false}).blocks);  // until 65
  now = 40;  // block 1 expired, block 0 still running
  EXPECT_EQ(AllocateAll(cache), (Ids{1, 0}));
}

TEST(PrefixCacheEvictionTest, PinnedNeverEvicted) {
  PrefixCache cache(SmallConfig(3));
  BlockId pinned = Hold(cache, 0, {0, 0, true});
  Hold(cache, 10);
  Hold(cache, 20);
  cache.Release(Ids{0, 1, 2});
  EXPECT_EQ(cache.NumAllocatable(), 2u);
  EXPECT_EQ(AllocateAll(cache), (Ids{2, 1}));
  EXPECT_TRUE(cache.IsIndexed(pinned));
  EXPECT_EQ(cache.Stats().blocks_pinned, 1);
  EXPECT_EQ(cache.Match(Range(0, 4), 4, {}).blocks, Ids{pinned});
  cache.Release(Ids{pinned});
  ExpectNoLeak(cache);
}

TEST(PrefixCacheEvictionTest, PinnedChildKeepsItsAncestors) {
  PrefixCache cache(SmallConfig(4));
  std::optional<testing::Request> chain = RunPrompt(cache, Range(0, 12));  // 0 -> 1 -> 2
  ASSERT_TRUE(chain);
  EXPECT_EQ(cache.Pin(Ids{1}), 1u);
  cache.Release(chain->table);
  EXPECT_EQ(cache.NumAllocatable(), 2u);  // block 2 and the never used block 3
  EXPECT_EQ(AllocateAll(cache), (Ids{3, 2}));
  EXPECT_TRUE(cache.IsIndexed(0) && cache.IsIndexed(1));
  cache.Unpin(Ids{1});
  EXPECT_EQ(AllocateAll(cache), (Ids{3, 2, 1, 0}));  // 3, 2 free again; then 1 before 0
  ExpectNoLeak(cache);
}

}  // namespace
}  // namespace reprise
