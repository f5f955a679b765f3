// PrefixCache: matching, committing, reuse lengths, isolation and bookkeeping. Eviction order is
// in prefix_cache_eviction_test.cpp.
#include "kvcache/prefix_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "kv_test_util.h"

namespace reprise {
namespace {

using testing::Concat;
using testing::ExpectNoLeak;
using testing::Range;
using testing::RunPrompt;
using testing::SmallConfig;
using Ids = std::vector<BlockId>;

// Runs a prompt to the end and releases it, leaving its blocks as cache; returns its table.
Ids Cache(PrefixCache& cache, const std::vector<int32_t>& tokens, const CacheKeyExtras& extras = {},
          const RetentionPolicy& policy = {}) {
  std::optional<testing::Request> request = RunPrompt(cache, tokens, extras, policy);
  EXPECT_TRUE(request.has_value());
  if (!request) return {};
  cache.Release(request->table);
  return request->table;
}

Digest KeyOf(const Digest& parent, const std::vector<int32_t>& tokens, size_t begin, size_t count,
             const CacheKeyExtras& extras = {}) {
  return BlockKey(parent, ExtrasDigest(extras),
                  std::span<const int32_t>(tokens).subspan(begin, count), count == 4);
}

TEST(PrefixCacheTest, FreshCacheAllocatesInIdOrder) {
  PrefixCache cache(SmallConfig(4));
  EXPECT_EQ(cache.NumAllocatable(), 4u);
  EXPECT_EQ(cache.Allocate(), 0);
  EXPECT_EQ(cache.Allocate(), 1);
  EXPECT_EQ(cache.NumAllocatable(), 2u);
  Ids held = {0, 1};
  cache.Release(held);
  ExpectNoLeak(cache);
  EXPECT_EQ(cache.Stats().blocks_free, 4);
}

TEST(PrefixCacheTest, SharesFullBlocksAndCopiesThePartlyMatchingOne) {
  PrefixCache cache(SmallConfig(8));
  const std::vector<int32_t> prompt = Range(0, 12);
  EXPECT_EQ(Cache(cache, prompt), (Ids{0, 1, 2}));
  EXPECT_EQ(cache.Stats().blocks_cached, 3);

  // prompt_len - 1 = 11 tokens: two shared blocks, then 3 of block 2's 4 tokens in a copy.
  PrefixMatch match = cache.Match(prompt, 11, {});
  EXPECT_EQ(match.blocks, (Ids{0, 1, 3}));
  EXPECT_EQ(match.cached_tokens, 11u);
  const Digest key0 = KeyOf(cache.root_fingerprint(), prompt, 0, 4);
  EXPECT_EQ(match.last_full_key, KeyOf(key0, prompt, 4, 4));
  EXPECT_EQ(cache.RefCount(0), 1);
  EXPECT_EQ(cache.RefCount(1), 1);
  EXPECT_EQ(cache.RefCount(2), 0);  // the source stays cached, unreferenced
  EXPECT_EQ(cache.RefCount(3), 1);
  EXPECT_FALSE(cache.IsIndexed(3));
  EXPECT_EQ(std::memcmp(cache.BlockData(3), cache.BlockData(2), cache.block_bytes()), 0);
  cache.Release(match.blocks);
  EXPECT_EQ(cache.Stats().blocks_free, 5);  // the copy went back

  // Asking for every token shares all three blocks.
  match = cache.Match(prompt, 12, {});
  EXPECT_EQ(match.blocks, (Ids{0, 1, 2}));
  EXPECT_EQ(match.cached_tokens, 12u);
  cache.Release(match.blocks);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, PartialMatchIntoAFullBlock) {
  PrefixCache cache(SmallConfig(8));
  Cache(cache, Range(0, 12));
  const std::vector<int32_t> query = Concat(Range(0, 6), {99, 98, 97, 96});
  std::optional<testing::Request> request = RunPrompt(cache, query);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->cached_tokens, 6u);
  EXPECT_EQ(request->table, (Ids{0, 3, 4}));  // block 0 shared, 3 a copy of block 1 (2 tokens)
  cache.Release(request->table);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, PartialMatchIntoATailBlock) {
  PrefixCache cache(SmallConfig(8));
  EXPECT_EQ(Cache(cache, Range(0, 6)), (Ids{0, 1}));  // block 1 is the tail {4, 5}
  EXPECT_TRUE(cache.IsIndexed(1));
  const std::vector<int32_t> query = Concat(Range(0, 5), {77, 78});
  PrefixMatch match = cache.Match(query, query.size() - 1, {});
  EXPECT_EQ(match.blocks, (Ids{0, 2}));
  EXPECT_EQ(match.cached_tokens, 5u);
  EXPECT_EQ(std::memcmp(cache.BlockData(2), cache.BlockData(1), cache.block_bytes()), 0);
  cache.Release(match.blocks);

  // A tail shorter than a block can also be the whole match (no full block before it).
  Cache(cache, {500, 501});
  match = cache.Match(std::vector<int32_t>{500, 501, 502}, 2, {});
  EXPECT_EQ(match.cached_tokens, 2u);
  EXPECT_EQ(match.last_full_key, std::nullopt);
  cache.Release(match.blocks);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, ChatTurnReusesEveryTokenOfThePreviousTurn) {
  PrefixCache cache(SmallConfig(8));
  const std::vector<int32_t> turn1 = Range(0, 10);  // blocks 0, 1 full; 2 the tail {8, 9}
  EXPECT_EQ(Cache(cache, turn1), (Ids{0, 1, 2}));
  const std::vector<int32_t> turn2 = Concat(turn1, Range(200, 206));  // 16 tokens
  std::optional<testing::Request> request = RunPrompt(cache, turn2);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->cached_tokens, 10u);  // all of turn 1, including its tail
  // Block 3 (the copy) became {8, 9, 200, 201}, which covers the old tail: once block 3 was
  // committed the tail was dropped, and its block 2 was reused for {202, ..., 205}.
  EXPECT_EQ(request->table, (Ids{0, 1, 3, 2}));
  cache.Release(request->table);
  ExpectNoLeak(cache);
  EXPECT_EQ(cache.Stats().blocks_cached, 4);
  EXPECT_EQ(cache.Stats().blocks_free, 4);

  // Turn 3 with the same history reuses turn 2 up to its last token.
  const std::vector<int32_t> turn3 = Concat(turn2, {300});
  request = RunPrompt(cache, turn3);
  ASSERT_TRUE(request);
  EXPECT_EQ(request->cached_tokens, 16u);
  cache.Release(request->table);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, TailCoveredByALongerSiblingIsNotIndexed) {
  PrefixCache cache(SmallConfig(8));
  Cache(cache, Range(0, 8));  // blocks 0 and 1 full
  // A sequence whose tail {4, 5} is a prefix of block 1 gains nothing from indexing its tail.
  std::optional<testing::Request> request = RunPrompt(cache, Range(0, 6));
  ASSERT_TRUE(request);
  EXPECT_EQ(request->cached_tokens, 5u);
  EXPECT_EQ(request->table, (Ids{0, 2}));
  EXPECT_FALSE(cache.IsIndexed(2));
  cache.Release(request->table);
  ExpectNoLeak(cache);
  EXPECT_EQ(cache.Stats().blocks_cached, 2);
}

TEST(PrefixCacheTest, NoFreshBlockForTheCopyMeansFullBlocksOnly) {
  PrefixCache cache(SmallConfig(3));
  EXPECT_EQ(Cache(cache, Range(0, 10)), (Ids{0, 1, 2}));
  // Blocks 0 and 1 get shared, the source 2 is protected while the copy is sought, and there is
  // no other block: the match stops at the full blocks.
  const std::vector<int32_t> query = Concat(Range(0, 10), {50});
  PrefixMatch match = cache.Match(query, 10, {});
  EXPECT_EQ(match.blocks, (Ids{0, 1}));
  EXPECT_EQ(match.cached_tokens, 8u);
  EXPECT_TRUE(cache.IsIndexed(2));
  EXPECT_EQ(cache.NumAllocatable(), 1u);
  cache.Release(match.blocks);
  ExpectNoLeak(cache);
  EXPECT_EQ(cache.Stats().evictions, 0);
}

TEST(PrefixCacheTest, CacheSaltIsolatesTenants) {
  PrefixCache cache(SmallConfig(8));
  const std::vector<int32_t> prompt = Range(0, 10);
  Cache(cache, prompt, {"alice", ""});
  EXPECT_EQ(cache.Match(prompt, 9, {"bob", ""}).cached_tokens, 0u);
  EXPECT_EQ(cache.Match(prompt, 9, {}).cached_tokens, 0u);
  EXPECT_EQ(cache.Match(prompt, 9, {"", "alice"}).cached_tokens, 0u);
  // Not even a partial match of a first block crosses tenants.
  EXPECT_EQ(cache.Match(Range(0, 3), 3, {"bob", ""}).cached_tokens, 0u);
  std::optional<testing::Request> request = RunPrompt(cache, prompt, {"alice", ""});
  ASSERT_TRUE(request);
  EXPECT_EQ(request->cached_tokens, 9u);
  cache.Release(request->table);
  // Bob computes his own copy, which lives beside Alice's.
  request = RunPrompt(cache, prompt, {"bob", ""});
  ASSERT_TRUE(request);
  EXPECT_EQ(request->cached_tokens, 0u);
  cache.Release(request->table);
  EXPECT_EQ(cache.Stats().blocks_cached, 6);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, RootFingerprintIsolatesModels) {
  PrefixCacheConfig config_a = SmallConfig(4);
  PrefixCacheConfig config_b = SmallConfig(4);
  config_b.root_fingerprint = testing::Fingerprint(8);
  PrefixCache a(config_a);
  PrefixCache a2(config_a);
  PrefixCache b(config_b);
  const std::vector<int32_t> tokens = Range(0, 4);
  // Keys are what a shared tier (disk, Redis) would look blocks up by.
  auto commit = [&tokens](PrefixCache& cache) {
    BlockId block = *cache.Allocate();
    Digest key = cache.Commit(block, std::nullopt, tokens, {});
    cache.Release(Ids{block});
    return key;
  };
  const Digest key_a = commit(a);
  EXPECT_EQ(key_a, commit(a2));
  EXPECT_NE(key_a, commit(b));
  EXPECT_EQ(key_a, KeyOf(config_a.root_fingerprint, tokens, 0, 4));
}

TEST(PrefixCacheTest, ReuseDisabledIsPlainPagedStorage) {
  PrefixCacheConfig config = SmallConfig(4);
  config.enable_reuse = false;
  PrefixCache cache(config);
  const std::vector<int32_t> prompt = Range(0, 10);
  for (int round = 0; round < 2; ++round) {
    std::optional<testing::Request> request = RunPrompt(cache, prompt);
    ASSERT_TRUE(request);
    EXPECT_EQ(request->cached_tokens, 0u);
    EXPECT_EQ(request->table, (Ids{0, 1, 2}));
    EXPECT_FALSE(cache.IsIndexed(0));
    EXPECT_EQ(cache.Pin(request->table), 0u);
    cache.Release(request->table);
    ExpectNoLeak(cache);
    EXPECT_EQ(cache.Stats().blocks_free, 4);
  }
  EXPECT_EQ(cache.Match(prompt, 10, {}).blocks, Ids{});
  CacheStats stats = cache.Stats();
  EXPECT_EQ(stats.lookups, 3);
  EXPECT_EQ(stats.hit_tokens, 0);
  EXPECT_EQ(stats.miss_tokens, 9 + 9 + 10);
}

TEST(PrefixCacheTest, IdenticalCommitKeepsTheIndexedBlock) {
  PrefixCache cache(SmallConfig(8));
  const std::vector<int32_t> prompt = Range(0, 8);
  std::span<const int32_t> first(prompt.data(), 4);
  std::span<const int32_t> second(prompt.data() + 4, 4);
  // Two requests compute the same prompt at once: x holds {0, 1}, y holds {2, 3}.
  Ids x = {*cache.Allocate(), *cache.Allocate()};
  Ids y = {*cache.Allocate(), *cache.Allocate()};
  Digest kx0 = cache.Commit(x[0], std::nullopt, first, {});
  Digest ky0 = cache.Commit(y[0], std::nullopt, first, {});  // duplicate: y[0] stays private
  EXPECT_EQ(kx0, ky0);
  EXPECT_TRUE(cache.IsIndexed(0));
  EXPECT_FALSE(cache.IsIndexed(2));
  Digest ky1 = cache.Commit(y[1], ky0, second, {});  // indexed under block 0
  Digest kx1 = cache.Commit(x[1], kx0, second, {});  // duplicate of block 3
  EXPECT_EQ(kx1, ky1);
  EXPECT_TRUE(cache.IsIndexed(3));
  EXPECT_FALSE(cache.IsIndexed(1));
  EXPECT_NO_THROW(cache.CheckInvariants());

  // x leaves: its private block is freed; block 0 stays (y's block 3 hangs below it).
  cache.Release(x);
  EXPECT_EQ(cache.Stats().blocks_cached, 1);
  EXPECT_EQ(cache.NumAllocatable(), 5u);  // 4 never used + block 1; not block 0
  cache.Release(y);
  EXPECT_EQ(cache.NumAllocatable(), 8u);
  ExpectNoLeak(cache);
  PrefixMatch match = cache.Match(prompt, 8, {});
  EXPECT_EQ(match.blocks, (Ids{0, 3}));
  cache.Release(match.blocks);
  ExpectNoLeak(cache);
}

// ClearOwned drops one owner's cached blocks (whole chains, leaves first) and nothing else: not
// another owner's, not a block in use, not a pinned one.
TEST(PrefixCacheTest, ClearOwnedDropsOnlyThatOwnersBlocks) {
  PrefixCache cache(SmallConfig(16));
  CacheKeyExtras tenant_a{"salt-a", ""};
  CacheKeyExtras tenant_b{"salt-b", ""};
  RetentionPolicy owned_a;
  owned_a.owner = TenantSaltDigest("a");
  RetentionPolicy owned_b;
  owned_b.owner = TenantSaltDigest("b");
  ASSERT_NE(owned_a.owner, owned_b.owner);
  EXPECT_EQ(TenantSaltDigest(""), Digest{});
  EXPECT_NE(TenantSaltDigest("a"), Digest{});
  Cache(cache, Range(0, 12), tenant_a, owned_a);     // 3 blocks of a
  Cache(cache, Range(100, 108), tenant_b, owned_b);  // 2 blocks of b
  // A request of a still running holds its blocks.
  std::optional<testing::Request> running = RunPrompt(cache, Range(200, 208), tenant_a, owned_a);
  ASSERT_TRUE(running.has_value());
  EXPECT_EQ(cache.Stats().blocks_cached, 5);

  EXPECT_EQ(cache.ClearOwned(owned_a.owner), 3u);
  EXPECT_EQ(cache.Stats().blocks_cached, 2);
  EXPECT_EQ(cache.Match(Range(0, 12), 11, tenant_a).cached_tokens, 0u);
  PrefixMatch b = cache.Match(Range(100, 108), 8, tenant_b);
  EXPECT_EQ(b.cached_tokens, 8u);
  cache.Release(b.blocks);
  cache.Release(running->table);
  EXPECT_EQ(cache.ClearOwned(owned_a.owner), 2u);  // released now, so cleared
  EXPECT_EQ(cache.ClearOwned(owned_b.owner), 2u);
  EXPECT_EQ(cache.Stats().blocks_cached, 0);
  cache.CheckInvariants();
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, CommitUnderAnEvictedParentStaysPrivate) {
  PrefixCache cache(SmallConfig(2));
  const std::vector<int32_t> prompt = Range(0, 8);
  BlockId a = *cache.Allocate();
  Digest key0 = cache.Commit(a, std::nullopt, std::span(prompt).first(4), {});
  cache.Release(Ids{a});
  EXPECT_EQ(cache.ClearUnpinned(), 1u);  // the parent is gone
  BlockId b = *cache.Allocate();
  cache.Commit(b, key0, std::span(prompt).subspan(4, 4), {});
  EXPECT_FALSE(cache.IsIndexed(b));
  cache.Release(Ids{b});
  ExpectNoLeak(cache);
  EXPECT_EQ(cache.Stats().blocks_free, 2);
}

TEST(PrefixCacheTest, MisuseIsCheckedWithoutCorruptingState) {
  PrefixCache cache(SmallConfig(4));
  const std::vector<int32_t> tokens = Range(0, 4);
  BlockId block = *cache.Allocate();
  EXPECT_THROW(cache.Commit(2, std::nullopt, tokens, {}), InternalError);  // not held
  EXPECT_THROW(cache.Commit(block, std::nullopt, Range(0, 5), {}), InternalError);
  EXPECT_THROW(cache.Commit(block, std::nullopt, {}, {}), InternalError);
  EXPECT_THROW(cache.Commit(block, std::nullopt, tokens, {}, {101, 0, false}), InternalError);
  Digest key = cache.Commit(block, std::nullopt, std::span(tokens).first(2), {});
  EXPECT_THROW(cache.Commit(block, std::nullopt, tokens, {}), InternalError);  // twice
  BlockId child = *cache.Allocate();
  EXPECT_THROW(cache.Commit(child, key, tokens, {}), InternalError);  // under a tail
  EXPECT_THROW(cache.Release(Ids{3}), InternalError);                 // not held
  EXPECT_NO_THROW(cache.CheckInvariants());
  cache.Release(Ids{block, child});
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, OutOfBlocksReturnsNulloptAndKeepsState) {
  PrefixCache cache(SmallConfig(3));
  std::optional<testing::Request> a = RunPrompt(cache, Range(0, 8));  // blocks 0, 1
  ASSERT_TRUE(a);
  EXPECT_EQ(cache.NumAllocatable(), 1u);
  // Needs three blocks: gets block 2, then runs out and gives block 2 back.
  EXPECT_FALSE(RunPrompt(cache, Range(100, 112)));
  EXPECT_EQ(cache.Allocate(), 2);
  EXPECT_EQ(cache.Allocate(), std::nullopt);
  EXPECT_EQ(cache.Allocate(), std::nullopt);
  EXPECT_EQ(cache.NumAllocatable(), 0u);
  EXPECT_NO_THROW(cache.CheckInvariants());
  cache.Release(Ids{2});
  cache.Release(a->table);
  ExpectNoLeak(cache);
  // The cached prompt is still intact.
  std::optional<testing::Request> again = RunPrompt(cache, Range(0, 8));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cached_tokens, 7u);
  cache.Release(again->table);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, PinnedBlocksStayAndCount) {
  PrefixCache cache(SmallConfig(4));
  const std::vector<int32_t> task = Range(0, 8);
  std::optional<testing::Request> request = RunPrompt(cache, task);
  ASSERT_TRUE(request);
  EXPECT_EQ(cache.Pin(request->table), 2u);
  cache.Release(request->table);
  EXPECT_EQ(cache.Stats().blocks_pinned, 2);
  EXPECT_EQ(cache.NumAllocatable(), 2u);
  // Other traffic cannot push the pinned prompt out.
  for (int i = 0; i < 3; ++i) Cache(cache, Range(100 * (i + 1), 100 * (i + 1) + 8));
  EXPECT_EQ(cache.ClearUnpinned(), 2u);
  EXPECT_TRUE(cache.IsIndexed(0) && cache.IsIndexed(1));
  EXPECT_EQ(cache.Match(task, 8, {}).cached_tokens, 8u);
  cache.Release(Ids{0, 1});
  // A private block cannot be pinned; unpinning makes the prompt evictable again.
  BlockId scratch = *cache.Allocate();
  EXPECT_EQ(cache.Pin(Ids{scratch}), 0u);
  cache.Release(Ids{scratch});
  EXPECT_EQ(cache.Unpin(Ids{0, 1}), 2u);
  EXPECT_EQ(cache.Stats().blocks_pinned, 0);
  EXPECT_EQ(cache.NumAllocatable(), 4u);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, PinnedByPolicyAndThroughADuplicate) {
  PrefixCache cache(SmallConfig(4));
  const std::vector<int32_t> tokens = Range(0, 4);
  BlockId first = *cache.Allocate();
  BlockId second = *cache.Allocate();
  cache.Commit(first, std::nullopt, tokens, {});
  // The duplicate's pinned policy pins the indexed block.
  cache.Commit(second, std::nullopt, tokens, {}, {35, 0, true});
  EXPECT_TRUE(cache.IsPinned(first));
  EXPECT_FALSE(cache.IsPinned(second));
  EXPECT_EQ(cache.Unpin(Ids{second}), 1u);  // resolved to the indexed twin
  EXPECT_FALSE(cache.IsPinned(first));
  EXPECT_EQ(cache.Pin(Ids{second}), 1u);
  EXPECT_TRUE(cache.IsPinned(first));
  cache.Release(Ids{first, second});
  EXPECT_EQ(cache.ClearUnpinned(), 0u);
  EXPECT_EQ(cache.Stats().blocks_pinned, 1);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, ClearUnpinnedDropsWhatEvictionCanReach) {
  PrefixCache cache(SmallConfig(8));
  Cache(cache, Range(0, 8));                   // 0, 1: dropped
  Ids pinned = Cache(cache, Range(100, 104));  // 2: pinned
  cache.Pin(pinned);
  std::optional<testing::Request> running = RunPrompt(cache, Range(200, 208));  // 3, 4: held
  ASSERT_TRUE(running);
  EXPECT_EQ(cache.ClearUnpinned(), 2u);
  EXPECT_EQ(cache.Stats().blocks_free, 5);
  EXPECT_TRUE(cache.IsIndexed(2) && cache.IsIndexed(3) && cache.IsIndexed(4));
  EXPECT_EQ(cache.Stats().evictions, 0);  // an admin drop, not an eviction
  cache.Release(running->table);
  EXPECT_EQ(cache.ClearUnpinned(), 2u);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, StatsCountLookupsHitsMissesAndBlocks) {
  PrefixCache cache(SmallConfig(4));
  Cache(cache, Range(0, 8));                                                 // queried 7, hit 0
  std::optional<testing::Request> request = RunPrompt(cache, Range(0, 12));  // queried 11, hit 8
  ASSERT_TRUE(request);
  CacheStats stats = cache.Stats();
  EXPECT_EQ(stats.lookups, 2);
  EXPECT_EQ(stats.hit_tokens, 8);
  EXPECT_EQ(stats.miss_tokens, 7 + 3);
  EXPECT_EQ(stats.blocks_in_use, 3);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(stats.blocks_free, 1);
  EXPECT_EQ(stats.evictions, 0);
  cache.Release(request->table);
  Cache(cache, Range(50, 62));  // needs 3 blocks: 1 free + 2 evicted
  stats = cache.Stats();
  EXPECT_EQ(stats.evictions, 2);
  EXPECT_EQ(stats.blocks_cached + stats.blocks_free, 4);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheTest, StatsCanBeReadFromAnotherThread) {
  PrefixCache cache(SmallConfig(16));
  std::atomic<bool> done{false};
  int64_t last_lookups = 0;
  bool monotonic = true;
  std::thread reader([&] {
    while (!done.load()) {
      CacheStats stats = cache.Stats();
      monotonic = monotonic && stats.lookups >= last_lookups;
      last_lookups = stats.lookups;
    }
  });
  for (int i = 0; i < 500; ++i) Cache(cache, Range(i % 7, i % 7 + 10));
  done.store(true);
  reader.join();
  EXPECT_TRUE(monotonic);
  EXPECT_EQ(cache.Stats().lookups, 500);
  ExpectNoLeak(cache);
}

}  // namespace
}  // namespace reprise
