// The router's pure parts: which replica holds which block, and the choice of a replica.
#include <gtest/gtest.h>

#include "core/error.h"
#include "router/prefix_directory.h"
#include "router/replica_set.h"
#include "router/routing_policy.h"

namespace reprise::router {
namespace {

Digest Key(uint8_t n) {
  Digest d{};
  d[0] = n;
  return d;
}

TEST(PrefixDirectory, MatchesAChainFromItsStartOnly) {
  PrefixDirectory directory(100);
  directory.Record({Key(1), Key(2), Key(3)}, 0);
  directory.Record({Key(1), Key(2)}, 1);
  EXPECT_EQ(directory.MatchedBlocks({Key(1), Key(2), Key(3), Key(4)}, 0), 3u);
  EXPECT_EQ(directory.MatchedBlocks({Key(1), Key(2), Key(3)}, 1), 2u);
  EXPECT_EQ(directory.MatchedBlocks({Key(9), Key(2)}, 0), 0u);  // a gap ends the chain
  directory.Remove(Key(2), 0);
  EXPECT_EQ(directory.MatchedBlocks({Key(1), Key(2), Key(3)}, 0), 1u);
  EXPECT_EQ(directory.MatchedBlocks({Key(1), Key(2), Key(3)}, 1), 2u);
  directory.ClearReplica(1);
  EXPECT_EQ(directory.MatchedBlocks({Key(1)}, 1), 0u);
  EXPECT_EQ(directory.MatchedBlocks({Key(1)}, 0), 1u);
  EXPECT_THROW(directory.Record({Key(1)}, kMaxReplicas), InternalError);
}

TEST(PrefixDirectory, ForgetsTheLeastRecentlyUsedKeysBeyondItsCapacity) {
  PrefixDirectory directory(3);
  directory.Record({Key(1), Key(2), Key(3)}, 0);
  directory.Record({Key(1)}, 0);  // 1 is now the most recent
  directory.Record({Key(4)}, 0);  // 2 goes
  EXPECT_EQ(directory.size(), 3u);
  EXPECT_EQ(directory.MatchedBlocks({Key(1)}, 0), 1u);
  EXPECT_EQ(directory.MatchedBlocks({Key(2)}, 0), 0u);
  EXPECT_EQ(directory.MatchedBlocks({Key(3)}, 0), 1u);
}

// Each tier of a replica is its own record: a block dropped from its disk stays in its memory.
TEST(PrefixDirectory, KeepsEachTierOfAReplicaApart) {
  PrefixDirectory directory(100);
  const auto disk = KvEventTier::kDisk;
  const auto memory = KvEventTier::kMemory;
  directory.Record({Key(1), Key(2), Key(3)}, 0, disk);
  directory.Record({Key(1), Key(2)}, 0, memory);
  EXPECT_EQ(directory.MatchedBlocks({Key(1), Key(2), Key(3)}, 0), 2u);  // memory by default
  EXPECT_EQ(directory.MatchedBlocks({Key(1), Key(2), Key(3)}, 0, {memory, disk}), 3u);
  EXPECT_EQ(directory.MatchedBlocks({Key(1), Key(2), Key(3)}, 0, {disk}), 3u);
  directory.Remove(Key(2), 0, disk);
  EXPECT_EQ(directory.MatchedBlocks({Key(1), Key(2), Key(3)}, 0), 2u);
  EXPECT_EQ(directory.MatchedBlocks({Key(1), Key(2), Key(3)}, 0, {disk}), 1u);
  // Held in memory, 2 still joins the chain to 3 on disk.
  EXPECT_EQ(directory.MatchedBlocks({Key(1), Key(2), Key(3)}, 0, {memory, disk}), 3u);
  directory.Remove(Key(2), 0, memory);
  EXPECT_EQ(directory.MatchedBlocks({Key(1), Key(2), Key(3)}, 0, {memory, disk}), 1u);
  EXPECT_EQ(directory.size(), 2u);  // 2 is held nowhere: forgotten
  EXPECT_EQ(directory.HeldBy(0), 1u);
  EXPECT_EQ(directory.HeldBy(0, disk), 2u);

  // A replica's whole record replaced in one step (a snapshot): its other tiers and the other
  // replicas keep theirs.
  directory.Record({Key(7)}, 1, memory);
  std::vector<Digest> held[kTierCount];
  held[static_cast<size_t>(memory)] = {Key(5)};
  held[static_cast<size_t>(KvEventTier::kRemote)] = {Key(6)};
  directory.ReplaceReplica(0, held);
  EXPECT_EQ(directory.MatchedBlocks({Key(1)}, 0, {memory, disk}), 0u);
  EXPECT_EQ(directory.MatchedBlocks({Key(5)}, 0), 1u);
  EXPECT_EQ(directory.MatchedBlocks({Key(6)}, 0, {KvEventTier::kRemote}), 1u);
  EXPECT_EQ(directory.MatchedBlocks({Key(7)}, 1), 1u);
  EXPECT_EQ(directory.HeldBy(0), 1u);
  EXPECT_EQ(directory.HeldBy(0, disk), 0u);
  EXPECT_EQ(directory.size(), 3u);
}

TEST(RoutingPolicy, PrefersTheCachedPrefixUntilTheLoadGapIsTooWide) {
  PolicyConfig config;  // 512 tokens per request of load, gap 4
  // Replica 1 holds 900 of 1000 tokens; replica 0 is idle.
  std::vector<Candidate> c = {{0, 0, 0}, {1, 900, 1}};
  EXPECT_EQ(ChooseCandidate(RoutingPolicy::kPrefix, c, 1000, config, 0), 1u);
  // Busier: 100 + 2x512 > 1000.
  c[1].load = 2;
  EXPECT_EQ(ChooseCandidate(RoutingPolicy::kPrefix, c, 1000, config, 0), 0u);
  // A long prompt outweighs the load, until the gap passes the threshold.
  c = {{0, 0, 0}, {1, 9900, 4}};
  EXPECT_EQ(ChooseCandidate(RoutingPolicy::kPrefix, c, 10000, config, 0), 1u);
  c[1].load = 5;
  EXPECT_EQ(ChooseCandidate(RoutingPolicy::kPrefix, c, 10000, config, 0), 0u);
}

TEST(RoutingPolicy, SharesEqualReplicasAndRoundRobinTakesTurns) {
  PolicyConfig config;
  std::vector<Candidate> c = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}};
  EXPECT_EQ(ChooseCandidate(RoutingPolicy::kPrefix, c, 100, config, 0), 0u);
  EXPECT_EQ(ChooseCandidate(RoutingPolicy::kPrefix, c, 100, config, 1), 1u);
  EXPECT_EQ(ChooseCandidate(RoutingPolicy::kPrefix, c, 100, config, 5), 2u);
  c[2].cached_tokens = 100;
  for (size_t turn = 0; turn < 6; ++turn) {
    EXPECT_EQ(ChooseCandidate(RoutingPolicy::kRoundRobin, c, 100, config, turn), turn % 3);
    EXPECT_EQ(ChooseCandidate(RoutingPolicy::kPrefix, c, 100, config, turn), 2u);
  }
  EXPECT_EQ(ParseRoutingPolicy("round-robin"), RoutingPolicy::kRoundRobin);
  EXPECT_FALSE(ParseRoutingPolicy("random"));
}

TEST(RoutingPolicy, SpreadsNewPrefixesByLoadThenByHowMuchEachReplicaHolds) {
  PolicyConfig config;
  // A shared chat header (1 block of 16) is not enough to call a 300-token prompt cached.
  std::vector<Candidate> c = {{0, 16, 0, 40}, {1, 0, 0, 10}};
  EXPECT_EQ(ChooseCandidate(RoutingPolicy::kPrefix, c, 300, config, 0), 1u);
  c[1].load = 1;
  EXPECT_EQ(ChooseCandidate(RoutingPolicy::kPrefix, c, 300, config, 0), 0u);
  // Over the share: the holder wins despite holding more overall.
  c = {{0, 200, 0, 40}, {1, 0, 0, 10}};
  EXPECT_EQ(ChooseCandidate(RoutingPolicy::kPrefix, c, 300, config, 1), 0u);
}

TEST(PrefixDirectory, CountsWhatEachReplicaHolds) {
  PrefixDirectory directory(3);
  directory.Record({Key(1), Key(2)}, 0);
  directory.Record({Key(2), Key(3)}, 1);
  EXPECT_EQ(directory.HeldBy(0), 2u);
  EXPECT_EQ(directory.HeldBy(1), 2u);
  directory.Record({Key(4)}, 1);  // key 1 is forgotten
  EXPECT_EQ(directory.HeldBy(0), 1u);
  EXPECT_EQ(directory.HeldBy(1), 3u);
  directory.Remove(Key(2), 1);
  directory.Remove(Key(2), 1);  // twice: counted once
  EXPECT_EQ(directory.HeldBy(1), 2u);
  directory.ClearReplica(1);
  EXPECT_EQ(directory.HeldBy(1), 0u);
  EXPECT_EQ(directory.HeldBy(0), 1u);
}

TEST(ReplicaUrl, AcceptsHttpHostPortOnly) {
  ReplicaAddress a = ParseReplicaUrl("http://127.0.0.1:8001/");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 8001);
  EXPECT_THROW(ParseReplicaUrl("https://x:1"), Error);
  EXPECT_THROW(ParseReplicaUrl("http://x"), Error);
  EXPECT_THROW(ParseReplicaUrl("http://x:70000"), Error);
  EXPECT_THROW(ParseReplicaUrl("http://x:1/v1"), Error);
}

}  // namespace
}  // namespace reprise::router
