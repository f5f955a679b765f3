// KV events end to end: `reprise serve --kv-events-redis-url` replicas, a real redis-server on
// loopback, and `reprise route --kv-redis-url` following them.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "kernels/cpu_target.h"
#include "kvcache/block_key.h"
#include "kvevents/kv_event.h"
#include "redis/redis_client.h"
#include "redis_test_server.h"
#include "router/request_keys.h"
#include "router/router_test_util.h"
#include "server/tenants.h"

namespace reprise::testing {
namespace {

using namespace std::chrono_literals;

std::string ReplicaLabel(const ServerProcess& replica) {
  return "{replica=\"http://127.0.0.1:" + std::to_string(replica.port()) + "\"}";
}

class RouterEventsE2eTest : public EventsE2eTest {};

// Prefixes put on the replicas by requests that never went through the router: the router
// learns of them from the events alone and sends each later request where its prefix is.
TEST_F(RouterEventsE2eTest, SendsAPromptWhereAnotherClientPutItsPrefix) {
  RedisServer redis;
  ServerProcess a(EventReplicaArgs(redis));
  ServerProcess b(EventReplicaArgs(redis));
  auto router = StartRouter({&a, &b}, {"--kv-redis-url", redis.url()});
  ASSERT_EQ(PostJson(b.port(), "/v1/chat/completions", Chat(Document(1), "Who?")).status, 200);
  ASSERT_EQ(PostJson(a.port(), "/v1/chat/completions", Chat(Document(2), "Who?")).status, 200);
  ASSERT_TRUE(WaitFor([&] {
    std::string metrics = Get(router->port(), "/metrics").body;
    return Metric(metrics, "reprise:router_kv_events_live" + ReplicaLabel(a)) == 1 &&
           Metric(metrics, "reprise:router_kv_events_live" + ReplicaLabel(b)) == 1;
  })) << Get(router->port(), "/metrics").body;
  // Let the last batch of the second request arrive too (events are written every 10 ms).
  std::this_thread::sleep_for(300ms);
  for (int ask = 0; ask < 2; ++ask) {
    auto one = PostJson(router->port(), "/v1/chat/completions",
                        Chat(Document(1), "Where? " + std::to_string(ask)));
    ASSERT_EQ(one.status, 200) << one.body;
    EXPECT_GT(one.json["usage"]["prompt_tokens_details"]["cached_tokens"].get<long>(), 60);
    auto two = PostJson(router->port(), "/v1/chat/completions",
                        Chat(Document(2), "Where? " + std::to_string(ask)));
    ASSERT_EQ(two.status, 200) << two.body;
    EXPECT_GT(two.json["usage"]["prompt_tokens_details"]["cached_tokens"].get<long>(), 60);
  }
  EXPECT_EQ(ReplicaRequests(router->port(), b), 2);
  EXPECT_EQ(ReplicaRequests(router->port(), a), 2);
  std::string metrics = Get(router->port(), "/metrics").body;
  EXPECT_GT(Metric(metrics, "reprise:router_kv_events_applied_total"), 0) << metrics;
  EXPECT_EQ(Metric(metrics, "reprise:router_kv_events_connected"), 1) << metrics;
}

// A tenant's blocks are told with its salt's digest (never the salt), under the keys the router
// computes when it is given the replicas' API keys and cache secret; a cache clear tells their
// removal.
TEST_F(RouterEventsE2eTest, ATenantsEventsCarryItsSaltDigestAndTheRoutersKeys) {
  RedisServer redis;
  const std::string keys_file = ScratchPath("events_api_keys");
  const std::string secret_file = ScratchPath("events_cache_secret");
  std::ofstream(keys_file) << "alice-key-123456 alice user\nadmin-key-123456 ops admin\n";
  std::ofstream(secret_file) << "a secret of more than sixteen bytes";
  ServerProcess replica(
      EventReplicaArgs(redis, {"--api-keys-file", keys_file, "--cache-secret-file", secret_file,
                               "--replica-id", "replica-one"}));
  json health = Get(replica.port(), "/health").json;
  EXPECT_EQ(health["replica_id"], "replica-one");

  const json body = Chat(Document(3), "Who?");
  httplib::Headers alice = {{"Authorization", "Bearer alice-key-123456"}};
  ASSERT_EQ(PostJson(replica.port(), "/v1/chat/completions", body, alice).status, 200);

  router::RequestKeyer keyer(ModelPath(), "chatml");
  keyer.Configure("f16", 16,
                  kernels::KernelNumerics(kernels::BestCpuTarget()));  // the replica's defaults
  server::TenantSetup setup;
  setup.keys =
      server::ParseApiKeys("alice-key-123456 alice user\nadmin-key-123456 ops admin\n", "keys");
  setup.cache_secret = server::ReadCacheSecret(secret_file);
  auto registry = std::make_unique<server::TenantRegistry>(setup.keys, setup.cache_secret, false);
  const Digest salt_digest =
      ExtrasDigest(CacheKeyExtras{registry->EngineSalt(*registry->Find("alice"), ""), ""});
  const Digest tenant_digest = TenantSaltDigest(registry->Find("alice")->cache_salt);
  keyer.SetTenants(std::move(registry));
  router::RequestKeys keys = keyer.Compute(server::ApiKind::kChat, body, "Bearer alice-key-123456");
  ASSERT_GT(keys.block_keys.size(), 3u);
  EXPECT_NE(salt_digest, ExtrasDigest(CacheKeyExtras{"", ""}));

  auto stored = [&] {
    std::map<Digest, kvevents::KvEvent> found;
    for (const kvevents::KvEventBatch& batch : ReadEvents(redis)) {
      EXPECT_EQ(batch.replica, "replica-one");
      EXPECT_EQ(batch.root, *keyer.root());
      for (const kvevents::KvEvent& event : batch.events) {
        if (event.type == kvevents::KvEventType::kStored) found[event.key] = event;
      }
    }
    return found;
  };
  ASSERT_TRUE(WaitFor([&] { return stored().count(keys.block_keys.back()) == 1; }));
  std::map<Digest, kvevents::KvEvent> events = stored();
  for (size_t i = 0; i < keys.block_keys.size(); ++i) {
    ASSERT_EQ(events.count(keys.block_keys[i]), 1u) << "block " << i;
    const kvevents::KvEvent& event = events[keys.block_keys[i]];
    EXPECT_EQ(event.salt_digest, salt_digest);
    EXPECT_EQ(event.tenant_digest, tenant_digest);  // the owner the tiers' headers record
    EXPECT_EQ(event.tier, kvevents::KvEventTier::kMemory);
    EXPECT_EQ(event.parent, i == 0 ? *keyer.root() : keys.block_keys[i - 1]);
  }

  httplib::Headers admin = {{"Authorization", "Bearer admin-key-123456"}};
  ASSERT_EQ(PostJson(replica.port(), "/v1/cache/clear", json::object(), admin).status, 200);
  ASSERT_TRUE(WaitFor([&] {
    size_t removed = 0;
    for (const kvevents::KvEventBatch& batch : ReadEvents(redis)) {
      for (const kvevents::KvEvent& event : batch.events) {
        if (event.type == kvevents::KvEventType::kRemoved &&
            std::find(keys.block_keys.begin(), keys.block_keys.end(), event.key) !=
                keys.block_keys.end()) {
          ++removed;
        }
      }
    }
    return removed == keys.block_keys.size();
  }));
}

// Blocks the disk tier stores are told as such (here: memory cleared, its blocks written to
// disk), beside memory's removals.
TEST_F(RouterEventsE2eTest, BlocksWrittenToTheDiskTierAreToldWithTheirTier) {
  RedisServer redis;
  const std::string disk = ScratchPath("events_disk_tier");
  ServerProcess replica(EventReplicaArgs(redis, {"--kv-disk-path", disk}));
  const json body = Chat(Document(5), "Who?");
  ASSERT_EQ(PostJson(replica.port(), "/v1/chat/completions", body).status, 200);
  ASSERT_EQ(PostJson(replica.port(), "/v1/cache/clear", json::object()).status, 200);
  router::RequestKeyer keyer(ModelPath(), "chatml");
  keyer.Configure("f16", 16, kernels::KernelNumerics(kernels::BestCpuTarget()));
  const router::RequestKeys keys = keyer.Compute(server::ApiKind::kChat, body);
  ASSERT_GT(keys.block_keys.size(), 3u);
  auto count = [&](kvevents::KvEventType type, kvevents::KvEventTier tier) {
    size_t found = 0;
    for (const kvevents::KvEventBatch& batch : ReadEvents(redis)) {
      for (const kvevents::KvEvent& event : batch.events) {
        found += event.type == type && event.tier == tier &&
                 std::find(keys.block_keys.begin(), keys.block_keys.end(), event.key) !=
                     keys.block_keys.end();
      }
    }
    return found;
  };
  ASSERT_TRUE(WaitFor([&] {
    return count(kvevents::KvEventType::kStored, kvevents::KvEventTier::kDisk) ==
           keys.block_keys.size();
  }));
  EXPECT_EQ(count(kvevents::KvEventType::kStored, kvevents::KvEventTier::kMemory),
            keys.block_keys.size());
  EXPECT_EQ(count(kvevents::KvEventType::kRemoved, kvevents::KvEventTier::kMemory),
            keys.block_keys.size());
}

// Redis killed under a replica that publishes events: every request still succeeds, the lost
// events are counted, and events flow again once Redis is back.
TEST_F(RouterEventsE2eTest, RequestsGoOnWhileRedisIsDown) {
  RedisServer redis;
  ServerProcess replica(EventReplicaArgs(redis));
  ASSERT_EQ(PostJson(replica.port(), "/v1/chat/completions", Chat(Document(4), "Who?")).status,
            200);
  auto published = [&] {
    return Metric(Get(replica.port(), "/metrics").body,
                  "reprise:kv_events_published_total{model_name=\"" +
                      std::filesystem::path(ModelPath()).stem().string() + "\"}");
  };
  ASSERT_TRUE(WaitFor([&] { return published() > 1; })) << Get(replica.port(), "/metrics").body;
  redis.Kill();
  for (int i = 0; i < 4; ++i) {
    auto result = PostJson(replica.port(), "/v1/chat/completions", Chat(Document(10 + i), "Who?"));
    EXPECT_EQ(result.status, 200) << result.body;
  }
  const double before = published();
  ASSERT_TRUE(WaitFor([&] {
    std::string metrics = Get(replica.port(), "/metrics").body;
    return metrics.find("reprise:kv_events_dropped_total{") != std::string::npos &&
           metrics.find("reprise:kv_events_connected{model_name=\"TinyStories-656K-f32\"} 0") !=
               std::string::npos;
  })) << Get(replica.port(), "/metrics").body;
  std::string metrics = Get(replica.port(), "/metrics").body;
  EXPECT_GT(Metric(metrics, "reprise:kv_events_dropped_total{model_name=\"TinyStories-656K-f32\"}"),
            0)
      << metrics;
  redis.Start();
  // A new document each time: a cached one tells nothing new, and the first ones' events may be
  // dropped while the client still backs off.
  int next = 20;
  ASSERT_TRUE(WaitFor([&] {
    PostJson(replica.port(), "/v1/chat/completions", Chat(Document(next++), "Who?"));
    return published() > before;
  })) << Get(replica.port(), "/metrics").body;
  EXPECT_FALSE(ReadEvents(redis).empty());
}

}  // namespace
}  // namespace reprise::testing
