// Helpers of the router's end-to-end tests: replicas and a router on loopback (the tiny fixture
// model), their metrics, and chat requests about made-up documents.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e/server_process.h"
#include "http_test_client.h"
#include "kvevents/kv_event.h"
#include "redis/redis_client.h"
#include "redis/redis_url.h"
#include "redis_test_server.h"
#include "test_support.h"

namespace reprise::testing {

using nlohmann::json;

inline std::string ModelPath() { return Fixture("models/TinyStories-656K-f32.gguf"); }

inline std::vector<std::string> ReplicaArgs() {
  return {"--model",           ModelPath(), "--chat-template", "chatml",
          "--kv-cache-memory", "64MiB",     "--threads",       "1"};
}

// Tests with replicas that publish KV events: they need the fixture model and redis-server.
class EventsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REPRISE_REQUIRE_FIXTURES();
    REPRISE_REQUIRE_REDIS();
  }
};

// A replica that publishes KV events to `redis`.
inline std::vector<std::string> EventReplicaArgs(const RedisServer& redis,
                                                 std::vector<std::string> extra = {}) {
  std::vector<std::string> args = ReplicaArgs();
  args.insert(args.end(), {"--kv-events-redis-url", redis.url()});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Waits until `done()` (polled), at most 20 s.
template <typename Done>
bool WaitFor(Done&& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// Every event on the stream, in order.
inline std::vector<kvevents::KvEventBatch> ReadEvents(const RedisServer& redis) {
  redis::RedisClient client(redis::ParseRedisUrl(redis.url()));
  redis::RedisReply reply = client.Run({"XRANGE", kvevents::kDefaultStream, "-", "+"});
  std::vector<kvevents::KvEventBatch> batches;
  for (const redis::RedisReply& entry : reply.elements) {
    std::vector<std::string> fields;
    for (const redis::RedisReply& field : entry.elements.at(1).elements)
      fields.push_back(field.text);
    if (auto batch = kvevents::DecodeBatch(fields)) batches.push_back(*batch);
  }
  return batches;
}

inline std::unique_ptr<ServerProcess> StartRouter(const std::vector<const ServerProcess*>& replicas,
                                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--model", ModelPath(), "--chat-template", "chatml"};
  for (const ServerProcess* replica : replicas) {
    args.push_back("--replica");
    args.push_back("http://127.0.0.1:" + std::to_string(replica->port()));
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<ServerProcess>(args, std::map<std::string, std::string>{},
                                         std::chrono::seconds(60), "route");
}

inline double Metric(const std::string& text, const std::string& name_and_labels) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(name_and_labels + " ", 0) == 0)
      return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

inline double ReplicaRequests(int router_port, const ServerProcess& replica) {
  return Metric(Get(router_port, "/metrics").body,
                "reprise:router_requests_total{replica=\"http://127.0.0.1:" +
                    std::to_string(replica.port()) + "\"}");
}

// A document of about 150 tokens, different for each n.
inline std::string Document(int n) {
  std::string text = "Story number " + std::to_string(n) + ". ";
  const char* names[] = {"Lily", "Tom", "Sue", "Ben", "Max", "Anna"};
  for (int i = 0; i < 6; ++i) {
    text += std::string(names[(n + i) % 6]) + " went to the park with a red ball and a big dog. ";
  }
  return text;
}

inline json Chat(const std::string& document, const std::string& question,
                 json extra = json::object()) {
  json body = {
      {"messages",
       {{{"role", "system"}, {"content", document}}, {{"role", "user"}, {"content", question}}}},
      {"max_tokens", 4},
      {"temperature", 0}};
  body.update(extra);
  return body;
}

}  // namespace reprise::testing
