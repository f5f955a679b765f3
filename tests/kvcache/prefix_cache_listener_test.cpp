#include <gtest/gtest.h>

#include <vector>

#include "kv_test_util.h"
#include "kvcache/prefix_cache.h"

namespace reprise {
namespace {

using testing::Range;
using testing::SmallConfig;

// Records what it is told, with a copy of the bytes as they were during the call.
class Recorder : public PrefixCacheListener {
 public:
  struct Event {
    bool stored;
    BlockRemoval removal;
    Digest key;
    Digest parent_key;
    std::vector<int32_t> tokens;
    std::vector<uint8_t> data;
    bool full;
    bool pinned;
    int priority;
  };
  void OnBlockStored(const CachedBlockInfo& block) override { Record(block, true, {}); }
  void OnBlockRemoved(const CachedBlockInfo& block, BlockRemoval removal) override {
    Record(block, false, removal);
  }
  std::vector<Event> events;

 private:
  void Record(const CachedBlockInfo& block, bool stored, BlockRemoval removal) {
    events.push_back({stored, removal, *block.key, *block.parent_key,
                      std::vector<int32_t>(block.tokens.begin(), block.tokens.end()),
                      std::vector<uint8_t>(block.data.begin(), block.data.end()), block.full,
                      block.pinned, block.priority});
  }
};

TEST(PrefixCacheListenerTest, ToldOfStoredEvictedAndClearedBlocksWithTheirBytes) {
  PrefixCache cache(SmallConfig(2));
  Recorder recorder;
  cache.SetListener(&recorder);
  std::vector<int32_t> tokens = Range(0, 8);
  BlockKeyChain chain(cache.root_fingerprint(), {});
  chain.Extend(tokens, 4);

  BlockId first = *cache.Allocate();
  BlockId second = *cache.Allocate();
  testing::WriteSlot(cache, first, 0, 111);
  testing::WriteSlot(cache, second, 0, 222);
  Digest key0 = cache.Commit(first, std::nullopt, Range(0, 4), {}, {60, 0, false});
  cache.Commit(second, key0, Range(4, 8), {}, {35, 0, true});
  ASSERT_EQ(recorder.events.size(), 2u);
  EXPECT_TRUE(recorder.events[0].stored);
  EXPECT_EQ(recorder.events[0].key, chain.keys()[0]);
  EXPECT_EQ(recorder.events[0].parent_key, cache.root_fingerprint());
  EXPECT_EQ(recorder.events[0].priority, 60);
  EXPECT_EQ(recorder.events[1].key, chain.keys()[1]);
  EXPECT_EQ(recorder.events[1].parent_key, chain.keys()[0]);
  EXPECT_EQ(recorder.events[1].tokens, Range(4, 8));
  EXPECT_TRUE(recorder.events[1].pinned);
  EXPECT_TRUE(recorder.events[1].full);
  cache.Unpin(std::vector<BlockId>{second});
  cache.Release(std::vector<BlockId>{first, second});

  // A third block evicts the leaf first: the listener sees its bytes before they are reused.
  BlockId fresh = *cache.Allocate();
  ASSERT_EQ(recorder.events.size(), 3u);
  EXPECT_FALSE(recorder.events[2].stored);
  EXPECT_EQ(recorder.events[2].removal, BlockRemoval::kEvicted);
  EXPECT_EQ(recorder.events[2].key, chain.keys()[1]);
  EXPECT_EQ(testing::ReadSlot(cache, fresh, 0), 222u);  // not yet overwritten
  uint64_t seen = 0;
  std::memcpy(&seen, recorder.events[2].data.data(), sizeof(seen));
  EXPECT_EQ(seen, 222u);
  cache.Release(std::vector<BlockId>{fresh});

  EXPECT_EQ(cache.ClearUnpinned(), 1u);
  ASSERT_EQ(recorder.events.size(), 4u);
  EXPECT_EQ(recorder.events[3].removal, BlockRemoval::kCleared);
  EXPECT_EQ(recorder.events[3].key, chain.keys()[0]);
}

TEST(PrefixCacheListenerTest, AKeyChainMatchesAsTheTokensDo) {
  PrefixCache cache(SmallConfig(4));
  std::vector<int32_t> tokens = Range(0, 12);
  PrefixMatch computed = cache.Match(tokens, 11, CacheKeyExtras{});
  std::optional<Digest> parent;
  for (size_t i = 0; i < 3; ++i) {
    BlockId block = *cache.Allocate();
    parent = cache.Commit(block, parent, std::span<const int32_t>(tokens).subspan(4 * i, 4), {});
    cache.Release(std::vector<BlockId>{block});
  }
  BlockKeyChain chain(cache.root_fingerprint(), {});
  chain.Extend(std::span<const int32_t>(tokens).first(6), 4);
  EXPECT_EQ(chain.size(), 1u);
  chain.Extend(tokens, 4);  // extended as the sequence grows
  EXPECT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain.keys()[2], *parent);
  EXPECT_EQ(cache.CachedChainLength(chain, 11), 8u);
  EXPECT_EQ(cache.CachedChainLength(chain, 12), 12u);
  PrefixMatch match = cache.MatchChain(tokens, 11, chain);
  EXPECT_EQ(match.cached_tokens, 11u);  // 8 by key, then 3 copied from the third block
  cache.Release(match.blocks);
  cache.Release(computed.blocks);
  testing::ExpectNoLeak(cache);
}

}  // namespace
}  // namespace reprise
