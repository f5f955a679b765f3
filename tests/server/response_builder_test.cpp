// Response bodies and SSE framing: OpenAI shapes, usage with cached_tokens everywhere, reuse_len,
// rtp-llm's response/aux_info.
#include "server/response_builder.h"

#include <gtest/gtest.h>

#include "server/sse.h"

namespace reprise::server {
namespace {

using nlohmann::json;

ChoiceResult Choice(size_t index, std::string text) {
  ChoiceResult choice;
  choice.index = index;
  choice.text = std::move(text);
  choice.finish_reason = "length";
  choice.prompt_tokens = 100;
  choice.cached_tokens = 64;
  choice.completion_tokens = 5;
  choice.ttft_seconds = 0.010;
  choice.total_seconds = 0.050;
  return choice;
}

TEST(ResponseBuilderTest, UsageAlwaysHasCachedTokens) {
  json usage = UsageJson({10, 3, 0, {}});
  EXPECT_EQ(usage["prompt_tokens"], 10);
  EXPECT_EQ(usage["completion_tokens"], 3);
  EXPECT_EQ(usage["total_tokens"], 13);
  ASSERT_TRUE(usage["prompt_tokens_details"]["cached_tokens"].is_number_integer());
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(ResponseBuilderTest, ChatCompletion) {
  ResponseBuilder builder(ApiKind::kChat, "chatcmpl-1", 1700000000, "tiny");
  json body = builder.Full({Choice(0, "Hello")}, {100, 5, 64, {}});
  EXPECT_EQ(body["id"], "chatcmpl-1");
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["created"], 1700000000);
  EXPECT_EQ(body["model"], "tiny");
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 64);
  EXPECT_EQ(body["reuse_len"], 64);
}

TEST(ResponseBuilderTest, TextCompletion) {
  ResponseBuilder builder(ApiKind::kCompletion, "cmpl-1", 1, "tiny");
  json body = builder.Full({Choice(0, "a"), Choice(1, "b")}, {100, 10, 64, {}});
  EXPECT_EQ(body["object"], "text_completion");
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][1]["text"], "b");
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_FALSE(body["choices"][0].contains("message"));
}

TEST(ResponseBuilderTest, ChatChunks) {
  ResponseBuilder builder(ApiKind::kChat, "chatcmpl-2", 1, "tiny");
  json role = builder.RoleChunk(0);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());

  json delta = builder.DeltaChunk(0, "Hel");
  EXPECT_EQ(delta["choices"][0]["delta"]["content"], "Hel");
  EXPECT_FALSE(delta.contains("usage"));

  UsageCounts usage{100, 5, 64, {}};
  json last = builder.FinishChunk(0, "stop", &usage);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["usage"]["prompt_tokens_details"]["cached_tokens"], 64);
  EXPECT_EQ(last["reuse_len"], 64);
  EXPECT_FALSE(builder.FinishChunk(0, "stop", nullptr).contains("usage"));

  json usage_chunk = builder.UsageChunk(usage);
  EXPECT_TRUE(usage_chunk["choices"].is_array());
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["total_tokens"], 105);
  EXPECT_EQ(usage_chunk["reuse_len"], 64);
}

TEST(ResponseBuilderTest, CompletionChunks) {
  ResponseBuilder builder(ApiKind::kCompletion, "cmpl-2", 1, "tiny");
  json delta = builder.DeltaChunk(1, "xy");
  EXPECT_EQ(delta["object"], "text_completion");
  EXPECT_EQ(delta["choices"][0]["text"], "xy");
  EXPECT_EQ(delta["choices"][0]["index"], 1);
  EXPECT_EQ(builder.FinishChunk(1, "length", nullptr)["choices"][0]["text"], "");
}

TEST(ResponseBuilderTest, RtpGenerate) {
  ResponseBuilder builder(ApiKind::kRtpGenerate, "gen-1", 1, "tiny");
  json body = builder.Full({Choice(0, "I am Reprise")}, {100, 5, 64, {}});
  EXPECT_EQ(body["response"], "I am Reprise");
  EXPECT_EQ(body["finished"], true);
  EXPECT_EQ(body["aux_info"]["input_len"], 100);
  EXPECT_EQ(body["aux_info"]["output_len"], 5);
  EXPECT_EQ(body["aux_info"]["reuse_len"], 64);
  EXPECT_DOUBLE_EQ(body["aux_info"]["cost_time_ms"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(body["aux_info"]["first_token_cost_time_ms"].get<double>(), 10.0);
  EXPECT_EQ(body["aux_info"]["finish_reason"], "length");

  json batch = builder.Full({Choice(0, "a"), Choice(1, "b")}, {200, 10, 128, {}});
  ASSERT_TRUE(batch["response"].is_array());
  EXPECT_EQ(batch["response"][1], "b");
  EXPECT_EQ(batch["aux_info"][1]["reuse_len"], 64);

  json event = builder.RtpStreamEvent(Choice(0, "I am"), false);
  EXPECT_EQ(event["response"], "I am");
  EXPECT_EQ(event["finished"], false);
}

TEST(SseTest, Framing) {
  EXPECT_EQ(SseData(json{{"a", "x\ny"}}), "data: {\"a\":\"x\\ny\"}\n\n");
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
  // Invalid UTF-8 never throws: it is replaced.
  std::string bad = "ok\xff";
  EXPECT_NO_THROW(SseData(json{{"t", bad}}));
  EXPECT_NE(JsonText(json{{"t", bad}}).find("\xEF\xBF\xBD"), std::string::npos);
}

TEST(ResponseBuilderTest, FinishReasonText) {
  EXPECT_STREQ(FinishReasonText(FinishReason::kStop), "stop");
  EXPECT_STREQ(FinishReasonText(FinishReason::kLength), "length");
  EXPECT_STREQ(FinishReasonText(FinishReason::kCancelled), "cancelled");
  EXPECT_STREQ(FinishReasonText(FinishReason::kError), "error");
}

TokenLogprob Token(int32_t id, float logprob, std::string bytes) {
  TokenLogprob token;
  token.token = id;
  token.logprob = logprob;
  token.bytes = std::move(bytes);
  return token;
}

// "H" then "\xC3\xA9" (é), each with the runner-up.
std::vector<SampledLogprobs> TwoTokens() {
  std::vector<SampledLogprobs> entries(2);
  entries[0].sampled = Token(72, -0.5f, "H");
  entries[0].top = {entries[0].sampled, Token(105, -1.5f, "i")};
  entries[1].sampled = Token(200, -0.25f, "\xC3\xA9");
  entries[1].top = {entries[1].sampled, Token(33, -2.0f, "!")};
  return entries;
}

TEST(ResponseBuilderTest, ChatLogprobs) {
  ResponseBuilder builder(ApiKind::kChat, "chatcmpl-1", 1, "tiny");
  ChoiceResult choice = Choice(0, "H\xC3\xA9");
  choice.logprobs = TwoTokens();
  json body = builder.Full({choice, Choice(1, "x")}, {100, 5, 64, {}});
  const json& logprobs = body["choices"][0]["logprobs"];
  ASSERT_TRUE(logprobs["content"].is_array()) << body.dump();
  ASSERT_EQ(logprobs["content"].size(), 2u);
  const json& second = logprobs["content"][1];
  EXPECT_EQ(second["token"], "\xC3\xA9");
  EXPECT_FLOAT_EQ(second["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(second["bytes"], json::array({0xC3, 0xA9}));
  ASSERT_EQ(second["top_logprobs"].size(), 2u);
  EXPECT_EQ(second["top_logprobs"][1]["token"], "!");
  EXPECT_EQ(second["top_logprobs"][1]["bytes"], json::array({33}));
  EXPECT_TRUE(logprobs["refusal"].is_null());
  // A choice that did not ask has null, as before.
  EXPECT_TRUE(body["choices"][1]["logprobs"].is_null());

  std::vector<SampledLogprobs> one = {TwoTokens()[0]};
  json chunk = builder.DeltaChunk(0, "H", &one, 0);
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["content"][0]["token"], "H");
  EXPECT_TRUE(builder.DeltaChunk(0, "H")["choices"][0]["logprobs"].is_null());
}

TEST(ResponseBuilderTest, CompletionLogprobs) {
  ResponseBuilder builder(ApiKind::kCompletion, "cmpl-1", 1, "tiny");
  ChoiceResult choice = Choice(0, "H\xC3\xA9");
  choice.logprobs = TwoTokens();
  json logprobs = builder.Full({choice}, {100, 5, 64, {}})["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"], json::array({"H", "\xC3\xA9"}));
  EXPECT_FLOAT_EQ(logprobs["token_logprobs"][0].get<float>(), -0.5f);
  EXPECT_EQ(logprobs["text_offset"], json::array({0, 1}));
  ASSERT_EQ(logprobs["top_logprobs"].size(), 2u);
  EXPECT_FLOAT_EQ(logprobs["top_logprobs"][0]["i"].get<float>(), -1.5f);
  EXPECT_EQ(logprobs["top_logprobs"][0].size(), 2u);  // "H" once: sampled and on top
  // Streamed: offsets continue from where the text so far ends.
  std::vector<SampledLogprobs> second = {TwoTokens()[1]};
  EXPECT_EQ(LogprobsTextBytes(TwoTokens()), 3u);
  json chunk = builder.DeltaChunk(0, "\xC3\xA9", &second, 1);
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["text_offset"], json::array({1}));
  EXPECT_EQ(chunk["choices"][0]["text"], "\xC3\xA9");
}

}  // namespace
}  // namespace reprise::server
