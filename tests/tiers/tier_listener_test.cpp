// What the disk and remote tiers tell their listener (and list in Blocks): every block stored,
// and every block they lose, however they lose it, so that the KV events can say so.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "redis/redis_url.h"
#include "redis_test_server.h"
#include "test_support.h"
#include "tier_test_util.h"
#include "tiers/disk_tier.h"
#include "tiers/redis_tier.h"
#include "tiers/tier_set.h"

namespace reprise {
namespace {

namespace fs = std::filesystem;
using testing::RecordingListener;
using testing::TestChain;
using testing::TestIdentity;
using testing::TestPayload;
using Told = std::vector<std::string>;

std::string ScratchDir() {
  std::string dir = testing::ScratchPath(
      std::string("listener-") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  return dir;
}

std::vector<Digest> BlockKeys(const KvTier& tier) {
  std::vector<Digest> keys;
  for (const TierBlockRef& ref : tier.Blocks()) keys.push_back(ref.key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<Digest> SortedKeys(std::vector<BlockMeta> chain) {
  std::vector<Digest> keys = testing::Keys(chain);
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::shared_ptr<redis::RedisClient> DefaultOptionsClient(const std::string& url) {
  return std::make_shared<redis::RedisClient>(redis::ParseRedisUrl(url));
}

TEST(TierListener, TheDiskTierTellsStoresEvictionsBadFilesAndClears) {
  const TierIdentity identity = TestIdentity(4096);
  const std::string dir = ScratchDir();
  const uint64_t block_file = BlockHeaderBytes(4) + identity.block_bytes;
  RecordingListener told;
  auto chain = TestChain(identity, 6, 1, "salt-alpha");
  {
    DiskTier tier(identity, {dir, 3 * block_file, false, &told});
    for (size_t i = 0; i < 4; ++i)
      ASSERT_TRUE(tier.Store(chain[i], TestPayload(identity, chain[i])));
    // The fourth store evicted the least recently used block, before it was told stored.
    EXPECT_EQ(told.Told(),
              (Told{RecordingListener::Stored(chain[0]), RecordingListener::Stored(chain[1]),
                    RecordingListener::Stored(chain[2]), RecordingListener::Removed(chain[0]),
                    RecordingListener::Stored(chain[3])}));
    EXPECT_EQ(told.tier(), "disk");
    const TierBlockRef ref = told.Refs()[1];  // what an event needs: key, parent, salts, owner
    EXPECT_EQ(ref.parent_key, chain[0].key);
    EXPECT_EQ(ref.extras_digest, chain[1].extras_digest);
    EXPECT_EQ(ref.owner, TenantSaltDigest("salt-alpha"));
    EXPECT_EQ(BlockKeys(tier), SortedKeys({chain[1], chain[2], chain[3]}));

    // A file found bad at load is deleted and told gone; so is one deleted behind its back.
    std::ofstream(tier.BlockPath(chain[2].key), std::ios::binary | std::ios::trunc) << "junk";
    fs::remove(tier.BlockPath(chain[3].key));
    std::vector<uint8_t> buffer(identity.block_bytes);
    uint8_t* dest[] = {buffer.data()};
    EXPECT_EQ(tier.LoadPrefix(std::span(chain).subspan(2, 1), dest), 0u);
    EXPECT_EQ(tier.LoadPrefix(std::span(chain).subspan(3, 1), dest), 0u);
    Told all = told.Told();
    EXPECT_EQ(Told(all.end() - 2, all.end()),
              (Told{RecordingListener::Removed(chain[2]), RecordingListener::Removed(chain[3])}));
    EXPECT_EQ(BlockKeys(tier), SortedKeys({chain[1]}));
  }
  // After a restart the rebuilt index is listed (not told), with each block's ref from its header;
  // clears tell every block they drop.
  RecordingListener again;
  DiskTier tier(identity, {dir, 0, false, &again});
  ASSERT_EQ(tier.Blocks().size(), 1u);
  EXPECT_EQ(tier.Blocks()[0].parent_key, chain[0].key);
  EXPECT_EQ(tier.Blocks()[0].owner, TenantSaltDigest("salt-alpha"));
  EXPECT_TRUE(again.Told().empty());
  auto beta = TestChain(identity, 2, 50, "salt-beta");
  for (const auto& meta : beta) ASSERT_TRUE(tier.Store(meta, TestPayload(identity, meta)));
  EXPECT_EQ(tier.ClearOwned(TenantSaltDigest("salt-alpha")), 1u);
  EXPECT_EQ(again.Told().back(), RecordingListener::Removed(chain[1]));
  EXPECT_EQ(tier.Clear(), 2u);
  Told all = again.Told();
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(Told(all.end() - 2, all.end()),
            (Told{RecordingListener::Removed(beta[0]), RecordingListener::Removed(beta[1])}));
  EXPECT_TRUE(tier.Blocks().empty());
}

// Each replica tells of its own writes only: what its size bound and clears delete, what it
// finds gone, and what outlived its TTL without being written again.
TEST(TierListener, TheRemoteTierTellsItsOwnWritesAndTheirEnd) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisServer server;
  const TierIdentity identity = TestIdentity();
  auto chain = TestChain(identity, 5);
  const size_t block = EncodeBlock(identity, chain[0], TestPayload(identity, chain[0])).size();
  RecordingListener told;
  RedisTierConfig config;
  config.capacity_bytes = 3 * block;
  config.listener = &told;
  RedisTier tier(identity, config, DefaultOptionsClient(server.url()));
  for (size_t i = 0; i < 4; ++i) ASSERT_TRUE(tier.Store(chain[i], TestPayload(identity, chain[i])));
  EXPECT_EQ(told.Told(),
            (Told{RecordingListener::Stored(chain[0]), RecordingListener::Stored(chain[1]),
                  RecordingListener::Stored(chain[2]), RecordingListener::Removed(chain[0]),
                  RecordingListener::Stored(chain[3])}));
  EXPECT_EQ(told.tier(), "remote");
  EXPECT_EQ(BlockKeys(tier), SortedKeys({chain[1], chain[2], chain[3]}));

  // Another replica on the same store loads the blocks and tells nothing: they are not its own.
  RecordingListener other_told;
  RedisTierConfig other_config;
  other_config.listener = &other_told;
  RedisTier other(identity, other_config, DefaultOptionsClient(server.url()));
  std::vector<uint8_t> buffer(3 * identity.block_bytes);
  uint8_t* dests[] = {buffer.data(), buffer.data() + identity.block_bytes,
                      buffer.data() + 2 * identity.block_bytes};
  EXPECT_EQ(other.LoadPrefix(std::span(chain).subspan(1, 3), dests), 3u);
  EXPECT_TRUE(other_told.Told().empty());
  EXPECT_TRUE(other.Blocks().empty());

  // Deleted behind the writer's back (Redis's maxmemory, another replica): found gone at a load.
  auto client = DefaultOptionsClient(server.url());
  client->Run(redis::RedisCommand{"DEL", tier.RedisKey(chain[2].key)});
  EXPECT_EQ(tier.LoadPrefix(std::span(chain).subspan(1, 3), dests), 1u);
  EXPECT_EQ(told.Told().back(), RecordingListener::Removed(chain[2]));
  EXPECT_EQ(BlockKeys(tier), SortedKeys({chain[1], chain[3]}));

  EXPECT_EQ(tier.Clear(), 2u);
  Told all = told.Told();
  ASSERT_EQ(all.size(), 8u);
  EXPECT_EQ(std::count(all.end() - 2, all.end(), RecordingListener::Removed(chain[1])), 1);
  EXPECT_EQ(std::count(all.end() - 2, all.end(), RecordingListener::Removed(chain[3])), 1);
  EXPECT_TRUE(tier.Blocks().empty());
}

TEST(TierListener, TheRemoteTierTellsBlocksWhoseTtlPassedThroughTheTierSet) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisServer server;
  const TierIdentity identity = TestIdentity();
  auto chain = TestChain(identity, 2);
  RecordingListener told;
  RedisTierConfig config;
  config.ttl = std::chrono::seconds(1);
  config.listener = &told;
  auto client = DefaultOptionsClient(server.url());
  std::vector<std::unique_ptr<KvTier>> tiers;
  tiers.push_back(std::make_unique<RedisTier>(identity, config, client));
  const RedisTier& tier = static_cast<const RedisTier&>(*tiers.back());
  TierSet set(identity, std::move(tiers),
              {.staging_bytes = 1 << 20,
               .load_threads = 1,
               .maintain_interval = std::chrono::milliseconds(50)});
  set.Offer(chain[0], TestPayload(identity, chain[0]), true);
  set.Flush();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  set.Offer(chain[1], TestPayload(identity, chain[1]), true);
  set.Flush();
  EXPECT_EQ(told.Told(),
            (Told{RecordingListener::Stored(chain[0]), RecordingListener::Stored(chain[1])}));
  EXPECT_EQ(set.Blocks(0).size(), 2u);
  // The first block's TTL passes: Redis drops it and the writer tells so, the second one's later.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (told.Told().size() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(told.Told().size(), 3u);
  EXPECT_EQ(told.Told().back(), RecordingListener::Removed(chain[0]));
  EXPECT_EQ(client->Run(redis::RedisCommand{"EXISTS", tier.RedisKey(chain[0].key)}).integer, 0);
  ASSERT_EQ(set.Blocks(0).size(), 1u);
  EXPECT_EQ(set.Blocks(0)[0].key, chain[1].key);
  while (told.Told().size() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(told.Told().back(), RecordingListener::Removed(chain[1]));
  EXPECT_TRUE(set.Blocks(0).empty());
}

}  // namespace
}  // namespace reprise
