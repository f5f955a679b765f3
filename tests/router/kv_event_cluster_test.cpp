// KV events through a 3-master Redis Cluster: the publisher's XADD and the router's XREAD each go
// to the node that holds the stream's slot.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "kvevents/kv_event_publisher.h"
#include "redis_test_server.h"
#include "router/kv_event_feed.h"

namespace reprise::router {
namespace {

using namespace std::chrono_literals;

TEST(KvEventClusterTest, TheRouterReadsWhatAReplicaPublishesThroughACluster) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisCluster cluster;
  Digest root{};
  root.fill(7);
  PrefixDirectory directory(1000);
  redis::RedisClientOptions reader_options;
  reader_options.timeouts.io = 2000ms;  // above the feed's block time
  KvEventFeed feed(
      kvevents::kDefaultStream,
      std::make_shared<redis::RedisClient>(redis::ParseRedisUrl(cluster.url()), reader_options),
      directory, [](const std::string& id) { return id == "replica-a" ? 0 : -1; },
      [&] { return std::optional<Digest>(root); });
  feed.Start();

  kvevents::KvEventPublisherConfig config;
  config.replica_id = "replica-a";
  kvevents::KvEventPublisher publisher(
      root, config, std::make_shared<redis::RedisClient>(redis::ParseRedisUrl(cluster.url())));
  std::vector<Digest> chain;
  Digest parent = root, extras{};
  std::vector<int32_t> tokens(16, 1);
  std::vector<uint8_t> data(64, 0);
  for (uint8_t i = 1; i <= 5; ++i) {
    Digest key{};
    key.fill(i);
    CachedBlockInfo info;
    info.key = &key;
    info.parent_key = &parent;
    info.extras_digest = &extras;
    info.tokens = tokens;
    info.data = data;
    publisher.OnBlockStored(info);
    chain.push_back(key);
    parent = key;
  }
  ASSERT_TRUE(publisher.Flush(10s));
  EXPECT_EQ(publisher.stats().dropped, 0u);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (directory.MatchedBlocks(chain, 0) < chain.size() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(directory.MatchedBlocks(chain, 0), chain.size());
  EXPECT_TRUE(feed.Live(0));
  EXPECT_TRUE(feed.counters().connected);
  feed.Stop();
}

}  // namespace
}  // namespace reprise::router
