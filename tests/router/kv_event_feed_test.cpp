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
KvEvent Removed(uint8_t key, KvEventTier tier = KvEventTier::kMemory) {
  return {KvEventType::kRemoved, tier, MakeDigest(key), MakeDigest(0), MakeDigest(9)};
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

TEST_F(KvEventFeedTest, DiskAndRemoteEventsKeepTheirOwnTiers) {
  feed.Apply(Batch("a", "i1", 0,
                   {Stored(1), Stored(1, KvEventTier::kDisk), Stored(2, KvEventTier::kRemote)}));
  feed.Apply(Batch("a", "i1", 3, {Removed(1, KvEventTier::kDisk)}));
  EXPECT_EQ(Held({1}, 0), 1u);  // still in its memory
  EXPECT_EQ(directory.HeldBy(0, KvEventTier::kDisk), 0u);
  EXPECT_EQ(directory.HeldBy(0, KvEventTier::kRemote), 1u);
  feed.Apply(Batch("a", "i1", 4, {Removed(2, KvEventTier::kRemote), Removed(1)}));
  EXPECT_EQ(directory.size(), 0u);
}

// A feed whose replicas answer snapshots (as GET /v1/cache/blocks would).
class KvEventFeedSnapshotTest : public KvEventFeedTest {
 protected:
  std::optional<CacheBlockList> snapshot;  // what replica "a" answers now
  int fetched = 0;
  KvEventFeed synced{"unused",
                     nullptr,
                     directory,
                     [](const std::string& id) { return id == "a" ? 0 : -1; },
                     [this] { return std::optional<Digest>(root); },
                     [this](int replica) {
                       EXPECT_EQ(replica, 0);
                       ++fetched;
                       return snapshot;
                     }};

  void Answer(const std::string& instance, uint64_t next_seq, std::vector<uint8_t> memory,
              std::vector<uint8_t> disk = {}) {
    CacheBlockList list;
    list.replica_id = "a";
    list.root = root;
    list.kv_events = true;
    list.instance = instance;
    list.next_seq = next_seq;
    for (uint8_t key : memory) list.memory.push_back({MakeDigest(key), MakeDigest(0)});
    for (uint8_t key : disk) list.disk.push_back({MakeDigest(key), MakeDigest(0)});
    snapshot = list;
  }
};

// A router that starts late knows at once what the replica held, and applies only the events
// after the snapshot's position.
TEST_F(KvEventFeedSnapshotTest, StartsFromASnapshotAndSkipsTheEventsItHolds) {
  Answer("i1", 10, {1, 2}, {3});
  ASSERT_TRUE(synced.Resync(0));
  EXPECT_TRUE(synced.Live(0));
  EXPECT_EQ(Held({1, 2}, 0), 2u);
  EXPECT_EQ(directory.MatchedBlocks({MakeDigest(3)}, 0, {KvEventTier::kDisk}), 1u);
  // Events 8..11: 8 and 9 are in the snapshot already (their removal of 1 must not apply twice
  // over a later store), 10 and 11 are new.
  synced.Apply(Batch("a", "i1", 8, {Removed(1), Stored(1), Stored(4), Removed(2)}));
  EXPECT_EQ(Held({1}, 0), 1u);
  EXPECT_EQ(Held({4}, 0), 1u);
  EXPECT_EQ(Held({2}, 0), 0u);
  EXPECT_EQ(synced.counters().events_stale, 2u);
  EXPECT_EQ(synced.counters().events_applied, 2u);
  EXPECT_EQ(synced.counters().snapshots, 1u);
  EXPECT_EQ(fetched, 1);
}

// First sight of a replica's events, a gap and a restart each fetch a snapshot; late batches of
// the instance it replaced are skipped.
TEST_F(KvEventFeedSnapshotTest, AGapOrARestartFetchesASnapshot) {
  Answer("i1", 3, {1});
  synced.Apply(Batch("a", "i1", 2, {Stored(1), Stored(2)}));  // first sight: a snapshot
  EXPECT_EQ(fetched, 1);
  EXPECT_EQ(Held({1, 2}, 0), 2u);  // 2 is event 3: applied over the snapshot

  Answer("i1", 20, {5}, {6});
  synced.Apply(Batch("a", "i1", 15, {Stored(7)}));  // events 4..14 lost
  EXPECT_EQ(fetched, 2);
  EXPECT_EQ(synced.counters().gaps, 1u);
  EXPECT_EQ(Held({1}, 0), 0u);  // what the snapshot does not hold is forgotten
  EXPECT_EQ(Held({5}, 0), 1u);
  EXPECT_EQ(Held({7}, 0), 0u);  // event 15 is in the snapshot (or was undone before it)
  synced.Apply(Batch("a", "i1", 20, {Stored(8)}));
  EXPECT_EQ(Held({8}, 0), 1u);
  EXPECT_EQ(fetched, 2);

  Answer("i2", 4, {9});
  synced.Apply(Batch("a", "i2", 0, {Stored(9)}));  // restarted
  EXPECT_EQ(fetched, 3);
  EXPECT_EQ(synced.counters().restarts, 1u);
  EXPECT_EQ(Held({5}, 0), 0u);
  EXPECT_EQ(directory.HeldBy(0, KvEventTier::kDisk), 0u);
  EXPECT_EQ(Held({9}, 0), 1u);
  synced.Apply(Batch("a", "i1", 21, {Stored(10)}));  // late, of the instance replaced
  EXPECT_EQ(Held({10}, 0), 0u);
  EXPECT_EQ(fetched, 3);

  // No snapshot to be had: what it held is forgotten and its events followed from there.
  snapshot.reset();
  synced.Apply(Batch("a", "i2", 9, {Stored(11)}));
  EXPECT_EQ(fetched, 4);
  EXPECT_EQ(synced.counters().snapshot_failures, 1u);
  EXPECT_EQ(Held({9}, 0), 0u);
  EXPECT_EQ(Held({11}, 0), 1u);
}

// A snapshot of another model, or naming another replica, is refused.
TEST_F(KvEventFeedSnapshotTest, RefusesASnapshotOfAnotherModelOrReplica) {
  Answer("i1", 3, {1});
  snapshot->root = MakeDigest(201);
  EXPECT_FALSE(synced.Resync(0));
  Answer("i1", 3, {1});
  snapshot->replica_id.assign(1, 'b');  // (an assignment of "b" upsets GCC 12)
  EXPECT_FALSE(synced.Resync(0));
  EXPECT_EQ(synced.counters().snapshot_failures, 2u);
  EXPECT_EQ(directory.size(), 0u);
}

}  // namespace
}  // namespace reprise::router
