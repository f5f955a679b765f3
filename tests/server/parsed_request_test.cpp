// Request parsing: every field, OpenAI defaults, and a 400 naming the field for each bad value.
#include "server/parsed_request.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace reprise::server {
namespace {

using nlohmann::json;

json Chat(json extra = json::object()) {
  json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
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

TEST(ParsedRequestTest, ChatDefaults) {
  ParsedRequest request = ParseChatRequest(Chat());
  EXPECT_EQ(request.kind, ApiKind::kChat);
  EXPECT_EQ(request.model, "m");
  ASSERT_EQ(request.messages.size(), 1u);
  EXPECT_EQ(request.messages[0].role, "user");
  EXPECT_EQ(request.messages[0].content, "hi");
  EXPECT_FLOAT_EQ(request.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(request.sampling.top_p, 1.0f);
  EXPECT_EQ(request.sampling.top_k, 0);
  EXPECT_FALSE(request.max_tokens.has_value());
  EXPECT_EQ(request.n, 1);
  EXPECT_FALSE(request.stream);
  EXPECT_FALSE(request.include_usage);
  EXPECT_EQ(request.cache.priority, 35);
  EXPECT_TRUE(request.cache.task_id.empty());
}

TEST(ParsedRequestTest, ChatAllFields) {
  ParsedRequest request = ParseChatRequest(Chat({{"max_tokens", 15},
                                                 {"temperature", 0},
                                                 {"top_p", 0.5},
                                                 {"top_k", 40},
                                                 {"min_p", 0.1},
                                                 {"frequency_penalty", 1.0},
                                                 {"presence_penalty", -0.5},
                                                 {"repetition_penalty", 1.1},
                                                 {"seed", 42},
                                                 {"stop", {"\n", "END"}},
                                                 {"stream", true},
                                                 {"stream_options", {{"include_usage", true}}},
                                                 {"n", 2},
                                                 {"ignore_eos", true},
                                                 {"cache_salt", "tenant-a"},
                                                 {"task_id", 7},
                                                 {"cache_priority", 90},
                                                 {"cache_ttl_s", 60},
                                                 {"logprobs", nullptr}}));
  EXPECT_EQ(request.max_tokens, 15);
  EXPECT_FLOAT_EQ(request.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(request.sampling.top_p, 0.5f);
  EXPECT_EQ(request.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(request.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(request.sampling.frequency_penalty, 1.0f);
  EXPECT_FLOAT_EQ(request.sampling.presence_penalty, -0.5f);
  EXPECT_FLOAT_EQ(request.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(request.sampling.seed, 42u);
  EXPECT_EQ(request.sampling.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(request.sampling.ignore_eos);
  EXPECT_TRUE(request.stream);
  EXPECT_TRUE(request.include_usage);
  EXPECT_EQ(request.n, 2);
  EXPECT_EQ(request.cache.cache_salt, "tenant-a");
  EXPECT_EQ(request.cache.task_id, "7");
  EXPECT_EQ(request.cache.priority, 90);
  EXPECT_DOUBLE_EQ(request.cache.ttl_seconds, 60.0);
}

TEST(ParsedRequestTest, NullMeansUnset) {
  ParsedRequest request = ParseChatRequest(
      Chat({{"temperature", nullptr}, {"max_tokens", nullptr}, {"stop", nullptr}, {"n", nullptr}}));
  EXPECT_FLOAT_EQ(request.sampling.temperature, 1.0f);
  EXPECT_FALSE(request.max_tokens.has_value());
  EXPECT_TRUE(request.sampling.stop.empty());
}

TEST(ParsedRequestTest, MaxCompletionTokensWins) {
  EXPECT_EQ(ParseChatRequest(Chat({{"max_tokens", 5}, {"max_completion_tokens", 9}})).max_tokens,
            9);
  EXPECT_EQ(ParseChatRequest(Chat({{"max_tokens", 16.0}})).max_tokens, 16);
}

TEST(ParsedRequestTest, StringOrIntegerTaskIdAndStopString) {
  EXPECT_EQ(ParseChatRequest(Chat({{"task_id", "abc"}})).cache.task_id, "abc");
  EXPECT_EQ(ParseChatRequest(Chat({{"task_id", 1.0}})).cache.task_id, "1");
  EXPECT_EQ(ParseChatRequest(Chat({{"stop", "x"}})).sampling.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(ParseChatRequest(Chat({{"top_k", -1}})).sampling.top_k, 0);
}

TEST(ParsedRequestTest, ContentParts) {
  json body = Chat();
  body["messages"] = {
      {{"role", "system"}, {"content", nullptr}},
      {{"role", "user"},
       {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}};
  ParsedRequest request = ParseChatRequest(body);
  ASSERT_EQ(request.messages.size(), 2u);
  EXPECT_EQ(request.messages[0].content, "");
  EXPECT_EQ(request.messages[1].content, "a\nb");
  body["messages"][1]["content"] = {{{"type", "image_url"}, {"image_url", "x"}}};
  EXPECT_EQ(ChatError(body).param(), "messages[1].content");
}

TEST(ParsedRequestTest, BadValuesNameTheField) {
  struct Case {
    json extra;
    std::string param;
  };
  const Case cases[] = {
      {{{"temperature", "hot"}}, "temperature"},
      {{{"temperature", 2.5}}, "temperature"},
      {{{"temperature", -0.1}}, "temperature"},
      {{{"top_p", 0}}, "top_p"},
      {{{"top_p", 1.5}}, "top_p"},
      {{{"top_k", -2}}, "top_k"},
      {{{"top_k", 1.5}}, "top_k"},
      {{{"min_p", 2}}, "min_p"},
      {{{"frequency_penalty", 3}}, "frequency_penalty"},
      {{{"presence_penalty", -3}}, "presence_penalty"},
      {{{"repetition_penalty", 0}}, "repetition_penalty"},
      {{{"seed", "x"}}, "seed"},
      {{{"seed", 1.5}}, "seed"},
      {{{"stop", 5}}, "stop"},
      {{{"stop", {"a", 1}}}, "stop"},
      {{{"stop", json::array({"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13",
                              "14", "15", "16", "17"})}},
       "stop"},
      {{{"max_tokens", 0}}, "max_tokens"},
      {{{"max_tokens", -5}}, "max_tokens"},
      {{{"max_tokens", "10"}}, "max_tokens"},
      {{{"max_completion_tokens", true}}, "max_completion_tokens"},
      {{{"n", 0}}, "n"},
      {{{"n", 17}}, "n"},
      {{{"stream", "yes"}}, "stream"},
      {{{"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"stream", true}, {"stream_options", 1}}, "stream_options"},
      {{{"stream", true}, {"stream_options", {{"include_usage", 1}}}},
       "stream_options.include_usage"},
      {{{"ignore_eos", 1}}, "ignore_eos"},
      {{{"cache_salt", 5}}, "cache_salt"},
      {{{"task_id", 1.5}}, "task_id"},
      {{{"task_id", {1}}}, "task_id"},
      {{{"cache_priority", 101}}, "cache_priority"},
      {{{"cache_priority", -1}}, "cache_priority"},
      {{{"cache_ttl_s", -1}}, "cache_ttl_s"},
      {{{"model", 3}}, "model"},
      {{{"messages", "hi"}}, "messages"},
      {{{"messages", json::array()}}, "messages"},
      {{{"messages", {{{"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {{{"role", 1}, {"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {"hi"}}}, "messages[0]"},
      {{{"messages", {{{"role", "user"}, {"content", 5}}}}}, "messages[0].content"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.extra.dump());
    ApiError error = ChatError(Chat(c.extra));
    EXPECT_EQ(error.status(), 400);
    EXPECT_EQ(error.param(), c.param) << error.what();
    EXPECT_EQ(error.type(), "invalid_request_error");
  }
  json no_messages = {{"model", "m"}};
  EXPECT_EQ(ChatError(no_messages).param(), "messages");
}

TEST(ParsedRequestTest, ChoiceLimit) {
  // 5 prompts x 12 = 60 choices: allowed; 5 x 13 = 65: not.
  EXPECT_NO_THROW(
      ParseCompletionRequest({{"prompt", json::array({"a", "b", "c", "d", "e"})}, {"n", 12}}));
  EXPECT_THROW(
      ParseCompletionRequest({{"prompt", json::array({"a", "b", "c", "d", "e"})}, {"n", 13}}),
      ApiError);
  json seventeen = json::array();
  for (int i = 0; i < 17; ++i) seventeen.push_back("p");
  EXPECT_THROW(ParseCompletionRequest({{"prompt", seventeen}}), ApiError);
}

TEST(ParsedRequestTest, CompletionPrompts) {
  ParsedRequest one = ParseCompletionRequest({{"prompt", "Once upon"}});
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_EQ(one.prompts[0].text, "Once upon");
  EXPECT_FALSE(one.prompts[0].is_tokens);
  EXPECT_EQ(one.kind, ApiKind::kCompletion);

  ParsedRequest list = ParseCompletionRequest({{"prompt", {"a", "b"}}});
  ASSERT_EQ(list.prompts.size(), 2u);
  EXPECT_EQ(list.prompts[1].text, "b");

  ParsedRequest tokens = ParseCompletionRequest({{"prompt", {1, 2, 3}}});
  ASSERT_EQ(tokens.prompts.size(), 1u);
  EXPECT_TRUE(tokens.prompts[0].is_tokens);
  EXPECT_EQ(tokens.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));

  ParsedRequest token_lists = ParseCompletionRequest({{"prompt", {{1, 2}, {3}}}});
  ASSERT_EQ(token_lists.prompts.size(), 2u);
  EXPECT_EQ(token_lists.prompts[1].tokens, std::vector<int32_t>{3});

  for (const json& bad :
       {json{{"prompt", 5}}, json{{"prompt", json::array()}}, json{{"prompt", {"a", 1}}},
        json{{"prompt", {1, -2}}}, json{{"prompt", {1, "a"}}},
        json{{"prompt", {{1}, json::array()}}}, json{{"prompt", {true}}}, json::object()}) {
    SCOPED_TRACE(bad.dump());
    try {
      ParseCompletionRequest(bad);
      ADD_FAILURE() << "accepted";
    } catch (const ApiError& error) {
      EXPECT_EQ(error.status(), 400);
      EXPECT_EQ(error.param(), "prompt");
    }
  }
}

TEST(ParsedRequestTest, RtpGenerateShape) {
  ParsedRequest request = ParseGenerateRequest({{"prompt", "hello, what's your name"},
                                                {"generate_config",
                                                 {{"top_k", 1},
                                                  {"top_p", 0.8},
                                                  {"temperature", 0.7},
                                                  {"max_new_tokens", 100},
                                                  {"task_id", "1"},
                                                  {"random_seed", 3},
                                                  {"stop_words_str", {"\n"}},
                                                  {"repetition_penalty", 1.05}}}});
  EXPECT_EQ(request.kind, ApiKind::kRtpGenerate);
  ASSERT_EQ(request.prompts.size(), 1u);
  EXPECT_EQ(request.prompts[0].text, "hello, what's your name");
  EXPECT_EQ(request.sampling.top_k, 1);
  EXPECT_FLOAT_EQ(request.sampling.top_p, 0.8f);
  EXPECT_FLOAT_EQ(request.sampling.temperature, 0.7f);
  EXPECT_EQ(request.max_tokens, 100);
  EXPECT_EQ(request.cache.task_id, "1");
  EXPECT_EQ(request.sampling.seed, 3u);
  EXPECT_EQ(request.sampling.stop, std::vector<std::string>{"\n"});
  EXPECT_FLOAT_EQ(request.sampling.repetition_penalty, 1.05f);

  ParsedRequest plain = ParseGenerateRequest({{"prompt", "x"}});
  EXPECT_FALSE(plain.max_tokens.has_value());
  EXPECT_TRUE(plain.cache.task_id.empty());

  ParsedRequest top_level_task = ParseGenerateRequest({{"prompt", "x"}, {"task_id", 2}});
  EXPECT_EQ(top_level_task.cache.task_id, "2");

  try {
    ParseGenerateRequest({{"prompt", "x"}, {"generate_config", {{"max_new_tokens", "a"}}}});
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.param(), "generate_config.max_new_tokens");
  }
  // Every field the rtp-llm seed scripts send, and our cache fields at either level, are read;
  // any other field is refused by name.
  ParsedRequest full = ParseGenerateRequest({{"prompt", "x"},
                                             {"model", "m"},
                                             {"stream", false},
                                             {"cache_salt", "s"},
                                             {"cache_priority", 80},
                                             {"cache_ttl_s", 60},
                                             {"unknown_but_null", nullptr},
                                             {"generate_config",
                                              {{"top_k", 1},
                                               {"max_new_tokens", 100},
                                               {"task_id", "1"},
                                               {"min_p", 0.1},
                                               {"frequency_penalty", 0.5},
                                               {"presence_penalty", 0.5},
                                               {"ignore_eos", true},
                                               {"num_return_sequences", 2},
                                               {"yield_generator", true},
                                               {"cache_salt", "t"}}}});
  EXPECT_EQ(full.cache.cache_salt, "t");
  EXPECT_EQ(full.n, 2);
  EXPECT_TRUE(full.stream);
  for (const auto& [bad, param] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"prompt", "x"}, {"max_tokens", 3}}, "max_tokens"},
           {{{"prompt", "x"}, {"generate_config", {{"top_k", 1}, {"beam_width", 2}}}},
            "generate_config.beam_width"},
           {{{"prompt", "x"}, {"generate_config", {{"return_logits", true}}}},
            "generate_config.return_logits"}}) {
    SCOPED_TRACE(bad.dump());
    try {
      ParseGenerateRequest(bad);
      ADD_FAILURE() << "accepted";
    } catch (const ApiError& error) {
      EXPECT_EQ(error.status(), 400);
      EXPECT_EQ(error.code(), "unsupported_parameter");
      EXPECT_EQ(error.param(), param);
    }
  }
  try {
    ParseGenerateRequest({{"prompt", "x"}, {"generate_config", 3}});
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.param(), "generate_config");
  }
}

TEST(ParsedRequestTest, JsonBody) {
  EXPECT_EQ(ParseJsonBody(R"({"a": 1})")["a"], 1);
  for (const char* bad : {"", "{", "[1, 2]", "\"text\"", "{\"a\": }", "nul"}) {
    SCOPED_TRACE(bad);
    try {
      ParseJsonBody(bad);
      ADD_FAILURE() << "accepted";
    } catch (const ApiError& error) {
      EXPECT_EQ(error.status(), 400);
      EXPECT_EQ(error.code(), "invalid_json");
    }
  }
}

TEST(ParsedRequestTest, ErrorBodyShape) {
  json body = ApiError::BadRequest("bad", "temperature").ToJson();
  EXPECT_EQ(body["error"]["message"], "bad");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "temperature");
  EXPECT_TRUE(body["error"]["code"].is_null());
  json not_found = ApiError::NotFound("no model", "model_not_found").ToJson();
  EXPECT_EQ(not_found["error"]["code"], "model_not_found");
  EXPECT_TRUE(not_found["error"]["param"].is_null());
}

// The OpenAI fields beyond sampling: honoured, accepted at their neutral value, or refused.

json Completion(json extra = json::object()) {
  json body = {{"model", "m"}, {"prompt", "Once"}};
  body.update(extra);
  return body;
}

void ExpectUnsupported(const ApiError& error, const std::string& param) {
  EXPECT_EQ(error.status(), 400);
  EXPECT_EQ(error.type(), "invalid_request_error");
  EXPECT_EQ(error.param(), param) << error.what();
  EXPECT_EQ(error.code(), "unsupported_parameter") << error.what();
  EXPECT_NE(std::string(error.what()).find("not supported"), std::string::npos) << error.what();
}

TEST(ParsedRequestTest, UnknownFieldsAreRefusedNotIgnored) {
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

TEST(ParsedRequestTest, UnimplementedFeaturesAreRefusedUnlessNeutral) {
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

TEST(ParsedRequestTest, RolesAreOpenAisOnly) {
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

TEST(ParsedRequestTest, ChatLogprobs) {
  EXPECT_FALSE(ParseChatRequest(Chat()).sampling.logprobs.has_value());
  EXPECT_FALSE(ParseChatRequest(Chat({{"logprobs", false}})).sampling.logprobs.has_value());
  EXPECT_EQ(ParseChatRequest(Chat({{"logprobs", true}})).sampling.logprobs, 0);
  EXPECT_EQ(ParseChatRequest(Chat({{"logprobs", true}, {"top_logprobs", 20}})).sampling.logprobs,
            20);
  EXPECT_EQ(ChatError(Chat({{"top_logprobs", 2}})).param(), "top_logprobs");
  EXPECT_EQ(ChatError(Chat({{"logprobs", true}, {"top_logprobs", 21}})).param(), "top_logprobs");
  EXPECT_EQ(ChatError(Chat({{"logprobs", 3}})).param(), "logprobs");
}

TEST(ParsedRequestTest, CompletionLogprobsAndEcho) {
  EXPECT_EQ(ParseCompletionRequest(Completion({{"logprobs", 0}})).sampling.logprobs, 0);
  EXPECT_EQ(ParseCompletionRequest(Completion({{"logprobs", 5}})).sampling.logprobs, 5);
  EXPECT_EQ(CompletionError(Completion({{"logprobs", 6}})).param(), "logprobs");
  EXPECT_EQ(CompletionError(Completion({{"logprobs", true}})).param(), "logprobs");
  EXPECT_TRUE(ParseCompletionRequest(Completion({{"echo", true}})).echo);
  EXPECT_FALSE(ParseCompletionRequest(Completion()).echo);
  ExpectUnsupported(CompletionError(Completion({{"echo", true}, {"logprobs", 1}})), "echo");
}

TEST(ParsedRequestTest, PromptCacheKeyAndRetention) {
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
