// RedisTier against real redis-server processes (a single server and a 3-master cluster).
#include "tiers/redis_tier.h"

#include <gtest/gtest.h>

#include <thread>

#include "redis/redis_url.h"
#include "redis_test_server.h"
#include "tier_test_util.h"

namespace reprise {
namespace {

using redis::ParseRedisUrl;
using redis::RedisClient;
using redis::RedisCommand;
using testing::Keys;
using testing::TestChain;
using testing::TestIdentity;
using testing::TestPayload;

std::shared_ptr<RedisClient> Client(const std::string& url) {
  redis::RedisClientOptions options;
  options.backoff_min = std::chrono::milliseconds(20);
  options.backoff_max = std::chrono::milliseconds(100);
  return std::make_shared<RedisClient>(ParseRedisUrl(url), options);
}

// Stores a chain through one tier and loads it through another (as a second replica would).
void ShareAChain(const std::string& url) {
  TierIdentity identity = TestIdentity();
  std::vector<BlockMeta> chain = TestChain(identity, 8);
  RedisTier writer(identity, {}, Client(url));
  for (const BlockMeta& meta : chain) ASSERT_TRUE(writer.Store(meta, TestPayload(identity, meta)));
  EXPECT_EQ(writer.Stats().blocks_written, 8u);

  RedisTier reader(identity, {}, Client(url));
  std::vector<Digest> keys = Keys(chain);
  EXPECT_EQ(reader.ProbablyHeld(keys), 8u);
  std::vector<std::vector<uint8_t>> buffers(10, std::vector<uint8_t>(identity.block_bytes));
  std::vector<uint8_t*> dests;
  for (auto& buffer : buffers) dests.push_back(buffer.data());
  // Two more blocks than stored: the load stops at the first missing one.
  std::vector<BlockMeta> longer = TestChain(identity, 10);
  EXPECT_EQ(reader.LoadPrefix(longer, dests), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(buffers[i], TestPayload(identity, chain[i])) << i;
  EXPECT_EQ(reader.Stats().blocks_read, 8u);
  // The miss is remembered: the engine will not wait on it again soon.
  EXPECT_EQ(reader.ProbablyHeld(Keys(longer)), 8u);
  // Another model's tier sees nothing of it.
  RedisTier other(TestIdentity(4096, 4, "model-b"), {}, Client(url));
  std::vector<BlockMeta> other_chain = TestChain(TestIdentity(4096, 4, "model-b"), 2);
  EXPECT_EQ(other.LoadPrefix(other_chain, std::span<uint8_t* const>(dests).first(2)), 0u);
}

TEST(RedisTier, SharesBlocksBetweenReplicasOnOneServer) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisServer server;
  ShareAChain(server.url());
}

TEST(RedisTier, SharesBlocksBetweenReplicasOnACluster) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisCluster cluster;
  ShareAChain(cluster.url());
}

TEST(RedisTier, RefusesCorruptAndForeignBlocksAndDeletesThem) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisServer server;
  auto client = Client(server.url());
  TierIdentity identity = TestIdentity();
  std::vector<BlockMeta> chain = TestChain(identity, 3);
  RedisTier tier(identity, {}, client);
  for (const BlockMeta& meta : chain) ASSERT_TRUE(tier.Store(meta, TestPayload(identity, meta)));
  // Flip one payload byte of the second block.
  std::string key = tier.RedisKey(chain[1].key);
  std::string value = client->Run(RedisCommand{"GET", key}).text;
  value[value.size() - 5] ^= 0x01;
  client->Run(RedisCommand{"SET", key, value});
  std::vector<uint8_t> buffer(3 * identity.block_bytes);
  uint8_t* dests[] = {buffer.data(), buffer.data() + identity.block_bytes,
                      buffer.data() + 2 * identity.block_bytes};
  EXPECT_EQ(tier.LoadPrefix(chain, dests), 1u);
  EXPECT_EQ(tier.Stats().corrupt_blocks, 1u);
  EXPECT_TRUE(client->Run(RedisCommand{"GET", key}).IsNil()) << "the bad block was not deleted";

  // A block of another layout stored under this block's name.
  TierIdentity foreign = identity;
  foreign.layout_digest = testing::TestDigest("another-layout");
  std::vector<uint8_t> encoded = EncodeBlock(foreign, chain[0], TestPayload(identity, chain[0]));
  client->Run(RedisCommand{"SET", tier.RedisKey(chain[0].key),
                           std::string(encoded.begin(), encoded.end())});
  EXPECT_EQ(tier.LoadPrefix(chain, dests), 0u);
  EXPECT_EQ(tier.Stats().foreign_blocks, 1u);
}

TEST(RedisTier, KeepsATtlAndItsSizeBound) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisServer server;
  auto client = Client(server.url());
  TierIdentity identity = TestIdentity();
  std::vector<BlockMeta> chain = TestChain(identity, 5);
  size_t block = EncodeBlock(identity, chain[0], TestPayload(identity, chain[0])).size();
  RedisTierConfig config;
  config.ttl = std::chrono::seconds(600);
  config.capacity_bytes = 3 * block;
  RedisTier tier(identity, config, client);
  for (const BlockMeta& meta : chain) ASSERT_TRUE(tier.Store(meta, TestPayload(identity, meta)));
  EXPECT_EQ(tier.Stats().blocks, 3);
  EXPECT_EQ(tier.Stats().evictions, 2u);
  EXPECT_EQ(client->Run(RedisCommand{"EXISTS", tier.RedisKey(chain[0].key)}).integer, 0);
  EXPECT_EQ(client->Run(RedisCommand{"EXISTS", tier.RedisKey(chain[4].key)}).integer, 1);
  long long ttl = client->Run(RedisCommand{"TTL", tier.RedisKey(chain[4].key)}).integer;
  EXPECT_GT(ttl, 590);
  EXPECT_LE(ttl, 600);
  EXPECT_EQ(tier.Clear(), 3u);
  EXPECT_EQ(client->Run(RedisCommand{"DBSIZE"}).integer, 0);
}

// One tenant's clear deletes the blocks this replica wrote for it, and nothing of the others.
TEST(RedisTier, ClearOwnedDeletesOnlyThatOwnersBlocks) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisServer server;
  auto client = Client(server.url());
  TierIdentity identity = TestIdentity();
  std::vector<BlockMeta> alpha = TestChain(identity, 3, 1, "salt-alpha");
  std::vector<BlockMeta> beta = TestChain(identity, 2, 1, "salt-beta");
  RedisTier tier(identity, {}, client);
  for (const auto* chain : {&alpha, &beta}) {
    for (const BlockMeta& meta : *chain) {
      ASSERT_TRUE(tier.Store(meta, TestPayload(identity, meta)));
    }
  }
  EXPECT_EQ(tier.ClearOwned(TenantSaltDigest("salt-alpha")), 3u);
  for (const BlockMeta& meta : alpha) {
    EXPECT_EQ(client->Run(RedisCommand{"EXISTS", tier.RedisKey(meta.key)}).integer, 0);
  }
  EXPECT_EQ(client->Run(RedisCommand{"DBSIZE"}).integer, 2);
  EXPECT_EQ(tier.Stats().blocks, 2);
  std::vector<uint8_t> buffer(2 * identity.block_bytes);
  uint8_t* dests[] = {buffer.data(), buffer.data() + identity.block_bytes};
  EXPECT_EQ(tier.LoadPrefix(beta, dests), 2u);
  EXPECT_EQ(tier.ClearOwned(TenantSaltDigest("salt-gamma")), 0u);
  EXPECT_EQ(tier.ClearOwned(TenantSaltDigest("salt-beta")), 2u);
  EXPECT_EQ(client->Run(RedisCommand{"DBSIZE"}).integer, 0);
}

TEST(RedisTier, GoesOnWithoutRedisAndUsesItAgainAfterARestart) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisServer server;
  TierIdentity identity = TestIdentity();
  std::vector<BlockMeta> chain = TestChain(identity, 2);
  RedisTier tier(identity, {}, Client(server.url()));
  ASSERT_TRUE(tier.Store(chain[0], TestPayload(identity, chain[0])));
  server.Kill();
  EXPECT_FALSE(tier.Store(chain[1], TestPayload(identity, chain[1])));
  std::vector<uint8_t> buffer(identity.block_bytes);
  uint8_t* dest[] = {buffer.data()};
  EXPECT_EQ(tier.LoadPrefix(std::span(chain).first(1), dest), 0u);
  TierStats down = tier.Stats();
  EXPECT_FALSE(down.available);
  EXPECT_GE(down.errors, 2u);
  EXPECT_EQ(tier.ProbablyHeld(Keys(chain)), 0u);  // the engine does not wait on a dead store
  EXPECT_TRUE(tier.ShouldStore(chain[1].key));    // writes go on trying: they find it back
  server.Start();
  bool stored = false;
  for (int i = 0; i < 100 && !stored; ++i) {
    stored = tier.Store(chain[1], TestPayload(identity, chain[1]));
    if (!stored) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(stored);
  EXPECT_TRUE(tier.Stats().available);
  EXPECT_EQ(tier.LoadPrefix(std::span(chain).subspan(1, 1), dest), 1u);
}

}  // namespace
}  // namespace reprise
