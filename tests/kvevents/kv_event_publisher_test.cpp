// The KV event publisher against a real redis-server on loopback: events reach the stream with
// their fields, the stream stays bounded, and a Redis that is down costs dropped (counted)
// events, never a wait, until it is back.
#include "kvevents/kv_event_publisher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "redis_test_server.h"

namespace reprise::kvevents {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;

Digest MakeDigest(uint8_t seed) {
  Digest digest{};
  for (size_t i = 0; i < digest.size(); ++i) digest[i] = static_cast<uint8_t>(seed + i);
  return digest;
}

std::shared_ptr<redis::RedisClient> Client(int port) {
  redis::RedisClientOptions options;
  options.backoff_min = 20ms;
  options.backoff_max = 100ms;
  return std::make_shared<redis::RedisClient>(
      redis::ParseRedisUrl("redis://127.0.0.1:" + std::to_string(port)), options);
}

// The stream's batches, oldest first.
std::vector<KvEventBatch> ReadStream(redis::RedisClient& client, const std::string& stream) {
  redis::RedisReply reply = client.Run({"XRANGE", stream, "-", "+"});
  std::vector<KvEventBatch> batches;
  for (const redis::RedisReply& entry : reply.elements) {
    std::vector<std::string> fields;
    for (const redis::RedisReply& field : entry.elements.at(1).elements)
      fields.push_back(field.text);
    std::optional<KvEventBatch> batch = DecodeBatch(fields);
    EXPECT_TRUE(batch.has_value()) << "an entry of another format";
    if (batch) batches.push_back(*batch);
  }
  return batches;
}

long long StreamLength(redis::RedisClient& client, const std::string& stream) {
  return client.Run({"XLEN", stream}).integer;
}

// A block as the prefix cache describes it to its listeners.
struct Block {
  Digest key, parent, extras;
  std::vector<int32_t> tokens = std::vector<int32_t>(16, 7);
  std::vector<uint8_t> data = std::vector<uint8_t>(64, 1);
  CachedBlockInfo Info(bool full = true) const {
    CachedBlockInfo info;
    info.block = 3;
    info.key = &key;
    info.parent_key = &parent;
    info.extras_digest = &extras;
    info.tokens = tokens;
    info.data = data;
    info.full = full;
    return info;
  }
};

TEST(KvEventFormatTest, BatchesRoundTripAndOtherEntriesAreRefused) {
  KvEventBatch batch;
  batch.replica = "replica-a";
  batch.instance = "0123456789abcdef";
  batch.root = MakeDigest(1);
  batch.first_seq = 41;
  KvEvent stored{KvEventType::kStored, KvEventTier::kMemory, MakeDigest(2), MakeDigest(3),
                 MakeDigest(4)};
  KvEvent removed{KvEventType::kRemoved, KvEventTier::kDisk, MakeDigest(5), MakeDigest(6),
                  MakeDigest(7)};
  KvEvent cleared;
  cleared.type = KvEventType::kCleared;
  batch.events = {stored, removed, cleared};
  std::optional<KvEventBatch> back = DecodeBatch(EncodeBatch(batch));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->replica, "replica-a");
  EXPECT_EQ(back->instance, batch.instance);
  EXPECT_EQ(back->root, batch.root);
  EXPECT_EQ(back->first_seq, 41u);
  ASSERT_EQ(back->events.size(), 3u);
  EXPECT_EQ(back->events[0].type, KvEventType::kStored);
  EXPECT_EQ(back->events[0].key, stored.key);
  EXPECT_EQ(back->events[0].parent, stored.parent);
  EXPECT_EQ(back->events[0].salt_digest, stored.salt_digest);
  EXPECT_EQ(back->events[1].type, KvEventType::kRemoved);
  EXPECT_EQ(back->events[1].tier, KvEventTier::kDisk);
  EXPECT_EQ(back->events[2].type, KvEventType::kCleared);

  std::vector<std::string> fields = EncodeBatch(batch);
  EXPECT_FALSE(DecodeBatch({"hello", "world"}).has_value());
  std::vector<std::string> bad_version = fields;
  bad_version[1] = "2";
  EXPECT_FALSE(DecodeBatch(bad_version).has_value());
  std::vector<std::string> bad_events = fields;
  bad_events.back() = R"([{"type":"stored","key":"zz"}])";
  EXPECT_FALSE(DecodeBatch(bad_events).has_value());
}

TEST(KvEventPublisherTest, PublishesStoredRemovedAndClearedWithTheirFields) {
  REPRISE_REQUIRE_REDIS();
  RedisServer server;
  auto client = Client(server.port());
  const Digest root = MakeDigest(100);
  KvEventPublisherConfig config;
  config.replica_id = "replica-a";
  config.stream = "test:events";
  KvEventPublisher publisher(root, config, client);
  Block first{MakeDigest(10), root, MakeDigest(50)};
  Block second{MakeDigest(20), first.key, MakeDigest(50)};
  publisher.OnBlockStored(first.Info());
  publisher.OnBlockStored(second.Info());
  publisher.OnBlockStored(second.Info(/*full=*/false));  // a tail: not told
  publisher.OnBlockRemoved(second.Info(), BlockRemoval::kEvicted);
  ASSERT_TRUE(publisher.Flush(5s));

  std::vector<KvEvent> events;
  uint64_t expected_seq = 0;
  for (const KvEventBatch& batch : ReadStream(*client, "test:events")) {
    EXPECT_EQ(batch.replica, "replica-a");
    EXPECT_EQ(batch.instance, publisher.instance());
    EXPECT_EQ(batch.root, root);
    EXPECT_EQ(batch.first_seq, expected_seq);  // consecutive: nothing lost
    expected_seq += batch.events.size();
    events.insert(events.end(), batch.events.begin(), batch.events.end());
  }
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].type, KvEventType::kCleared);  // a replica starts empty
  EXPECT_EQ(events[1].type, KvEventType::kStored);
  EXPECT_EQ(events[1].key, first.key);
  EXPECT_EQ(events[1].parent, root);
  EXPECT_EQ(events[1].tier, KvEventTier::kMemory);
  EXPECT_EQ(events[1].salt_digest, first.extras);
  EXPECT_EQ(events[2].key, second.key);
  EXPECT_EQ(events[2].parent, first.key);
  EXPECT_EQ(events[3].type, KvEventType::kRemoved);
  EXPECT_EQ(events[3].key, second.key);
  KvEventPublisherStats stats = publisher.stats();
  EXPECT_EQ(stats.published, 4u);
  EXPECT_EQ(stats.dropped, 0u);
  EXPECT_TRUE(stats.connected);
}

TEST(KvEventPublisherTest, KeepsTheStreamBounded) {
  REPRISE_REQUIRE_REDIS();
  RedisServer server;
  auto client = Client(server.port());
  KvEventPublisherConfig config;
  config.replica_id = "replica-a";
  config.stream = "test:bounded";
  config.max_stream_entries = 20;
  config.max_batch_events = 1;  // an entry per event: 1,000 entries written
  KvEventPublisher publisher(MakeDigest(1), config, client);
  Block block{MakeDigest(10), MakeDigest(1), MakeDigest(2)};
  for (int i = 0; i < 999; ++i) publisher.OnBlockStored(block.Info());
  ASSERT_TRUE(publisher.Flush(60s));
  EXPECT_EQ(publisher.stats().published, 1000u);
  // MAXLEN ~ trims whole stream nodes (100 entries by default): about the bound, far from 1,000.
  const long long length = StreamLength(*client, "test:bounded");
  EXPECT_GE(length, 20);
  EXPECT_LE(length, 20 + 100);
}

TEST(KvEventPublisherTest, DropsAndCountsWhileRedisIsDownAndPublishesOnceItIsBack) {
  REPRISE_REQUIRE_REDIS();
  RedisServer server;
  auto client = Client(server.port());
  KvEventPublisherConfig config;
  config.replica_id = "replica-a";
  config.stream = "test:down";
  config.retry_pause = 20ms;
  KvEventPublisher publisher(MakeDigest(1), config, client);
  Block block{MakeDigest(10), MakeDigest(1), MakeDigest(2)};
  publisher.OnBlockStored(block.Info());
  ASSERT_TRUE(publisher.Flush(5s));
  EXPECT_EQ(publisher.stats().published, 2u);

  server.Kill();
  // Publishing never waits on Redis: 10,000 events are queued (or dropped) at once.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10000; ++i) publisher.OnBlockStored(block.Info());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  ASSERT_TRUE(publisher.Flush(30s));
  KvEventPublisherStats down = publisher.stats();
  EXPECT_EQ(down.dropped, 10000u);
  EXPECT_GE(down.failures, 1u);
  EXPECT_FALSE(down.connected);
  EXPECT_EQ(down.published, 2u);

  server.Start();  // empty, as after a crash
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (publisher.stats().published == 2u && std::chrono::steady_clock::now() < deadline) {
    publisher.OnBlockStored(block.Info());
    publisher.Flush(5s);
    std::this_thread::sleep_for(50ms);
  }
  KvEventPublisherStats back = publisher.stats();
  EXPECT_GT(back.published, 2u);
  EXPECT_TRUE(back.connected);
  // The reader sees the loss as a gap: the first entry now starts past the dropped events.
  std::vector<KvEventBatch> batches = ReadStream(*client, "test:down");
  ASSERT_FALSE(batches.empty());
  EXPECT_GE(batches.front().first_seq, 2u + 10000u);
}

}  // namespace
}  // namespace reprise::kvevents
