// The router's KV event feed applied to its PrefixDirectory (no stream read here: batches are
// applied as the reading thread applies them).
#include "router/kv_event_feed.h"

#include <gtest/gtest.h>

namespace reprise::router {
namespace {

using kvevents::KvEvent;
using kvevents::KvEventBatch;
using kvevents::KvEventTier;
using kvevents::KvEventType;

Digest MakeDigest(uint8_t seed) {
  Digest digest{};
  digest.fill(seed);
  return digest;
}

KvEvent Stored(uint8_t key, KvEventTier tier = KvEventTier::kMemory) {
  return {KvEventType::kStored, tier, MakeDigest(key), MakeDigest(0), MakeDigest(9)};
}
KvEvent Removed(uint8_t key) {
  return {KvEventType::kRemoved, KvEventTier::kMemory, MakeDigest(key), MakeDigest(0),
          MakeDigest(9)};
}

class KvEventFeedTest : public ::testing::Test {
 protected:
  PrefixDirectory directory{1000};
  Digest root = MakeDigest(200);
  KvEventFeed feed{"unused", nullptr, directory,
                   [](const std::string& id) { return id == "a"   ? 0
                                                      : id == "b" ? 1
                                                                  : -1; },
                   [this] { return std::optional<Digest>(root); }};

  KvEventBatch Batch(const std::string& replica, const std::string& instance, uint64_t seq,
                     std::vector<KvEvent> events) {
    return {replica, instance, root, seq, std::move(events)};
  }
  size_t Held(std::initializer_list<uint8_t> keys, int replica) {
    std::vector<Digest> chain;
    for (uint8_t key : keys) chain.push_back(MakeDigest(key));
    return directory.MatchedBlocks(chain, replica);
  }
};

TEST_F(KvEventFeedTest, StoredAndRemovedEventsKeepTheDirectory) {
  EXPECT_FALSE(feed.Live(0));
  feed.Apply(Batch("a", "i1", 0, {Stored(1), Stored(2), Stored(3)}));
  EXPECT_TRUE(feed.Live(0));
  EXPECT_FALSE(feed.Live(1));
  EXPECT_EQ(Held({1, 2, 3}, 0), 3u);
  EXPECT_EQ(Held({1, 2, 3}, 1), 0u);
  feed.Apply(Batch("a", "i1", 3, {Removed(2)}));
  EXPECT_EQ(Held({1, 2, 3}, 0), 1u);  // a chain stops at its first gap
  // Other tiers are not the replica's memory: not counted.
  feed.Apply(Batch("b", "j1", 0, {Stored(1, KvEventTier::kDisk)}));
  EXPECT_EQ(Held({1}, 1), 0u);
  EXPECT_EQ(feed.counters().events_applied, 5u);
}

TEST_F(KvEventFeedTest, ClearedRestartAndGapForgetWhatAReplicaHeld) {
  feed.Apply(Batch("a", "i1", 0, {Stored(1), Stored(2)}));
  feed.Apply(Batch("b", "j1", 0, {Stored(1)}));
  KvEvent cleared;
  cleared.type = KvEventType::kCleared;
  feed.Apply(Batch("a", "i1", 2, {cleared, Stored(5)}));
  EXPECT_EQ(Held({1}, 0), 0u);
  EXPECT_EQ(Held({5}, 0), 1u);
  EXPECT_EQ(Held({1}, 1), 1u);  // the other replica keeps its blocks

  feed.Apply(Batch("a", "i2", 0, {Stored(6)}));  // a new instance: it restarted
  EXPECT_EQ(Held({5}, 0), 0u);
  EXPECT_EQ(Held({6}, 0), 1u);
  EXPECT_EQ(feed.counters().restarts, 1u);

  feed.Apply(Batch("a", "i2", 5, {Stored(7)}));  // events 1..4 were lost
  EXPECT_EQ(Held({6}, 0), 0u);
  EXPECT_EQ(Held({7}, 0), 1u);
  EXPECT_EQ(feed.counters().gaps, 1u);
  feed.Apply(Batch("a", "i2", 6, {Stored(8)}));  // consecutive again
  EXPECT_EQ(Held({7}, 0), 1u);
  EXPECT_EQ(feed.counters().gaps, 1u);
}

TEST_F(KvEventFeedTest, SkipsOtherModelsAndUnknownReplicas) {
  KvEventBatch foreign = Batch("a", "i1", 0, {Stored(1)});
  foreign.root = MakeDigest(201);
  feed.Apply(foreign);
  feed.Apply(Batch("c", "k1", 0, {Stored(1)}));
  EXPECT_EQ(Held({1}, 0), 0u);
  EXPECT_EQ(directory.size(), 0u);
  EXPECT_EQ(feed.counters().events_foreign, 1u);
  EXPECT_EQ(feed.counters().events_unmatched, 1u);
  EXPECT_FALSE(feed.Live(0));
}

}  // namespace
}  // namespace reprise::router
