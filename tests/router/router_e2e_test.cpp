// `reprise route` in front of real `reprise serve` replicas on loopback (the tiny fixture model).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "router/router_test_util.h"

namespace reprise::testing {
namespace {

class RouterE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { REPRISE_REQUIRE_FIXTURES(); }
};

// Documents asked about again and again: the prefix policy sends each one back to the replica
// that computed it, round-robin scatters them, and the replicas' cached_tokens show it.
TEST_F(RouterE2eTest, PrefixPolicyReusesWhatRoundRobinRecomputes) {
  auto run = [&](const std::string& policy, long& cached, long& prompt) {
    ServerProcess a(ReplicaArgs());
    ServerProcess b(ReplicaArgs());
    auto router = StartRouter({&a, &b}, {"--policy", policy});
    cached = 0;
    prompt = 0;
    for (int round = 0; round < 3; ++round) {
      for (int doc = 0; doc < 3; ++doc) {
        auto result = PostJson(router->port(), "/v1/chat/completions",
                               Chat(Document(doc), "Question " + std::to_string(round)));
        ASSERT_EQ(result.status, 200) << result.body;
        cached += result.json["usage"]["prompt_tokens_details"]["cached_tokens"].get<long>();
        prompt += result.json["usage"]["prompt_tokens"].get<long>();
      }
    }
    // Both replicas took work.
    EXPECT_GT(ReplicaRequests(router->port(), a), 0) << policy;
    EXPECT_GT(ReplicaRequests(router->port(), b), 0) << policy;
    // The router counted the prompts exactly as the replicas did.
    EXPECT_EQ(Metric(Get(router->port(), "/metrics").body, "reprise:router_prompt_tokens_total"),
              static_cast<double>(prompt))
        << policy;
  };
  long prefix_cached = 0, prefix_prompt = 0, rr_cached = 0, rr_prompt = 0;
  run("prefix", prefix_cached, prefix_prompt);
  run("round-robin", rr_cached, rr_prompt);
  ASSERT_EQ(prefix_prompt, rr_prompt);
  // Prefix: all 6 repeats find their document. Round-robin (3 documents over 2 replicas in
  // turn) sends a document's second ask to the other replica and only its third one back.
  EXPECT_GT(static_cast<double>(prefix_cached) / static_cast<double>(prefix_prompt), 0.5)
      << prefix_cached << " of " << prefix_prompt;
  EXPECT_GT(rr_cached, 0);
  EXPECT_GT(static_cast<double>(prefix_cached), 1.6 * static_cast<double>(rr_cached))
      << "prefix " << prefix_cached << ", round-robin " << rr_cached;
}

TEST_F(RouterE2eTest, PassesStreamsAndErrorsThroughUnchanged) {
  ServerProcess a(ReplicaArgs());
  auto router = StartRouter({&a});
  json body = {{"prompt", "Once upon a time"},
               {"max_tokens", 12},
               {"temperature", 0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  SseResult direct = PostSse(a.port(), "/v1/completions", body);
  SseResult routed = PostSse(router->port(), "/v1/completions", body);
  ASSERT_EQ(routed.status, 200) << routed.error;
  ASSERT_EQ(direct.events.size(), routed.events.size());
  auto text = [](const SseResult& r) {
    std::string out;
    for (const std::string& e : r.events) {
      if (e == "[DONE]") continue;
      json j = json::parse(e);
      if (!j["choices"].empty()) out += j["choices"][0]["text"].get<std::string>();
    }
    return out;
  };
  EXPECT_EQ(text(direct), text(routed));
  EXPECT_EQ(routed.events.back(), "[DONE]");

  for (const std::string& bad :
       {std::string(R"({"messages": 3})"), std::string("{not json"),
        std::string(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":-1})")}) {
    HttpResult d = PostText(a.port(), "/v1/chat/completions", bad);
    HttpResult r = PostText(router->port(), "/v1/chat/completions", bad);
    EXPECT_EQ(d.status, r.status) << bad;
    EXPECT_EQ(d.body, r.body) << bad;
  }
  EXPECT_EQ(Get(router->port(), "/v1/models").body, Get(a.port(), "/v1/models").body);
  EXPECT_EQ(Get(router->port(), "/no/such/route").status, 404);
}

TEST_F(RouterE2eTest, RetriesElsewhereWhenAReplicaIsGoneAndSkipsItAfterwards) {
  ServerProcess a(ReplicaArgs());
  ServerProcess b(ReplicaArgs());
  // Health checks far apart: the router finds the dead replica through a failed request.
  auto router = StartRouter({&a, &b}, {"--health-interval", "600"});
  b.Kill();
  for (int i = 0; i < 6; ++i) {
    auto result =
        PostJson(router->port(), "/v1/chat/completions",
                 Chat(Document(i), "Who?", {{"prompt_cache_key", "k" + std::to_string(i)}}));
    EXPECT_EQ(result.status, 200) << result.body;
  }
  std::string metrics = Get(router->port(), "/metrics").body;
  EXPECT_EQ(Metric(metrics, "reprise:router_retries_total"), 1) << metrics;
  EXPECT_EQ(Metric(metrics, "reprise:router_requests_total{replica=\"http://127.0.0.1:" +
                                std::to_string(a.port()) + "\"}"),
            6);
}

TEST_F(RouterE2eTest, OnlyTheStreamFromAKilledReplicaFails) {
  ServerProcess a(ReplicaArgs());
  ServerProcess b(ReplicaArgs());
  auto router = StartRouter({&a, &b});
  // Place a document, then stream a long answer about it: it goes where the document is.
  json first = Chat(Document(7), "Tell me more.");
  ASSERT_EQ(PostJson(router->port(), "/v1/chat/completions", first).status, 200);
  ServerProcess* holder = ReplicaRequests(router->port(), a) > 0 ? &a : &b;
  ServerProcess* other = holder == &a ? &b : &a;
  json streamed = Chat(Document(7), "Tell me more, at length.",
                       {{"stream", true}, {"max_tokens", 300}, {"ignore_eos", true}});
  bool killed = false;
  SseResult cut =
      PostSse(router->port(), "/v1/chat/completions", streamed, [&](const std::string&) {
        if (!killed) {
          holder->Kill();
          killed = true;
        }
        return true;
      });
  EXPECT_TRUE(killed);
  EXPECT_TRUE(cut.events.empty() || cut.events.back() != "[DONE]") << cut.raw.substr(0, 300);
  EXPECT_FALSE(cut.error.empty() && cut.events.size() > 1 && cut.events.back() == "[DONE]");
  // Everything after goes to the other replica and succeeds.
  for (int i = 0; i < 3; ++i) {
    auto result = PostJson(router->port(), "/v1/chat/completions", Chat(Document(7), "Again?"));
    EXPECT_EQ(result.status, 200) << result.body;
  }
  EXPECT_EQ(ReplicaRequests(router->port(), *other), 3);
  EXPECT_GE(Metric(Get(router->port(), "/metrics").body, "reprise:router_broken_streams_total"), 1);
}

}  // namespace
}  // namespace reprise::testing
