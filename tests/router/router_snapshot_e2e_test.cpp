// Replicas' block lists (GET /v1/cache/blocks) end to end: a router that starts late, or loses a
// replica's events, starts again from the replica's own list; the list is for admins only; and
// blocks the disk tier drops are told as removed. Real replicas, a real redis-server, the router.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "kernels/cpu_target.h"
#include "kvevents/kv_event.h"
#include "kvevents/kv_snapshot.h"
#include "redis/redis_client.h"
#include "redis_test_server.h"
#include "router/request_keys.h"
#include "router/router_test_util.h"

namespace reprise::testing {
namespace {

using namespace std::chrono_literals;

CacheBlockList Blocks(int port, const httplib::Headers& headers = {}) {
  HttpResult result = Get(port, "/v1/cache/blocks", headers);
  EXPECT_EQ(result.status, 200) << result.body;
  std::string why;
  std::optional<CacheBlockList> list = kvevents::ParseCacheBlocksJson(result.body, &why);
  EXPECT_TRUE(list) << why;
  return list.value_or(CacheBlockList{});
}

std::set<Digest> KeysOf(const std::vector<CacheBlockRef>& blocks) {
  std::set<Digest> keys;
  for (const CacheBlockRef& block : blocks) keys.insert(block.key);
  return keys;
}

router::RequestKeys KeysOfChat(const json& body) {
  router::RequestKeyer keyer(ModelPath(), "chatml");
  keyer.Configure(
      "f16", 16,
      kernels::KernelNumerics(kernels::BestCpuTarget()));  // the replicas' defaults, and target
  return keyer.Compute(server::ApiKind::kChat, body);
}

double RouterMetric(int port, const std::string& name) {
  return Metric(Get(port, "/metrics").body, name);
}

class RouterSnapshotE2eTest : public EventsE2eTest {};

// The prefixes were put on the replicas before the router started, so no event about them will
// come: the router knows them from the replicas' lists, and the first request for each goes
// where it is.
TEST_F(RouterSnapshotE2eTest, ARouterStartedLateSendsAPrefixWhereItIsAtOnce) {
  RedisServer redis;
  ServerProcess a(EventReplicaArgs(redis));
  ServerProcess b(EventReplicaArgs(redis));
  const json one = Chat(Document(1), "Who?");
  const json two = Chat(Document(2), "Who?");
  ASSERT_EQ(PostJson(b.port(), "/v1/chat/completions", one).status, 200);
  ASSERT_EQ(PostJson(a.port(), "/v1/chat/completions", two).status, 200);
  const CacheBlockList listed = Blocks(b.port());
  EXPECT_TRUE(listed.kv_events);
  EXPECT_GT(listed.next_seq, 1u);  // the all-cleared event and the stores
  const router::RequestKeys keys = KeysOfChat(one);
  const std::set<Digest> held = KeysOf(listed.memory);
  for (const Digest& key : keys.block_keys) EXPECT_EQ(held.count(key), 1u);

  auto router = StartRouter({&a, &b}, {"--kv-redis-url", redis.url()});
  ASSERT_TRUE(WaitFor([&] {
    return RouterMetric(router->port(), "reprise:router_kv_snapshots_total{result=\"applied\"}") ==
           2;
  })) << Get(router->port(), "/metrics").body;
  auto first = PostJson(router->port(), "/v1/chat/completions", Chat(Document(1), "Where?"));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_GT(first.json["usage"]["prompt_tokens_details"]["cached_tokens"].get<long>(), 60);
  // The router expected it: the prefix was in its directory before the request.
  EXPECT_GT(RouterMetric(router->port(), "reprise:router_expected_cached_tokens_total"), 60);
  auto second = PostJson(router->port(), "/v1/chat/completions", Chat(Document(2), "Where?"));
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_GT(second.json["usage"]["prompt_tokens_details"]["cached_tokens"].get<long>(), 60);
  EXPECT_EQ(ReplicaRequests(router->port(), b), 1);
  EXPECT_EQ(ReplicaRequests(router->port(), a), 1);
}

// Events lost between a replica and the router (here: a batch numbered past the next one, as
// when entries were trimmed before the router read them) make the router fetch the replica's
// list again; what the out-of-order batch claimed is not believed.
TEST_F(RouterSnapshotE2eTest, AGapInAReplicasEventsFetchesItsListAgain) {
  RedisServer redis;
  ServerProcess a(EventReplicaArgs(redis, {"--replica-id", "replica-a"}));
  auto router = StartRouter({&a}, {"--kv-redis-url", redis.url()});
  const std::string applied = "reprise:router_kv_snapshots_total{result=\"applied\"}";
  ASSERT_TRUE(WaitFor([&] { return RouterMetric(router->port(), applied) == 1; }));

  const CacheBlockList listed = Blocks(a.port());
  kvevents::KvEventBatch bogus;
  bogus.replica = "replica-a";
  bogus.instance = listed.instance;
  bogus.root = listed.root;
  bogus.first_seq = listed.next_seq + 1000;
  const router::RequestKeys claimed = KeysOfChat(Chat(Document(9), "Who?"));
  for (size_t i = 0; i < claimed.block_keys.size(); ++i) {
    kvevents::KvEvent event;
    event.key = claimed.block_keys[i];
    event.parent = i == 0 ? listed.root : claimed.block_keys[i - 1];
    bogus.events.push_back(event);
  }
  redis::RedisClient client(redis::ParseRedisUrl(redis.url()));
  redis::RedisCommand xadd = {"XADD", kvevents::kDefaultStream, "*"};
  for (std::string& field : kvevents::EncodeBatch(bogus)) xadd.push_back(std::move(field));
  ASSERT_FALSE(client.Run(xadd).IsError());

  ASSERT_TRUE(WaitFor([&] { return RouterMetric(router->port(), applied) == 2; }))
      << Get(router->port(), "/metrics").body;
  std::string metrics = Get(router->port(), "/metrics").body;
  EXPECT_EQ(Metric(metrics, "reprise:router_kv_events_gaps_total"), 1) << metrics;
  EXPECT_EQ(Metric(metrics, "reprise:router_kv_events_skipped_total{reason=\"stale\"}"),
            static_cast<double>(claimed.block_keys.size()))
      << metrics;
  auto result = PostJson(router->port(), "/v1/chat/completions", Chat(Document(9), "Where?"));
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(RouterMetric(router->port(), "reprise:router_expected_cached_tokens_total"), 0);
}

// The list names every tenant's prompts: admins only. The router reads it with an admin key from
// its --api-keys-file. A memory clear moves the blocks to the disk tier's list; a disk clear
// tells each block's removal from the disk tier.
TEST_F(RouterSnapshotE2eTest, TheListIsForAdminsAndFollowsTheDiskTier) {
  RedisServer redis;
  const std::string keys_file = ScratchPath("snapshot_api_keys");
  const std::string secret_file = ScratchPath("snapshot_cache_secret");
  std::ofstream(keys_file) << "alice-key-123456 alice user\nadmin-key-123456 ops admin\n";
  std::ofstream(secret_file) << "a secret of more than sixteen bytes";
  const std::string disk = ScratchPath("snapshot_disk_tier");
  std::filesystem::remove_all(disk);
  ServerProcess replica(EventReplicaArgs(
      redis,
      {"--api-keys-file", keys_file, "--cache-secret-file", secret_file, "--kv-disk-path", disk}));
  const httplib::Headers alice = {{"Authorization", "Bearer alice-key-123456"}};
  const httplib::Headers admin = {{"Authorization", "Bearer admin-key-123456"}};
  EXPECT_EQ(Get(replica.port(), "/v1/cache/blocks").status, 401);
  HttpResult refused = Get(replica.port(), "/v1/cache/blocks", alice);
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.json["error"]["type"], "permission_error") << refused.body;

  ASSERT_EQ(
      PostJson(replica.port(), "/v1/chat/completions", Chat(Document(3), "Who?"), alice).status,
      200);
  const size_t blocks = Blocks(replica.port(), admin).memory.size();
  EXPECT_GT(blocks, 3u);
  auto router = StartRouter({&replica}, {"--kv-redis-url", redis.url(), "--api-keys-file",
                                         keys_file, "--cache-secret-file", secret_file});
  ASSERT_TRUE(WaitFor([&] {
    return RouterMetric(router->port(), "reprise:router_kv_snapshots_total{result=\"applied\"}") ==
           1;
  })) << Get(router->port(), "/metrics").body;

  ASSERT_EQ(PostJson(replica.port(), "/v1/cache/clear", json::object(), admin).status, 200);
  CacheBlockList listed = Blocks(replica.port(), admin);
  EXPECT_TRUE(listed.memory.empty());
  EXPECT_EQ(listed.disk.size(), blocks);

  ASSERT_EQ(PostJson(replica.port(), "/v1/cache/clear", json{{"tiers", {"disk"}}}, admin).status,
            200);
  EXPECT_TRUE(Blocks(replica.port(), admin).disk.empty());
  std::set<Digest> stored, removed;
  ASSERT_TRUE(WaitFor([&] {
    stored.clear();
    removed.clear();
    for (const kvevents::KvEventBatch& batch : ReadEvents(redis)) {
      for (const kvevents::KvEvent& event : batch.events) {
        if (event.tier != kvevents::KvEventTier::kDisk) continue;
        (event.type == kvevents::KvEventType::kStored ? stored : removed).insert(event.key);
      }
    }
    return removed.size() == blocks;
  }));
  EXPECT_EQ(stored, removed);
  EXPECT_EQ(stored, KeysOf(listed.disk));
}

// Two replicas share one Redis tier: each lists and tells the blocks it wrote there, not the
// other's, though the other loads them; a clear of the remote tier tells each block's removal.
TEST_F(RouterSnapshotE2eTest, EachReplicaListsAndTellsItsOwnRemoteWrites) {
  RedisServer redis;
  ServerProcess a(EventReplicaArgs(redis, {"--kv-redis-url", redis.url()}));
  ServerProcess b(EventReplicaArgs(redis, {"--kv-redis-url", redis.url()}));
  const json body = Chat(Document(4), "Who?");
  ASSERT_EQ(PostJson(a.port(), "/v1/chat/completions", body).status, 200);
  ASSERT_EQ(PostJson(a.port(), "/v1/cache/clear", json::object()).status, 200);  // written back
  const std::set<Digest> written = KeysOf(Blocks(a.port()).remote);
  const router::RequestKeys keys = KeysOfChat(body);
  for (const Digest& key : keys.block_keys) EXPECT_EQ(written.count(key), 1u);
  auto loaded = PostJson(b.port(), "/v1/chat/completions", body);
  ASSERT_EQ(loaded.status, 200) << loaded.body;
  EXPECT_GT(loaded.json["usage"]["cache_sources"]["remote"].get<long>(), 60) << loaded.body;
  EXPECT_TRUE(Blocks(b.port()).remote.empty());

  ASSERT_EQ(PostJson(a.port(), "/v1/cache/clear", json{{"tiers", {"remote"}}}).status, 200);
  EXPECT_TRUE(Blocks(a.port()).remote.empty());
  std::map<std::string, std::set<Digest>> stored, removed;  // by replica id
  ASSERT_TRUE(WaitFor([&] {
    stored.clear();
    removed.clear();
    for (const kvevents::KvEventBatch& batch : ReadEvents(redis)) {
      for (const kvevents::KvEvent& event : batch.events) {
        if (event.tier != kvevents::KvEventTier::kRemote) continue;
        (event.type == kvevents::KvEventType::kStored ? stored : removed)[batch.replica].insert(
            event.key);
      }
    }
    return removed.size() == 1 && removed.begin()->second.size() == written.size();
  }));
  ASSERT_EQ(stored.size(), 1u);  // replica b wrote nothing there
  EXPECT_EQ(stored.begin()->first, removed.begin()->first);
  EXPECT_EQ(stored.begin()->second, written);
  EXPECT_EQ(removed.begin()->second, written);
}

}  // namespace
}  // namespace reprise::testing
