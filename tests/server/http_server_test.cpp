// The HTTP routes over loopback against FakeBackend: shapes, streaming, every error status,
// disconnects cancelling their requests, many clients at once.
#include "server/http_server.h"

#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http_test_client.h"
#include "server/fake_backend.h"
#include "server/server_fixture.h"

namespace reprise::server {
namespace {

using nlohmann::json;
using reprise::testing::Get;
using reprise::testing::PostJson;
using reprise::testing::PostSse;
using reprise::testing::PostText;
using testing::FakeBackend;

TEST_F(HttpServerTest, HealthIs503UntilTheBackendIsSet) {
  Start({}, {}, /*ready=*/false);
  EXPECT_EQ(Get(port_, "/health").status, 503);
  ExpectError(PostJson(port_, "/v1/chat/completions", ChatBody("hi")), 503, "loading");
  EXPECT_EQ(Get(port_, "/metrics").status, 200);
  server_->SetBackend(backend_);
  auto health = Get(port_, "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.json["status"], "ok");
}

TEST_F(HttpServerTest, ChatCompletion) {
  Start();
  auto result = PostJson(port_, "/v1/chat/completions", ChatBody("hello", {{"max_tokens", 5}}));
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.content_type, "application/json");
  const json& body = result.json;
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(body["choices"][0]["message"]["content"], "abcde");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  // "<|user|>hello\n<|assistant|>" plus BOS.
  size_t prompt_tokens = std::string("<|user|>hello\n<|assistant|>").size() + 1;
  EXPECT_EQ(body["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(body["usage"]["completion_tokens"], 5);
  EXPECT_EQ(body["usage"]["total_tokens"], prompt_tokens + 5);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(body["reuse_len"], 0);
  // The server tokenized the prompt once and handed the engine its tokens, BOS first.
  GenerationRequest sent = backend_->last_request();
  EXPECT_TRUE(sent.prompt.empty());
  ASSERT_EQ(sent.prompt_tokens.size(), prompt_tokens);
  EXPECT_EQ(sent.prompt_tokens[0], FakeBackend::kBos);
  EXPECT_EQ(sent.prompt_tokens[1], '<' + 3);
  EXPECT_EQ(backend_->encoded(), 1u);

  // The same prompt again: everything but the last token comes from the (fake) cache.
  auto again = PostJson(port_, "/v1/chat/completions", ChatBody("hello", {{"max_tokens", 5}}));
  EXPECT_EQ(again.json["usage"]["prompt_tokens_details"]["cached_tokens"], prompt_tokens - 1);
  EXPECT_EQ(again.json["reuse_len"], prompt_tokens - 1);
  // ... and where it came from (the fake: one block from memory, the rest from disk).
  EXPECT_EQ(again.json["usage"]["cache_sources"]["memory"], 16);
  EXPECT_EQ(again.json["usage"]["cache_sources"]["disk"], prompt_tokens - 1 - 16);
  EXPECT_EQ(again.json["usage"]["cache_sources"]["remote"], 0);
  EXPECT_EQ(body["usage"]["cache_sources"]["memory"], 0);
}

TEST_F(HttpServerTest, StreamedUsageCarriesCacheSources) {
  Start();
  PostJson(port_, "/v1/completions", {{"prompt", std::string(40, 'q')}, {"max_tokens", 2}});
  auto events = PostSse(port_, "/v1/completions",
                        {{"prompt", std::string(40, 'q')},
                         {"max_tokens", 2},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(events.status, 200);
  ASSERT_GE(events.events.size(), 2u);
  json usage = json::parse(events.events[events.events.size() - 2])["usage"];
  const size_t cached = usage["prompt_tokens"].get<size_t>() - 1;
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], cached);
  EXPECT_EQ(usage["cache_sources"]["memory"], 16);
  EXPECT_EQ(usage["cache_sources"]["disk"], cached - 16);
  EXPECT_EQ(usage["cache_sources"]["remote"], 0);
}

TEST_F(HttpServerTest, CacheClearTakesTiersAndRefusesOthers) {
  Start();
  auto memory = PostJson(port_, "/v1/cache/clear", json::object());
  ASSERT_EQ(memory.status, 200);
  EXPECT_EQ(backend_->cleared_tiers(), std::vector<std::string>{"memory"});
  auto both = PostJson(port_, "/v1/cache/clear", {{"tiers", {"memory", "disk"}}});
  ASSERT_EQ(both.status, 200);
  EXPECT_EQ(backend_->cleared_tiers(), (std::vector<std::string>{"memory", "disk"}));
  EXPECT_EQ(both.json["tiers"], json({"memory", "disk"}));
  for (const json& bad :
       {json{{"tiers", {"ssd"}}}, json{{"tiers", "disk"}}, json{{"tiers", json::array()}},
        json{{"tier", {"disk"}}}, json{{"tiers", {1}}}}) {
    auto refused = PostJson(port_, "/v1/cache/clear", bad);
    EXPECT_EQ(refused.status, 400) << bad.dump();
    EXPECT_TRUE(refused.json["error"]["message"].is_string()) << bad.dump();
  }
  EXPECT_EQ(backend_->cleared_tiers(), (std::vector<std::string>{"memory", "disk"}));
  auto stats = Get(port_, "/v1/cache/stats");
  ASSERT_EQ(stats.status, 200);
  EXPECT_EQ(stats.json["tiers"][0]["name"], "disk");
  EXPECT_EQ(stats.json["tiers"][0]["corrupt_blocks"], 1);
  EXPECT_TRUE(stats.json["cache_sources"]["disk"].is_number());
}

TEST_F(HttpServerTest, ChatWithoutModelNameAndDefaultMaxTokensToContextEnd) {
  Start();
  json body = ChatBody("x");
  body.erase("model");
  auto result = PostJson(port_, "/v1/chat/completions", body);
  ASSERT_EQ(result.status, 200) << result.body;
  size_t prompt_tokens = result.json["usage"]["prompt_tokens"];
  EXPECT_EQ(result.json["usage"]["completion_tokens"], 256 - prompt_tokens);
}

TEST_F(HttpServerTest, TemplateHoldingBosGetsNoSecondBos) {
  HttpServerOptions options;
  options.chat_template = "bos";
  Start(options);
  auto result = PostJson(port_, "/v1/chat/completions", ChatBody("hi", {{"max_tokens", 1}}));
  ASSERT_EQ(result.status, 200) << result.body;
  // "<s>" is one token: BOS, and no second one is added.
  GenerationRequest sent = backend_->last_request();
  ASSERT_GE(sent.prompt_tokens.size(), 2u);
  EXPECT_EQ(sent.prompt_tokens[0], FakeBackend::kBos);
  EXPECT_EQ(sent.prompt_tokens[1], '<' + 3);
  EXPECT_EQ(result.json["usage"]["prompt_tokens"],
            std::string("<|user|>hi\n<|assistant|>").size() + 1);
  auto tokens =
      PostJson(port_, "/tokenize", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  EXPECT_EQ(tokens.json["tokens"][0], FakeBackend::kBos);
  EXPECT_NE(tokens.json["tokens"][1], FakeBackend::kBos);
}

TEST_F(HttpServerTest, CompletionsDefaultTo16TokensAndAcceptTokenIds) {
  Start();
  auto result = PostJson(port_, "/v1/completions", {{"model", "tiny"}, {"prompt", "Once"}});
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["object"], "text_completion");
  EXPECT_EQ(result.json["choices"][0]["text"], "abcdefghijklmnop");
  EXPECT_EQ(result.json["usage"]["completion_tokens"], 16);
  EXPECT_EQ(result.json["usage"]["prompt_tokens"], 5);

  auto tokens = PostJson(port_, "/v1/completions", {{"prompt", {1, 70, 71}}, {"max_tokens", 2}});
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  EXPECT_EQ(tokens.json["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(backend_->last_request().prompt_tokens, (std::vector<int32_t>{1, 70, 71}));

  ExpectError(PostJson(port_, "/v1/completions", {{"prompt", {1, 9999}}}), 400, "");
}

TEST_F(HttpServerTest, SeveralPromptsAndChoices) {
  Start();
  auto result = PostJson(port_, "/v1/completions",
                         {{"prompt", {"ab", "cd"}}, {"n", 2}, {"max_tokens", 3}, {"seed", 5}});
  ASSERT_EQ(result.status, 200) << result.body;
  ASSERT_EQ(result.json["choices"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(result.json["choices"][i]["index"], i);
  EXPECT_EQ(result.json["usage"]["completion_tokens"], 12);
  EXPECT_EQ(result.json["usage"]["prompt_tokens"], 6);  // 3 per prompt, counted once each
  EXPECT_EQ(backend_->submitted(), 4u);
}

TEST_F(HttpServerTest, StreamedChat) {
  Start();
  auto stream = PostSse(port_, "/v1/chat/completions",
                        ChatBody("hello", {{"max_tokens", 4}, {"stream", true}}));
  ASSERT_EQ(stream.status, 200) << stream.raw;
  ASSERT_GE(stream.events.size(), 3u) << stream.raw;
  EXPECT_EQ(stream.events.back(), "[DONE]");
  json role = json::parse(stream.events.front());
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  json last;
  for (size_t i = 1; i + 1 < stream.events.size(); ++i) {
    json chunk = json::parse(stream.events[i]);
    if (chunk["choices"][0]["delta"].contains("content")) {
      text += chunk["choices"][0]["delta"]["content"].get<std::string>();
    }
    last = chunk;
  }
  EXPECT_EQ(text, "abcd");
  // Without stream_options the last chunk carries the finish reason and the usage.
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(last["usage"]["completion_tokens"], 4);
  EXPECT_EQ(last["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(last["reuse_len"], 0);
  EXPECT_GE(stream.first_event_seconds, 0);
}

TEST_F(HttpServerTest, StreamedCompletionWithUsageChunk) {
  Start();
  auto stream = PostSse(port_, "/v1/completions",
                        {{"prompt", "Once"},
                         {"max_tokens", 3},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(stream.status, 200);
  ASSERT_GE(stream.events.size(), 3u);
  EXPECT_EQ(stream.events.back(), "[DONE]");
  json usage_chunk = json::parse(stream.events[stream.events.size() - 2]);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 3);
  EXPECT_EQ(usage_chunk["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  json finish = json::parse(stream.events[stream.events.size() - 3]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(finish.contains("usage"));
  std::string text;
  for (const std::string& event : stream.events) {
    if (event == "[DONE]") continue;
    json chunk = json::parse(event);
    if (!chunk["choices"].empty()) text += chunk["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "abc");
}

TEST_F(HttpServerTest, RtpGenerateRoutes) {
  Start();
  for (const char* path : {"/", "/generate"}) {
    SCOPED_TRACE(path);
    auto result =
        PostJson(port_, path,
                 {{"prompt", "hello, what's your name"},
                  {"generate_config", {{"top_k", 1}, {"max_new_tokens", 3}, {"task_id", "1"}}}});
    ASSERT_EQ(result.status, 200) << result.body;
    EXPECT_EQ(result.json["response"], "abc");
    EXPECT_EQ(result.json["finished"], true);
    const json& aux = result.json["aux_info"];
    EXPECT_EQ(aux["output_len"], 3);
    // The task prompt's 8 tokens (BOS included), then the text's bytes without a second BOS.
    EXPECT_EQ(aux["input_len"], std::string("hello, what's your name").size() + 8);
    EXPECT_TRUE(aux["reuse_len"].is_number_integer());
    EXPECT_TRUE(aux["cost_time_ms"].is_number());
  }
  // The request's own tokens go to the engine without BOS; the engine prepends the task prompt.
  GenerationRequest sent = backend_->last_request();
  EXPECT_EQ(sent.cache.task_id, "1");
  ASSERT_EQ(sent.prompt_tokens.size(), std::string("hello, what's your name").size());
  EXPECT_EQ(sent.prompt_tokens[0], 'h' + 3);
  // max_new_tokens beyond the context is clamped, not refused.
  auto long_answer = PostJson(port_, "/generate",
                              {{"prompt", "x"}, {"generate_config", {{"max_new_tokens", 100000}}}});
  ASSERT_EQ(long_answer.status, 200) << long_answer.body;
  EXPECT_EQ(long_answer.json["aux_info"]["output_len"], 256 - 2);
  auto stream = PostSse(
      port_, "/generate",
      {{"prompt", "x"}, {"generate_config", {{"max_new_tokens", 2}, {"yield_generator", true}}}});
  ASSERT_EQ(stream.status, 200);
  ASSERT_EQ(stream.events.size(), 3u) << stream.raw;
  json last = json::parse(stream.events.back());
  EXPECT_EQ(last["response"], "ab");
  EXPECT_EQ(last["finished"], true);
}

TEST_F(HttpServerTest, ErrorStatusesAndBodies) {
  HttpServerOptions options;
  options.max_body_bytes = 4096;
  Start(options, {.context_length = 64});
  ExpectError(PostText(port_, "/v1/chat/completions", "{not json"), 400, "invalid_json");
  ExpectError(PostText(port_, "/v1/chat/completions", "[1,2]"), 400, "invalid_json");
  ExpectError(PostJson(port_, "/v1/chat/completions", ChatBody("x", {{"temperature", 9}})), 400,
              "");
  ExpectError(PostJson(port_, "/v1/chat/completions", ChatBody("x", {{"model", "gpt-4"}})), 404,
              "model_not_found");
  ExpectError(PostJson(port_, "/v1/completions", {{"model", "gpt-4"}, {"prompt", "x"}}), 404,
              "model_not_found");

  auto unknown_task = PostJson(port_, "/v1/chat/completions", ChatBody("x", {{"task_id", 99}}));
  ExpectError(unknown_task, 400, "task_not_found");
  // The message names the client's id only, never the ids that exist.
  std::string message = unknown_task.json["error"]["message"];
  EXPECT_NE(message.find("99"), std::string::npos);
  EXPECT_EQ(message.find("'1'"), std::string::npos) << message;

  ExpectError(PostJson(port_, "/v1/chat/completions", ChatBody(std::string(100, 'x'))), 400,
              "context_length_exceeded");
  ExpectError(PostJson(port_, "/v1/chat/completions", ChatBody("x", {{"max_tokens", 60}})), 400,
              "context_length_exceeded");
  ExpectError(PostJson(port_, "/v1/chat/completions", ChatBody(std::string(5000, 'x'))), 413,
              "request_too_large");
  ExpectError(PostJson(port_, "/v1/nothing", json::object()), 404, "not_found");
  ExpectError(Get(port_, "/v1/chat/completions"), 404, "not_found");
  ExpectError(PostJson(port_, "/v1/chat/completions", ChatBody("x", {{"messages", "x"}})), 400, "");
  ExpectError(PostJson(port_, "/v1/chat/completions",
                       ChatBody("x", {{"stream", true}, {"max_tokens", 60}})),
              400, "context_length_exceeded");

  // Errors are counted in /metrics.
  auto metrics = Get(port_, "/metrics");
  EXPECT_NE(metrics.body.find("reprise:http_errors_total{model_name=\"tiny\",status=\"404\"} 4"),
            std::string::npos)
      << metrics.body;
}

TEST_F(HttpServerTest, UnknownChatTemplateIs400) {
  Start({}, {.has_chat_template = false});
  ExpectError(PostJson(port_, "/v1/chat/completions", ChatBody("x")), 400, "chat_template_error");
  // /v1/completions needs no template.
  EXPECT_EQ(PostJson(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}}).status, 200);
}

TEST_F(HttpServerTest, FullQueueIs503) {
  Start({}, {.max_active = 2, .token_interval = std::chrono::milliseconds(20)});
  std::vector<std::thread> clients;
  for (int i = 0; i < 2; ++i) {
    clients.emplace_back([this] {
      PostJson(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 50}});
    });
  }
  // Wait until both occupy the fake engine.
  for (int i = 0; i < 200 && backend_->active() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(backend_->active(), 2u);
  ExpectError(PostJson(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}}), 503,
              "queue_full");
  // n=2 with room for none: whatever was submitted is cancelled again.
  for (auto& client : clients) client.join();
  EXPECT_TRUE(backend_->WaitIdle(std::chrono::seconds(5)));
}

TEST_F(HttpServerTest, ApiKey) {
  HttpServerOptions options;
  options.api_keys = {KeyOfItsOwn("secret")};
  Start(options);
  ExpectError(PostJson(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}}), 401,
              "invalid_api_key");
  ExpectError(Get(port_, "/v1/models"), 401, "invalid_api_key");
  EXPECT_EQ(Get(port_, "/health").status, 200);
  EXPECT_EQ(Get(port_, "/metrics").status, 200);
  auto ok = PostJson(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}},
                     {{"Authorization", "Bearer secret"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST_F(HttpServerTest, ModelsTokenizeDetokenize) {
  Start();
  auto models = Get(port_, "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.json["object"], "list");
  EXPECT_EQ(models.json["data"][0]["id"], "tiny");
  EXPECT_EQ(models.json["data"][0]["max_model_len"], 256);

  auto tokens = PostJson(port_, "/tokenize", {{"prompt", "ab"}});
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  EXPECT_EQ(tokens.json["tokens"], json({1, 'a' + 3, 'b' + 3}));
  EXPECT_EQ(tokens.json["count"], 3);
  EXPECT_EQ(tokens.json["max_model_len"], 256);
  auto no_bos = PostJson(port_, "/tokenize", {{"prompt", "ab"}, {"add_special_tokens", false}});
  EXPECT_EQ(no_bos.json["count"], 2);

  auto text = PostJson(port_, "/detokenize", {{"tokens", {'a' + 3, 'b' + 3}}});
  ASSERT_EQ(text.status, 200);
  EXPECT_EQ(text.json["prompt"], "ab");
  ExpectError(PostJson(port_, "/detokenize", {{"tokens", {-1}}}), 400, "");
  ExpectError(PostJson(port_, "/detokenize", {{"tokens", "ab"}}), 400, "");
  ExpectError(PostJson(port_, "/tokenize", json::object()), 400, "");
  ExpectError(PostJson(port_, "/tokenize", {{"prompt", "x"}, {"model", "other"}}), 404,
              "model_not_found");
}

TEST_F(HttpServerTest, TasksAndCacheAdmin) {
  Start();
  auto tasks = Get(port_, "/v1/tasks");
  ASSERT_EQ(tasks.status, 200);
  EXPECT_EQ(tasks.json["data"][0]["task_id"], "1");
  EXPECT_EQ(tasks.json["data"][0]["tokens"], 8);

  PostJson(port_, "/v1/completions", {{"prompt", "abc"}, {"max_tokens", 1}});
  auto stats = Get(port_, "/v1/cache/stats");
  ASSERT_EQ(stats.status, 200);
  EXPECT_EQ(stats.json["blocks"]["total"], 1000);
  EXPECT_EQ(stats.json["blocks"]["pinned"], 1);
  EXPECT_EQ(stats.json["blocks"]["protected"], 1);
  EXPECT_EQ(stats.json["task_prompts"].size(), 1u);
  EXPECT_TRUE(stats.json["hit_rate"].is_number());

  auto cleared = PostJson(port_, "/v1/cache/clear", json::object());
  ASSERT_EQ(cleared.status, 200);
  EXPECT_EQ(cleared.json["cleared_blocks"], 1);
}

TEST_F(HttpServerTest, MetricsAfterRequests) {
  Start();
  PostJson(port_, "/v1/completions", {{"prompt", "abc"}, {"max_tokens", 2}});
  auto metrics = Get(port_, "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.content_type.find("text/plain"), std::string::npos);
  for (const char* line :
       {"reprise:prompt_tokens_by_source_total{model_name=\"tiny\",source=\"compute\"}",
        "reprise:kv_tier_blocks{model_name=\"tiny\",tier=\"disk\"} 3",
        "reprise:kv_tier_corrupt_blocks_total{model_name=\"tiny\",tier=\"disk\"} 1",
        "reprise:kv_tier_load_seconds_bucket{model_name=\"tiny\",le=\"0.1\"} 3",
        "reprise:kv_tier_load_seconds_count{model_name=\"tiny\"} 4"}) {
    EXPECT_NE(metrics.body.find(line), std::string::npos) << line;
  }
  EXPECT_NE(metrics.body.find(
                "reprise:request_success_total{model_name=\"tiny\",finished_reason=\"length\"} 1"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("reprise:time_to_first_token_seconds_count{model_name=\"tiny\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.body.find("reprise:prefix_cache_queries_total{model_name=\"tiny\"} 4"),
            std::string::npos);
}

TEST_F(HttpServerTest, ClientHangingUpMidStreamCancelsItsRequest) {
  Start({}, {.token_interval = std::chrono::milliseconds(2)});
  int seen = 0;
  auto stream =
      PostSse(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 200}, {"stream", true}},
              [&seen](const std::string&) { return ++seen < 3; });
  EXPECT_TRUE(stream.hung_up);
  ASSERT_TRUE(backend_->WaitIdle(std::chrono::seconds(10)));
  EXPECT_EQ(backend_->cancelled(), 1u);
}

TEST_F(HttpServerTest, ManyConcurrentStreamsSomeHangingUp) {
  Start({}, {.token_interval = std::chrono::milliseconds(1)});
  constexpr int kClients = 16;
  std::vector<std::thread> clients;
  std::vector<int> completed(kClients, 0);
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([this, i, &completed] {
      bool hang_up = i % 3 == 0;
      int seen = 0;
      auto stream =
          PostSse(port_, "/v1/chat/completions",
                  ChatBody("client " + std::to_string(i), {{"max_tokens", 40}, {"stream", true}}),
                  [&](const std::string&) { return !hang_up || ++seen < 5; });
      completed[i] = !stream.events.empty() && stream.events.back() == "[DONE]";
      if (!hang_up && !completed[i])
        ADD_FAILURE() << stream.status << " " << stream.error << " " << stream.raw;
    });
  }
  for (auto& client : clients) client.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(completed[i], i % 3 != 0) << i;
  ASSERT_TRUE(backend_->WaitIdle(std::chrono::seconds(10)));
  auto metrics = Get(port_, "/metrics");
  EXPECT_NE(metrics.body.find("reprise:kv_cache_blocks_in_use{model_name=\"tiny\"} 0"),
            std::string::npos);
}

TEST_F(HttpServerTest, StopEndsOpenStreams) {
  Start({}, {.token_interval = std::chrono::milliseconds(5)});
  std::thread client([this] {
    PostSse(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 200}, {"stream", true}});
  });
  for (int i = 0; i < 200 && backend_->active() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  server_->Stop();
  client.join();
  EXPECT_TRUE(backend_->WaitIdle(std::chrono::seconds(5)));
}

// The data events of a stream before [DONE], parsed.
std::vector<json> StreamChunks(const reprise::testing::SseResult& stream) {
  std::vector<json> chunks;
  for (const std::string& event : stream.events) {
    if (event != "[DONE]") chunks.push_back(json::parse(event));
  }
  return chunks;
}

TEST_F(HttpServerTest, ChatLogprobsWholeAndStreamed) {
  Start();
  json extra = {{"logprobs", true}, {"top_logprobs", 2}, {"max_tokens", 3}};
  auto result = PostJson(port_, "/v1/chat/completions", ChatBody("hi", extra));
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(backend_->last_request().sampling.logprobs, 2);
  const json& content = result.json["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u) << result.body;
  EXPECT_EQ(content[0]["token"], "a");
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(content[0]["bytes"], json::array({'a'}));
  ASSERT_EQ(content[2]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[2]["top_logprobs"][1]["token"], "d");

  extra["stream"] = true;
  auto stream = PostSse(port_, "/v1/chat/completions", ChatBody("hi", extra));
  std::string tokens;
  for (const json& chunk : StreamChunks(stream)) {
    const json& logprobs = chunk["choices"][0]["logprobs"];
    if (logprobs.is_null()) continue;
    for (const json& entry : logprobs["content"]) tokens += entry["token"].get<std::string>();
  }
  EXPECT_EQ(tokens, "abc") << stream.raw;
  // Without the field: null, as before.
  auto plain = PostJson(port_, "/v1/chat/completions", ChatBody("hi", {{"max_tokens", 2}}));
  EXPECT_TRUE(plain.json["choices"][0]["logprobs"].is_null());
  EXPECT_FALSE(backend_->last_request().sampling.logprobs.has_value());
}

TEST_F(HttpServerTest, CompletionLogprobsAndEcho) {
  Start();
  json body = {{"prompt", "Once"}, {"max_tokens", 3}, {"logprobs", 1}};
  auto result = PostJson(port_, "/v1/completions", body);
  ASSERT_EQ(result.status, 200) << result.body;
  const json& logprobs = result.json["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"], json::array({"a", "b", "c"})) << result.body;
  EXPECT_EQ(logprobs["text_offset"], json::array({0, 1, 2}));
  EXPECT_EQ(logprobs["top_logprobs"][1], json({{"b", -0.25}}));

  body["stream"] = true;
  std::vector<size_t> offsets;
  for (const json& chunk : StreamChunks(PostSse(port_, "/v1/completions", body))) {
    const json& part = chunk["choices"][0]["logprobs"];
    if (part.is_null()) continue;
    for (const json& offset : part["text_offset"]) offsets.push_back(offset.get<size_t>());
  }
  EXPECT_EQ(offsets, (std::vector<size_t>{0, 1, 2}));

  json echo = {{"prompt", {"Once", "Twice"}}, {"max_tokens", 2}, {"echo", true}, {"n", 2}};
  auto echoed = PostJson(port_, "/v1/completions", echo);
  ASSERT_EQ(echoed.status, 200) << echoed.body;
  ASSERT_EQ(echoed.json["choices"].size(), 4u);
  EXPECT_EQ(echoed.json["choices"][1]["text"], "Onceab");
  EXPECT_EQ(echoed.json["choices"][2]["text"], "Twiceab");
  auto token_echo = PostJson(port_, "/v1/completions",
                             {{"prompt", {'H' + 3, 'i' + 3}}, {"max_tokens", 1}, {"echo", true}});
  EXPECT_EQ(token_echo.json["choices"][0]["text"], "Hia") << token_echo.body;
  json streamed_echo = {{"prompt", "Once"}, {"max_tokens", 2}, {"echo", true}, {"stream", true}};
  std::string text;
  for (const json& chunk : StreamChunks(PostSse(port_, "/v1/completions", streamed_echo))) {
    if (!chunk["choices"].empty()) text += chunk["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "Onceab");
  ExpectError(
      PostJson(port_, "/v1/completions", {{"prompt", "x"}, {"echo", true}, {"logprobs", 2}}), 400,
      "unsupported_parameter");
}

TEST_F(HttpServerTest, UnsupportedFieldsAnswer400NamingThem) {
  Start();
  struct Case {
    std::string path;
    json body;
    std::string param;
  };
  json tool = {{"type", "function"}, {"function", {{"name", "f"}}}};
  const Case cases[] = {
      {"/v1/chat/completions", ChatBody("hi", {{"tools", {tool}}}), "tools"},
      {"/v1/chat/completions", ChatBody("hi", {{"response_format", {{"type", "json_object"}}}}),
       "response_format"},
      {"/v1/chat/completions", ChatBody("hi", {{"logit_bias", {{"5", 1}}}}), "logit_bias"},
      {"/v1/chat/completions", ChatBody("hi", {{"no_such_field", 1}}), "no_such_field"},
      {"/v1/completions", {{"prompt", "x"}, {"suffix", "y"}}, "suffix"},
      {"/v1/completions", {{"prompt", "x"}, {"best_of", 2}}, "best_of"},
      // rtp-llm's routes follow the same rule, at the top level and inside generate_config.
      {"/generate", {{"prompt", "x"}, {"no_such_field", 1}}, "no_such_field"},
      {"/", {{"prompt", "x"}, {"max_tokens", 2}}, "max_tokens"},
      {"/generate",
       {{"prompt", "x"}, {"generate_config", {{"max_new_tokens", 2}, {"beam_width", 2}}}},
       "generate_config.beam_width"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    auto result = PostJson(port_, c.path, c.body);
    ExpectError(result, 400, "unsupported_parameter");
    EXPECT_EQ(result.json["error"]["param"], c.param);
    EXPECT_EQ(result.json["error"]["type"], "invalid_request_error");
    EXPECT_NE(result.json["error"]["message"].get<std::string>().find("not supported"),
              std::string::npos);
  }
  json robot = ChatBody("hi");
  robot["messages"][0]["role"] = "robot";
  auto result = PostJson(port_, "/v1/chat/completions", robot);
  ExpectError(result, 400, "");
  EXPECT_EQ(result.json["error"]["param"], "messages[0].role");
  EXPECT_EQ(backend_->submitted(), 0u);
}

TEST_F(HttpServerTest, ModelById) {
  Start();
  auto model = Get(port_, "/v1/models/tiny");
  ASSERT_EQ(model.status, 200) << model.body;
  EXPECT_EQ(model.json["id"], "tiny");
  EXPECT_EQ(model.json["object"], "model");
  EXPECT_EQ(model.json, Get(port_, "/v1/models").json["data"][0]);
  ExpectError(Get(port_, "/v1/models/gpt-4o"), 404, "model_not_found");
}

TEST_F(HttpServerTest, CorsOnlyForAllowedOrigins) {
  HttpServerOptions options;
  options.allowed_origins = {"http://app.example:3000"};
  options.api_keys = {KeyOfItsOwn("k")};
  Start(options);
  httplib::Client client = reprise::testing::MakeClient(port_);
  const std::string allowed = "http://app.example:3000";
  auto preflight = client.Options(
      "/v1/chat/completions", {{"Origin", allowed},
                               {"Access-Control-Request-Method", "POST"},
                               {"Access-Control-Request-Headers", "authorization,content-type"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), allowed);
  EXPECT_NE(preflight->get_header_value("Access-Control-Allow-Methods").find("POST"),
            std::string::npos);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Headers"),
            "authorization,content-type");

  auto refused = client.Options(
      "/v1/chat/completions",
      {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
  EXPECT_FALSE(refused->has_header("Access-Control-Allow-Origin"));

  std::string body = ChatBody("hi", {{"max_tokens", 2}}).dump();
  auto answer =
      client.Post("/v1/chat/completions", {{"Origin", allowed}, {"Authorization", "Bearer k"}},
                  body, "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->get_header_value("Access-Control-Allow-Origin"), allowed);
  // Errors carry it too, so that the page can read them.
  auto unauthorized =
      client.Post("/v1/chat/completions", {{"Origin", allowed}}, body, "application/json");
  ASSERT_TRUE(unauthorized);
  EXPECT_EQ(unauthorized->status, 401);
  EXPECT_EQ(unauthorized->get_header_value("Access-Control-Allow-Origin"), allowed);
  auto other = client.Post("/v1/chat/completions",
                           {{"Origin", "http://evil.example"}, {"Authorization", "Bearer k"}}, body,
                           "application/json");
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
}

TEST_F(HttpServerTest, NoCorsHeadersByDefault) {
  Start();
  httplib::Client client = reprise::testing::MakeClient(port_);
  auto answer = client.Get("/v1/models", {{"Origin", "http://app.example"}});
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
  EXPECT_FALSE(answer->has_header("Access-Control-Allow-Origin"));
  auto preflight = client.Options(
      "/v1/models", {{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "GET"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 403);
}

}  // namespace
}  // namespace reprise::server
