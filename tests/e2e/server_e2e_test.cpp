// End to end: `reprise serve` on a free loopback port with the TinyStories fixture model,
// exercised over HTTP as users do: completions, streaming (TTFT), prefix reuse reported in
// cached_tokens, identical greedy answers with reuse on and off, every error status, and many
// streaming clients (some hanging up) leaving no KV block in use.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e/server_process.h"
#include "http_test_client.h"
#include "kernels/cpu_target.h"
#include "test_support.h"

namespace reprise::testing {
namespace {

using nlohmann::json;

constexpr const char* kModel = kTinyModelName;

// A sample value from Prometheus text ("name{labels} value"), or -1.
double MetricValue(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(name + "{", 0) == 0 || line.rfind(name + " ", 0) == 0) {
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return -1;
}

json ChatBody(const std::string& content, json extra = json::object()) {
  json body = {{"model", kModel}, {"messages", {{{"role", "user"}, {"content", content}}}}};
  body.update(extra);
  return body;
}

std::string LongStory() {
  std::string text = "Once upon a time, there was a little girl named Lily. ";
  for (int i = 0; i < 6; ++i) {
    text +=
        "She loved to play outside in the park with her dog, Spot. One day, she saw a big, "
        "red ball under a tree. ";
  }
  return text;
}

// A streamed completion of LongStory() + "Then" (16 greedy tokens): its text, and its usage chunk.
std::pair<std::string, json> AskLongStory(int port) {
  const json body = {{"model", kModel},  {"prompt", LongStory() + "Then"},
                     {"max_tokens", 16}, {"temperature", 0},
                     {"stream", true},   {"stream_options", {{"include_usage", true}}}};
  SseResult stream = PostSse(port, "/v1/completions", body);
  EXPECT_EQ(stream.status, 200) << stream.raw;
  std::string text;
  json usage;
  for (const std::string& event : stream.events) {
    if (event == "[DONE]") continue;
    json chunk = json::parse(event);
    if (!chunk["choices"].empty()) text += chunk["choices"][0]["text"].get<std::string>();
    if (chunk.contains("usage") && chunk["usage"].is_object()) usage = chunk["usage"];
  }
  return {text, usage};
}

size_t CommonPrefix(const json& a, const json& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

class ServerE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HaveFixtures()) return;
    server_ = new ServerProcess(TinyServeArgs());
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      std::string log = server_->Log();
      int status = server_->Stop();
      EXPECT_EQ(status, 0) << "the shared server did not stop cleanly; its log:\n" << log;
    }
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    REPRISE_REQUIRE_FIXTURES();
    ASSERT_NE(server_, nullptr);
  }
  int port() const { return server_->port(); }

  static ServerProcess* server_;
};

ServerProcess* ServerE2eTest::server_ = nullptr;

TEST_F(ServerE2eTest, ChatCompletion) {
  auto result = PostJson(
      port(), "/v1/chat/completions",
      ChatBody("Tell me a story.",
               {{"max_tokens", 12}, {"temperature", 0}, {"cache_salt", "chat-completion"}}));
  ASSERT_EQ(result.status, 200) << result.body;
  const json& body = result.json;
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], kModel);
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_FALSE(body["choices"][0]["message"]["content"].get<std::string>().empty());
  EXPECT_TRUE(body["choices"][0]["finish_reason"] == "length" ||
              body["choices"][0]["finish_reason"] == "stop");
  EXPECT_GT(body["usage"]["prompt_tokens"].get<int>(), 5);
  EXPECT_LE(body["usage"]["completion_tokens"].get<int>(), 12);
  EXPECT_EQ(
      body["usage"]["total_tokens"].get<int>(),
      body["usage"]["prompt_tokens"].get<int>() + body["usage"]["completion_tokens"].get<int>());
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(body["reuse_len"], 0);

  auto models = Get(port(), "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.json["data"][0]["id"], kModel);
  EXPECT_EQ(models.json["data"][0]["max_model_len"], 512);
}

TEST_F(ServerE2eTest, StreamedChatAndTtft) {
  auto stream = PostSse(port(), "/v1/chat/completions",
                        ChatBody(LongStory(), {{"max_tokens", 20},
                                               {"stream", true},
                                               {"stream_options", {{"include_usage", true}}},
                                               {"cache_salt", "streamed"}}));
  ASSERT_EQ(stream.status, 200) << stream.raw;
  ASSERT_GE(stream.events.size(), 3u) << stream.raw;
  EXPECT_EQ(stream.events.back(), "[DONE]");
  json usage_chunk = json::parse(stream.events[stream.events.size() - 2]);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  int completion_tokens = usage_chunk["usage"]["completion_tokens"];
  EXPECT_GT(completion_tokens, 0);
  EXPECT_EQ(usage_chunk["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  std::string text;
  for (size_t i = 0; i + 2 < stream.events.size(); ++i) {
    json chunk = json::parse(stream.events[i]);
    ASSERT_EQ(chunk["object"], "chat.completion.chunk");
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content")) text += delta["content"].get<std::string>();
  }
  EXPECT_FALSE(text.empty());
  ASSERT_GE(stream.first_event_seconds, 0);
  std::printf("streamed chat: TTFT %.1f ms for %d prompt tokens\n",
              stream.first_event_seconds * 1e3, usage_chunk["usage"]["prompt_tokens"].get<int>());
  RecordProperty("ttft_ms", std::to_string(stream.first_event_seconds * 1e3));
  EXPECT_LT(stream.first_event_seconds, 30.0);
}

// The second of two prompts sharing a long prefix reports exactly the shared tokens as cached.
TEST_F(ServerE2eTest, SharedPrefixIsReportedAsCached) {
  const std::string shared = LongStory();
  json first = ChatBody(shared + "Question: What is the dog's name?",
                        {{"max_tokens", 4}, {"temperature", 0}, {"cache_salt", "shared-prefix"}});
  json second = ChatBody(shared + "Question: What color is the ball?",
                         {{"max_tokens", 4}, {"temperature", 0}, {"cache_salt", "shared-prefix"}});
  auto first_tokens = PostJson(port(), "/tokenize", {{"messages", first["messages"]}});
  auto second_tokens = PostJson(port(), "/tokenize", {{"messages", second["messages"]}});
  ASSERT_EQ(first_tokens.status, 200) << first_tokens.body;
  size_t shared_tokens = CommonPrefix(first_tokens.json["tokens"], second_tokens.json["tokens"]);
  size_t second_len = second_tokens.json["count"];
  ASSERT_GT(shared_tokens, 100u);

  auto a = PostJson(port(), "/v1/chat/completions", first);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json["usage"]["prompt_tokens"], first_tokens.json["count"]);
  EXPECT_EQ(a.json["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  auto b = PostJson(port(), "/v1/chat/completions", second);
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.json["usage"]["prompt_tokens"], second_len);
  EXPECT_EQ(b.json["usage"]["prompt_tokens_details"]["cached_tokens"],
            std::min(shared_tokens, second_len - 1));
  EXPECT_EQ(b.json["reuse_len"], b.json["usage"]["prompt_tokens_details"]["cached_tokens"]);

  // Another tenant's salt shares nothing.
  json other = second;
  other["cache_salt"] = "someone-else";
  auto c = PostJson(port(), "/v1/chat/completions", other);
  EXPECT_EQ(c.json["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST_F(ServerE2eTest, SameGreedyAnswerWithReuseOnAndOff) {
  ServerProcess no_reuse(TinyServeArgs({"--no-enable-prefix-caching"}));
  auto stats = Get(no_reuse.port(), "/v1/cache/stats");
  EXPECT_EQ(stats.json["prefix_caching"], false);
  json body = {{"model", kModel},
               {"prompt", LongStory() + "Then"},
               {"max_tokens", 32},
               {"temperature", 0},
               {"cache_salt", "on-off"}};
  auto warm = PostJson(port(), "/v1/completions", body);    // fills the cache
  auto reused = PostJson(port(), "/v1/completions", body);  // computed mostly from cache
  auto fresh = PostJson(no_reuse.port(), "/v1/completions", body);
  auto fresh_again = PostJson(no_reuse.port(), "/v1/completions", body);
  ASSERT_EQ(warm.status, 200) << warm.body;
  ASSERT_EQ(reused.status, 200) << reused.body;
  ASSERT_EQ(fresh.status, 200) << fresh.body;
  EXPECT_GT(reused.json["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 100);
  EXPECT_EQ(fresh_again.json["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(reused.json["choices"][0]["text"], warm.json["choices"][0]["text"]);
  EXPECT_EQ(reused.json["choices"][0]["text"], fresh.json["choices"][0]["text"]);
  EXPECT_EQ(fresh_again.json["choices"][0]["text"], fresh.json["choices"][0]["text"]);
  EXPECT_EQ(reused.json["usage"]["completion_tokens"], fresh.json["usage"]["completion_tokens"]);
}

TEST_F(ServerE2eTest, DiskTierKeepsTheCacheAcrossARestart) {
  const std::string dir = ScratchPath("e2e-kv-disk");
  std::filesystem::remove_all(dir);
  auto ask = AskLongStory;
  auto reference = ask(port());  // the shared server; its own answer computed or from memory
  {
    ServerProcess first(TinyServeArgs({"--kv-disk-path", dir}));
    auto cold = ask(first.port());
    EXPECT_EQ(cold.first, reference.first);
    EXPECT_EQ(cold.second["cache_sources"]["disk"], 0);
    EXPECT_EQ(first.Stop(), 0) << first.Log();
  }
  ServerProcess restarted(TinyServeArgs({"--kv-disk-path", dir}));
  auto warm = ask(restarted.port());
  EXPECT_EQ(warm.first, reference.first);
  const size_t prompt_tokens = warm.second["prompt_tokens"];
  const size_t from_disk = warm.second["cache_sources"]["disk"];
  EXPECT_GT(from_disk, prompt_tokens - 32) << warm.second.dump();
  EXPECT_EQ(warm.second["prompt_tokens_details"]["cached_tokens"], from_disk);
  auto stats = Get(restarted.port(), "/v1/cache/stats");
  EXPECT_EQ(stats.json["tiers"][0]["name"], "disk");
  EXPECT_GT(stats.json["tiers"][0]["blocks_read"].get<int>(), 0);
  // The engine publishes its counters after the step that finished the request.
  const std::string line = "reprise:prompt_tokens_by_source_total{model_name=\"" +
                           std::string(kModel) + "\",source=\"disk\"} " + std::to_string(from_disk);
  HttpResult metrics;
  for (int i = 0; i < 100; ++i) {
    metrics = Get(restarted.port(), "/metrics");
    if (metrics.body.find(line) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(metrics.body.find(line), std::string::npos) << metrics.body;
  auto cleared = PostJson(restarted.port(), "/v1/cache/clear", {{"tiers", {"memory", "disk"}}});
  EXPECT_EQ(cleared.status, 200) << cleared.body;
  auto refused = PostJson(restarted.port(), "/v1/cache/clear", {{"tiers", {"tape"}}});
  EXPECT_EQ(refused.status, 400) << refused.body;
}

// Each CPU target sums in its own order, so K/V computed on one are other bits than another's:
// a replica must not reuse blocks kept on disk by one on another target (its answers would then
// differ from its own with reuse off). They live under another fingerprint and stay there.
TEST_F(ServerE2eTest, DiskTierIsReusedOnlyUnderTheSameKernels) {
  if (!kernels::CpuTargetSupported(kernels::CpuTarget::kAvx2)) {
    GTEST_SKIP() << "this CPU has no AVX2: one kernel target only";
  }
  const std::string dir = ScratchPath("e2e-kv-disk-targets");
  std::filesystem::remove_all(dir);
  const std::map<std::string, std::string> on_avx2 = {{"REPRISE_CPU_TARGET", "avx2"}};
  const std::map<std::string, std::string> on_scalar = {{"REPRISE_CPU_TARGET", "scalar"}};
  std::string avx2_answer;
  {
    ServerProcess avx2(TinyServeArgs({"--kv-disk-path", dir}), on_avx2);
    EXPECT_EQ(Get(avx2.port(), "/v1/cache/stats").json["numerics"],
              "avx2." + std::to_string(kernels::kKernelNumericsVersion));
    auto cold = AskLongStory(avx2.port());
    EXPECT_EQ(cold.second["cache_sources"]["disk"], 0);
    avx2_answer = cold.first;
    EXPECT_EQ(avx2.Stop(), 0) << avx2.Log();
  }
  std::string scalar_answer;
  {
    ServerProcess scalar(TinyServeArgs({"--kv-disk-path", dir}), on_scalar);
    EXPECT_EQ(Get(scalar.port(), "/v1/cache/stats").json["numerics"],
              "scalar." + std::to_string(kernels::kKernelNumericsVersion));
    auto answer = AskLongStory(scalar.port());
    EXPECT_EQ(answer.second["cache_sources"]["disk"], 0) << answer.second.dump();
    EXPECT_EQ(answer.second["prompt_tokens_details"]["cached_tokens"], 0);
    scalar_answer = answer.first;
    EXPECT_EQ(scalar.Stop(), 0) << scalar.Log();
  }
  size_t folders = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    folders += entry.is_directory();
  EXPECT_EQ(folders, 2u) << "one fingerprint folder per target";
  // The first target's blocks are still there for a replica on that target.
  ServerProcess avx2_again(TinyServeArgs({"--kv-disk-path", dir}), on_avx2);
  auto warm = AskLongStory(avx2_again.port());
  EXPECT_GT(warm.second["cache_sources"]["disk"].get<int>(), 0) << warm.second.dump();
  EXPECT_EQ(warm.first, avx2_answer);
}

void ExpectError(const HttpResult& result, int status, const std::string& code) {
  EXPECT_EQ(result.status, status) << result.body;
  ASSERT_TRUE(result.json.is_object() && result.json.contains("error")) << result.body;
  EXPECT_TRUE(result.json["error"]["message"].is_string());
  EXPECT_TRUE(result.json["error"]["type"].is_string());
  if (!code.empty()) {
    EXPECT_EQ(result.json["error"]["code"], code) << result.body;
  }
}

TEST_F(ServerE2eTest, ErrorStatuses) {
  ExpectError(PostText(port(), "/v1/chat/completions", "{\"model\": "), 400, "invalid_json");
  ExpectError(PostJson(port(), "/v1/chat/completions", ChatBody("hi", {{"model", "gpt-4o"}})), 404,
              "model_not_found");
  ExpectError(PostJson(port(), "/v1/chat/completions", ChatBody("hi", {{"top_p", "high"}})), 400,
              "");
  ExpectError(PostJson(port(), "/v1/chat/completions", ChatBody("hi", {{"n", 0}})), 400, "");
  std::string too_long;
  for (int i = 0; i < 300; ++i) too_long += "the dog ran. ";
  ExpectError(PostJson(port(), "/v1/chat/completions", ChatBody(too_long)), 400,
              "context_length_exceeded");
  ExpectError(PostJson(port(), "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 100000}}),
              400, "context_length_exceeded");
  auto unknown_task =
      PostJson(port(), "/v1/completions", {{"prompt", "Once"}, {"task_id", "nope"}});
  ExpectError(unknown_task, 400, "task_not_found");
  ExpectError(PostJson(port(), "/v1/completions", {{"prompt", {1, 99999}}}), 400, "");
  ExpectError(PostText(port(), "/v1/completions", std::string(17u << 20, ' ')), 413,
              "request_too_large");
  ExpectError(Get(port(), "/v1/unknown"), 404, "");
  // Still healthy after all that.
  EXPECT_EQ(Get(port(), "/health").status, 200);
}

TEST_F(ServerE2eTest, FullQueueAnswers503) {
  ServerProcess small(TinyServeArgs({"--max-running-requests", "1", "--max-queued-requests", "1"}));
  std::atomic<int> refused{0};
  std::atomic<int> served{0};
  for (int round = 0; round < 5 && refused == 0; ++round) {
    std::vector<std::thread> clients;
    for (int i = 0; i < 12; ++i) {
      clients.emplace_back([&, i] {
        auto result = PostJson(small.port(), "/v1/completions",
                               {{"prompt", LongStory() + std::to_string(i)},
                                {"max_tokens", 200},
                                {"ignore_eos", true}});
        if (result.status == 503) {
          EXPECT_EQ(result.json["error"]["code"], "queue_full");
          ++refused;
        } else if (result.status == 200) {
          ++served;
        } else {
          ADD_FAILURE() << result.status << " " << result.body;
        }
      });
    }
    for (auto& client : clients) client.join();
  }
  EXPECT_GT(refused.load(), 0);
  EXPECT_GT(served.load(), 0);
}

TEST_F(ServerE2eTest, ConcurrentStreamsWithHangUpsLeakNoBlocks) {
  constexpr int kClients = 16;
  std::vector<std::thread> clients;
  std::atomic<int> completed{0};
  std::atomic<int> hung_up{0};
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      bool hang_up = i % 4 == 1;
      int seen = 0;
      json body =
          ChatBody(LongStory() + " Client " + std::to_string(i % 5),
                   {{"max_tokens", 64}, {"stream", true}, {"ignore_eos", true}, {"seed", i}});
      auto stream = PostSse(port(), "/v1/chat/completions", body,
                            [&](const std::string&) { return !hang_up || ++seen < 4; });
      if (stream.hung_up) ++hung_up;
      if (!stream.events.empty() && stream.events.back() == "[DONE]") ++completed;
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(hung_up.load(), kClients / 4);
  EXPECT_EQ(completed.load(), kClients - kClients / 4);

  // Every block goes back: none in use once the requests are gone (cached and pinned blocks
  // are counted apart).
  double in_use = -1, running = -1;
  for (int i = 0; i < 200; ++i) {
    std::string metrics = Get(port(), "/metrics").body;
    in_use = MetricValue(metrics, "reprise:kv_cache_blocks_in_use");
    running = MetricValue(metrics, "reprise:num_requests_running");
    if (in_use == 0 && running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(in_use, 0);
  EXPECT_EQ(running, 0);
  std::string metrics = Get(port(), "/metrics").body;
  EXPECT_GE(MetricValue(metrics, "reprise:request_cancelled_total"), 1);
  EXPECT_GT(MetricValue(metrics, "reprise:prefix_cache_hits_total"), 0);
  EXPECT_GT(MetricValue(metrics, "reprise:time_to_first_token_seconds_count"), 0);
}

TEST_F(ServerE2eTest, RtpLlmRoutesAndTokenizeRoundTrip) {
  auto result = PostJson(port(), "/generate",
                         {{"prompt", "Once upon a time"},
                          {"generate_config", {{"top_k", 1}, {"max_new_tokens", 10}}}});
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_TRUE(result.json["response"].is_string());
  EXPECT_EQ(result.json["finished"], true);
  EXPECT_GT(result.json["aux_info"]["input_len"].get<int>(), 0);
  EXPECT_LE(result.json["aux_info"]["output_len"].get<int>(), 10);
  EXPECT_TRUE(result.json["aux_info"]["reuse_len"].is_number_integer());
  EXPECT_TRUE(result.json["aux_info"]["cost_time_ms"].is_number());
  EXPECT_EQ(
      PostJson(port(), "/", {{"prompt", "Once"}, {"generate_config", {{"max_new_tokens", 2}}}})
          .status,
      200);

  auto tokens = PostJson(port(), "/tokenize", {{"prompt", "Once upon a time"}});
  ASSERT_EQ(tokens.status, 200);
  EXPECT_EQ(tokens.json["tokens"][0], 1);  // BOS
  json ids = tokens.json["tokens"];
  ids.erase(0);
  auto text = PostJson(port(), "/detokenize", {{"tokens", ids}});
  ASSERT_EQ(text.status, 200);
  EXPECT_NE(text.json["prompt"].get<std::string>().find("Once upon a time"), std::string::npos)
      << text.body;
}

}  // namespace
}  // namespace reprise::testing
