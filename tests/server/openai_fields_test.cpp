// The OpenAI fields beyond sampling: every field honoured, accepted at its neutral value, or
// refused with a 400 that names it; logprobs, echo, roles and the prompt cache fields.
#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/parsed_request.h"

namespace reprise::server {
namespace {

using nlohmann::json;

json Chat(json extra = json::object()) {
  json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  body.update(extra);
  return body;
}

json Completion(json extra = json::object()) {
  json body = {{"model", "m"}, {"prompt", "Once"}};
  body.update(extra);
  return body;
}

// The ApiError that parsing `body` throws, or a failure.
template <typename Parse>
ApiError ErrorOf(Parse parse, const json& body) {
  try {
    parse(body);
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "no error for " << body.dump();
  return ApiError::Internal("none");
}

ApiError ChatError(const json& body) { return ErrorOf(ParseChatRequest, body); }
ApiError CompletionError(const json& body) { return ErrorOf(ParseCompletionRequest, body); }

void ExpectUnsupported(const ApiError& error, const std::string& param) {
  EXPECT_EQ(error.status(), 400);
  EXPECT_EQ(error.type(), "invalid_request_error");
  EXPECT_EQ(error.param(), param) << error.what();
  EXPECT_EQ(error.code(), "unsupported_parameter") << error.what();
  EXPECT_NE(std::string(error.what()).find("not supported"), std::string::npos) << error.what();
}

TEST(OpenAiFieldsTest, UnknownFieldsAreRefusedNotIgnored) {
  ExpectUnsupported(ChatError(Chat({{"temprature", 0.5}})), "temprature");
  ExpectUnsupported(CompletionError(Completion({{"messages", json::array()}})), "messages");
  ExpectUnsupported(ChatError(Chat({{"echo", true}})), "echo");  // completions only
  ExpectUnsupported(CompletionError(Completion({{"top_logprobs", 2}})), "top_logprobs");
  ExpectUnsupported(ChatError(Chat({{"stream", true}, {"stream_options", {{"chunk", 1}}}})),
                    "stream_options.chunk");
  json named = Chat();
  named["messages"][0]["name"] = "bob";
  ExpectUnsupported(ChatError(named), "messages[0].name");
  // null is "not sent", for unknown fields as for known ones.
  EXPECT_NO_THROW(ParseChatRequest(Chat({{"some_future_field", nullptr}})));
}

TEST(OpenAiFieldsTest, UnimplementedFeaturesAreRefusedUnlessNeutral) {
  json tool = {{"type", "function"}, {"function", {{"name", "f"}}}};
  ExpectUnsupported(ChatError(Chat({{"tools", {tool}}})), "tools");
  ExpectUnsupported(ChatError(Chat({{"tool_choice", "required"}})), "tool_choice");
  ExpectUnsupported(ChatError(Chat({{"tool_choice", {{"type", "function"}}}})), "tool_choice");
  ExpectUnsupported(ChatError(Chat({{"functions", {{{"name", "f"}}}}})), "functions");
  ExpectUnsupported(ChatError(Chat({{"function_call", {{"name", "f"}}}})), "function_call");
  ExpectUnsupported(ChatError(Chat({{"response_format", {{"type", "json_object"}}}})),
                    "response_format");
  ExpectUnsupported(ChatError(Chat({{"response_format", {{"type", "json_schema"}}}})),
                    "response_format");
  ExpectUnsupported(ChatError(Chat({{"logit_bias", {{"50256", -100}}}})), "logit_bias");
  ExpectUnsupported(CompletionError(Completion({{"logit_bias", {{"1", 5}}}})), "logit_bias");
  ExpectUnsupported(ChatError(Chat({{"store", true}})), "store");
  ExpectUnsupported(ChatError(Chat({{"modalities", {"text", "audio"}}})), "modalities");
  ExpectUnsupported(ChatError(Chat({{"service_tier", "flex"}})), "service_tier");
  ExpectUnsupported(CompletionError(Completion({{"suffix", "end"}})), "suffix");
  ExpectUnsupported(CompletionError(Completion({{"best_of", 3}})), "best_of");
  ExpectUnsupported(CompletionError(Completion({{"n", 2}, {"best_of", 3}})), "best_of");
  EXPECT_EQ(CompletionError(Completion({{"n", 3}, {"best_of", 2}})).param(), "best_of");
  json with_calls = Chat();
  with_calls["messages"].push_back(
      {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {{{"id", "c1"}}}}});
  ExpectUnsupported(ChatError(with_calls), "messages[1].tool_calls");

  // Neutral values change nothing and are accepted (clients send some of them by default).
  json neutral =
      Chat({{"tools", json::array()},
            {"tool_choice", "none"},
            {"functions", json::array()},
            {"function_call", "auto"},
            {"parallel_tool_calls", true},
            {"response_format", {{"type", "text"}}},
            {"logit_bias", json::object()},
            {"store", false},
            {"metadata", {{"k", "v"}}},
            {"service_tier", "auto"},
            {"modalities", {"text"}},
            {"user", "u-1"},
            {"safety_identifier", "s-1"},
            {"seed", 3},
            {"presence_penalty", 0.5},
            {"stream", true},
            {"stream_options", {{"include_usage", true}, {"include_obfuscation", false}}}});
  ParsedRequest request = ParseChatRequest(neutral);
  EXPECT_EQ(request.sampling.seed, 3u);
  EXPECT_FLOAT_EQ(request.sampling.presence_penalty, 0.5f);
  EXPECT_TRUE(request.include_usage);
  EXPECT_NO_THROW(ParseCompletionRequest(
      Completion({{"suffix", ""}, {"best_of", 2}, {"n", 2}, {"user", "u"}})));
}

TEST(OpenAiFieldsTest, RolesAreOpenAisOnly) {
  for (const char* role : {"system", "developer", "user", "assistant", "tool"}) {
    json body = Chat();
    body["messages"][0]["role"] = role;
    if (std::string(role) == "tool") body["messages"][0]["tool_call_id"] = "c1";
    EXPECT_EQ(ParseChatRequest(body).messages[0].role, role);
  }
  for (const char* role : {"robot", "function", "User"}) {
    json body = Chat();
    body["messages"][0]["role"] = role;
    ApiError error = ChatError(body);
    EXPECT_EQ(error.status(), 400);
    EXPECT_EQ(error.param(), "messages[0].role");
    EXPECT_NE(std::string(error.what()).find(role), std::string::npos) << error.what();
  }
}

TEST(OpenAiFieldsTest, ChatLogprobs) {
  EXPECT_FALSE(ParseChatRequest(Chat()).sampling.logprobs.has_value());
  EXPECT_FALSE(ParseChatRequest(Chat({{"logprobs", false}})).sampling.logprobs.has_value());
  EXPECT_EQ(ParseChatRequest(Chat({{"logprobs", true}})).sampling.logprobs, 0);
  EXPECT_EQ(ParseChatRequest(Chat({{"logprobs", true}, {"top_logprobs", 20}})).sampling.logprobs,
            20);
  EXPECT_EQ(ChatError(Chat({{"top_logprobs", 2}})).param(), "top_logprobs");
  EXPECT_EQ(ChatError(Chat({{"logprobs", true}, {"top_logprobs", 21}})).param(), "top_logprobs");
  EXPECT_EQ(ChatError(Chat({{"logprobs", 3}})).param(), "logprobs");
}

TEST(OpenAiFieldsTest, CompletionLogprobsAndEcho) {
  EXPECT_EQ(ParseCompletionRequest(Completion({{"logprobs", 0}})).sampling.logprobs, 0);
  EXPECT_EQ(ParseCompletionRequest(Completion({{"logprobs", 5}})).sampling.logprobs, 5);
  EXPECT_EQ(CompletionError(Completion({{"logprobs", 6}})).param(), "logprobs");
  EXPECT_EQ(CompletionError(Completion({{"logprobs", true}})).param(), "logprobs");
  EXPECT_TRUE(ParseCompletionRequest(Completion({{"echo", true}})).echo);
  EXPECT_FALSE(ParseCompletionRequest(Completion()).echo);
  ExpectUnsupported(CompletionError(Completion({{"echo", true}, {"logprobs", 1}})), "echo");
}

TEST(OpenAiFieldsTest, PromptCacheKeyAndRetention) {
  ParsedRequest keyed = ParseChatRequest(Chat({{"prompt_cache_key", "user-42"}}));
  EXPECT_EQ(keyed.prompt_cache_key, "user-42");
  EXPECT_DOUBLE_EQ(keyed.cache.ttl_seconds, 0.0);
  EXPECT_DOUBLE_EQ(ParseChatRequest(Chat({{"prompt_cache_retention", "24h"}})).cache.ttl_seconds,
                   86400.0);
  EXPECT_DOUBLE_EQ(ParseCompletionRequest(Completion({{"prompt_cache_retention", "in_memory"}}))
                       .cache.ttl_seconds,
                   0.0);
  EXPECT_EQ(ChatError(Chat({{"prompt_cache_retention", "7d"}})).param(), "prompt_cache_retention");
  EXPECT_EQ(ChatError(Chat({{"prompt_cache_retention", "24h"}, {"cache_ttl_s", 60}})).param(),
            "prompt_cache_retention");
  EXPECT_EQ(ChatError(Chat({{"prompt_cache_key", 5}})).param(), "prompt_cache_key");
}

}  // namespace
}  // namespace reprise::server
