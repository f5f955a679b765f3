// The client against real redis-server processes: a standalone server (with and without a
// password, killed and restarted) and a 3-master Redis Cluster.
#include "redis/redis_client.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>

#include "redis/redis_url.h"
#include "redis_test_server.h"

namespace reprise::redis {
namespace {

using testing::RedisCli;

TEST(RedisUrl, ParsesHostPortDbAndPassword) {
  RedisEndpoint e = ParseRedisUrl("redis://:s3cret@127.0.0.1:6390/2");
  EXPECT_EQ(e.host, "127.0.0.1");
  EXPECT_EQ(e.port, 6390);
  EXPECT_EQ(e.db, 2);
  EXPECT_EQ(e.password, "s3cret");
  EXPECT_EQ(e.Describe().find("s3cret"), std::string::npos);
  EXPECT_EQ(ParseRedisUrl("redis://localhost").port, 6379);
  EXPECT_THROW(ParseRedisUrl("http://x:1"), Error);
  EXPECT_THROW(ParseRedisUrl("redis://x:0"), Error);
  EXPECT_THROW(ParseRedisUrl("redis://x:1/abc"), Error);
  try {
    ParseRedisUrl("redis://:hunter2@x:99999");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()).find("hunter2"), std::string::npos) << error.what();
  }
}

TEST(RedisUrl, PasswordFileWinsOverTheEnvironment) {
  std::string path = testing::ScratchPath("redis_password");
  std::ofstream(path) << "from-file\n";
  RedisEndpoint e = ParseRedisUrl("redis://h:1");
  ResolvePassword(e, "", "from-env");
  EXPECT_EQ(e.password, "from-env");
  ResolvePassword(e, path, "from-env");
  EXPECT_EQ(e.password, "from-file");
  EXPECT_THROW(ResolvePassword(e, path + ".missing", ""), Error);
}

TEST(RedisClient, PipelinesCommandsOnAStandaloneServer) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisServer server;
  RedisClient client(ParseRedisUrl(server.url()));
  std::string binary("a\0b\xff", 4);
  std::vector<RedisCommand> commands = {{"SET", "k1", binary},
                                        {"GET", "k1"},
                                        {"GET", "missing"},
                                        {"INCRBY", "n", "5"},
                                        {"NOSUCHCOMMAND"}};
  std::vector<RedisReply> replies = client.Run(commands);
  ASSERT_EQ(replies.size(), 5u);
  EXPECT_EQ(replies[0].text, "OK");
  EXPECT_EQ(replies[1].text, binary);
  EXPECT_TRUE(replies[2].IsNil());
  EXPECT_EQ(replies[3].integer, 5);
  EXPECT_TRUE(replies[4].IsError());
  EXPECT_FALSE(client.cluster());
  EXPECT_EQ(client.counters().connects, 1u);
}

TEST(RedisClient, LogsInWithAPasswordAndReportsAWrongOneWithoutIt) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisServer server("pa55word");
  RedisClient client(ParseRedisUrl(server.url()));
  EXPECT_EQ(client.Run(RedisCommand{"PING"}).text, "PONG");

  RedisEndpoint wrong = ParseRedisUrl(server.url());
  wrong.password = "not-the-password";
  RedisClient refused(wrong);
  try {
    refused.Run(RedisCommand{"PING"});
    FAIL() << "a wrong password was accepted";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("AUTH"), std::string::npos) << message;
    EXPECT_EQ(message.find("not-the-password"), std::string::npos) << message;
  }
  RedisEndpoint none = ParseRedisUrl(server.url());
  none.password.clear();
  RedisClient anonymous(none);
  try {
    anonymous.Run(RedisCommand{"GET", "x"});
    FAIL() << "a server that wants a password answered without one";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("requires a password"), std::string::npos)
        << error.what();
  }
}

TEST(RedisClient, BacksOffWhileTheServerIsDownAndReconnectsAfterARestart) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisServer server;
  RedisClientOptions options;
  options.backoff_min = std::chrono::milliseconds(50);
  options.backoff_max = std::chrono::milliseconds(200);
  RedisClient client(ParseRedisUrl(server.url()), options);
  EXPECT_EQ(client.Run(RedisCommand{"SET", "a", "1"}).text, "OK");
  server.Kill();
  EXPECT_THROW(client.Run(RedisCommand{"GET", "a"}), RedisUnavailable);
  // In backoff: refused at once, without a connection attempt.
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(client.Run(RedisCommand{"GET", "a"}), RedisUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(40));
  server.Start();
  RedisReply reply;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (true) {
    try {
      reply = client.Run(RedisCommand{"GET", "a"});
      break;
    } catch (const RedisUnavailable&) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "never reconnected";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_TRUE(reply.IsNil());  // a restarted server without persistence is empty
  EXPECT_GE(client.counters().failures, 2u);
  EXPECT_GE(client.counters().connects, 2u);
}

TEST(RedisClient, TimesOutOnAServerThatDoesNotAnswer) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisServer server;
  RedisClientOptions options;
  options.timeouts.io = std::chrono::milliseconds(200);
  RedisClient client(ParseRedisUrl(server.url()), options);
  EXPECT_EQ(client.Run(RedisCommand{"PING"}).text, "PONG");
  // DEBUG SLEEP blocks the server; our next command waits past the timeout.
  std::thread sleeper([&] {
    RedisCli({"-p", std::to_string(server.port()), "debug", "sleep", "1"});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(client.Run(RedisCommand{"PING"}), RedisUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(700));
  sleeper.join();
}

TEST(RedisClient, SpreadsKeysOverAClusterAndFollowsRedirections) {
  REPRISE_REQUIRE_REDIS();
  testing::RedisCluster cluster;
  RedisClient client(ParseRedisUrl(cluster.url()));
  std::vector<RedisCommand> sets;
  std::vector<RedisCommand> gets;
  for (int i = 0; i < 200; ++i) {
    sets.push_back({"SET", "key:" + std::to_string(i), "value" + std::to_string(i)});
    gets.push_back({"GET", "key:" + std::to_string(i)});
  }
  for (const RedisReply& reply : client.Run(sets)) EXPECT_EQ(reply.text, "OK") << reply.text;
  EXPECT_TRUE(client.cluster());
  std::vector<RedisReply> values = client.Run(gets);
  for (int i = 0; i < 200; ++i)
    EXPECT_EQ(values[static_cast<size_t>(i)].text, "value" + std::to_string(i));
  // Every master holds some of the keys.
  for (size_t n = 0; n < 3; ++n) {
    std::string count = RedisCli({"-p", std::to_string(cluster.node(n).port()), "dbsize"});
    EXPECT_GT(std::stoi(count), 0) << "node " << n;
  }

  // Move the slot of one key to another master behind the client's back: the client follows
  // MOVED and still reads the key.
  const std::string key = "key:7";
  std::string slot = std::to_string(HashSlot(key));
  std::string source_id;
  std::string target_id;
  int source_port = 0;
  int target_port = 0;
  for (size_t n = 0; n < 3; ++n) {
    int port = cluster.node(n).port();
    std::string id = RedisCli({"-p", std::to_string(port), "cluster", "myid"});
    id = id.substr(0, id.find_first_of("\r\n"));
    std::string keys = RedisCli({"-p", std::to_string(port), "cluster", "countkeysinslot", slot});
    if (std::stoi(keys) > 0) {
      source_id = id;
      source_port = port;
    } else if (target_id.empty()) {
      target_id = id;
      target_port = port;
    }
  }
  ASSERT_FALSE(source_id.empty());
  auto cli = [](int port, std::vector<std::string> args) {
    args.insert(args.begin(), {"-p", std::to_string(port)});
    return RedisCli(args);
  };
  cli(target_port, {"cluster", "setslot", slot, "importing", source_id});
  cli(source_port, {"cluster", "setslot", slot, "migrating", target_id});
  // While migrating, a key not yet moved is still served by the source; a new key in the slot
  // is redirected with ASK.
  std::string tagged = "{" + key + "}new";
  ASSERT_EQ(HashSlot(tagged), HashSlot(key));
  EXPECT_EQ(client.Run(RedisCommand{"SET", tagged, "x"}).text, "OK");
  cli(source_port,
      {"migrate", "127.0.0.1", std::to_string(target_port), "", "0", "5000", "keys", key});
  uint64_t before = client.counters().redirections;
  EXPECT_EQ(client.Run(RedisCommand{"GET", key}).text, "value7");  // ASK to the target
  for (size_t n = 0; n < 3; ++n) {
    cli(cluster.node(n).port(), {"cluster", "setslot", slot, "node", target_id});
  }
  EXPECT_EQ(client.Run(RedisCommand{"GET", key}).text, "value7");  // MOVED
  EXPECT_EQ(client.Run(RedisCommand{"GET", tagged}).text, "x");
  EXPECT_GE(client.counters().redirections, before + 2);
  // After the map refresh the slot goes straight to its new master.
  uint64_t settled = client.counters().redirections;
  EXPECT_EQ(client.Run(RedisCommand{"GET", key}).text, "value7");
  EXPECT_EQ(client.counters().redirections, settled);
}

}  // namespace
}  // namespace reprise::redis
