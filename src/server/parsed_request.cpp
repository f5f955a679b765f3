#include "server/parsed_request.h"

#include <fmt/format.h>

#include <limits>
#include <string_view>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace reprise::server {
namespace {

constexpr int64_t kMaxTokensLimit = std::numeric_limits<int32_t>::max();

// The sampling and cache fields that the OpenAI routes share.
void ReadSampling(const JsonFields& fields, ParsedRequest& request) {
  SamplingParams& sampling = request.sampling;
  if (auto v = fields.Number("temperature", 0.0, 2.0))
    sampling.temperature = static_cast<float>(*v);
  if (auto v = fields.Number("top_p", 0.0, 1.0, /*min_exclusive=*/true)) {
    sampling.top_p = static_cast<float>(*v);
  }
  // -1 and 0 both mean "no limit" (vLLM's convention and ours).
  if (auto v = fields.Int("top_k", -1, 1 << 30)) sampling.top_k = *v < 0 ? 0 : static_cast<int>(*v);
  if (auto v = fields.Number("min_p", 0.0, 1.0)) sampling.min_p = static_cast<float>(*v);
  if (auto v = fields.Number("frequency_penalty", -2.0, 2.0)) {
    sampling.frequency_penalty = static_cast<float>(*v);
  }
  if (auto v = fields.Number("presence_penalty", -2.0, 2.0)) {
    sampling.presence_penalty = static_cast<float>(*v);
  }
  if (auto v = fields.Number("repetition_penalty", 0.0, 10.0, /*min_exclusive=*/true)) {
    sampling.repetition_penalty = static_cast<float>(*v);
  }
  if (auto v = fields.Int("seed", std::numeric_limits<int64_t>::min(),
                          std::numeric_limits<int64_t>::max())) {
    sampling.seed = static_cast<uint64_t>(*v);
  }
  if (auto v = fields.StringOrStringList("stop", kMaxStopStrings)) {
    for (std::string& stop : *v) {
      if (!stop.empty()) sampling.stop.push_back(std::move(stop));
    }
  }
  if (auto v = fields.Bool("ignore_eos")) sampling.ignore_eos = *v;
}

void ReadCacheOptions(const JsonFields& fields, CacheOptions& cache) {
  if (auto v = fields.String("cache_salt")) cache.cache_salt = *v;
  if (auto v = fields.StringOrInteger("task_id")) cache.task_id = *v;
  if (auto v = fields.Int("cache_priority", 0, 100)) cache.priority = static_cast<int>(*v);
  // A year is far beyond any useful retention; larger values are most likely a unit mistake.
  if (auto v = fields.Number("cache_ttl_s", 0.0, 365.0 * 24 * 3600)) cache.ttl_seconds = *v;
}

[[noreturn]] void Unsupported(const std::string& param, std::string_view detail) {
  throw ApiError::BadRequest(fmt::format("'{}' is not supported by this server: {}", param, detail),
                             param, "unsupported_parameter");
}

// A field that is accepted at its neutral value only: `neutral` says whether `value` is one.
template <typename IsNeutral>
void NeutralOnly(const JsonFields& fields, std::string_view name, std::string_view detail,
                 IsNeutral neutral) {
  const nlohmann::json* value = fields.Find(name);
  if (value && !neutral(*value)) Unsupported(fields.Param(name), detail);
}

bool IsEmptyList(const nlohmann::json& value) { return value.is_array() && value.empty(); }

// OpenAI's prompt caching fields: the key is a routing hint, the retention maps to cache_ttl_s.
void ReadPromptCacheFields(const JsonFields& fields, ParsedRequest& request) {
  if (auto v = fields.String("prompt_cache_key")) request.prompt_cache_key = *v;
  if (auto v = fields.String("prompt_cache_retention")) {
    // "in-memory" is the spelling of older OpenAI SDKs.
    if (*v == "24h") {
      if (fields.Find("cache_ttl_s")) {
        throw ApiError::BadRequest(
            "'prompt_cache_retention' and 'cache_ttl_s' both set the cache TTL; send one",
            "prompt_cache_retention");
      }
      request.cache.ttl_seconds = kExtendedRetentionSeconds;
    } else if (*v != "in_memory" && *v != "in-memory") {
      throw ApiError::BadRequest(
          fmt::format("'prompt_cache_retention' must be \"in_memory\" or \"24h\", got \"{}\"", *v),
          "prompt_cache_retention");
    }
  }
}

// The fields each OpenAI route reads: any other is refused.
constexpr std::string_view kCommonFields[] = {"model",
                                              "stream",
                                              "stream_options",
                                              "n",
                                              "max_tokens",
                                              "temperature",
                                              "top_p",
                                              "top_k",
                                              "min_p",
                                              "frequency_penalty",
                                              "presence_penalty",
                                              "repetition_penalty",
                                              "seed",
                                              "stop",
                                              "ignore_eos",
                                              "logprobs",
                                              "logit_bias",
                                              "user",
                                              "safety_identifier",
                                              "cache_salt",
                                              "task_id",
                                              "cache_priority",
                                              "cache_ttl_s",
                                              "prompt_cache_key",
                                              "prompt_cache_retention"};
constexpr std::string_view kChatFields[] = {
    "messages",  "max_completion_tokens", "top_logprobs",        "tools",           "tool_choice",
    "functions", "function_call",         "parallel_tool_calls", "response_format", "store",
    "metadata",  "service_tier",          "modalities"};
constexpr std::string_view kCompletionFields[] = {"prompt", "echo", "suffix", "best_of"};
constexpr std::string_view kMessageFields[] = {"role",          "content",      "tool_calls",
                                               "function_call", "tool_call_id", "refusal"};
constexpr std::string_view kStreamOptionFields[] = {"include_usage", "include_obfuscation"};
// rtp-llm's request: the top level and its generate_config; our cache fields are read at both.
constexpr std::string_view kCacheFields[] = {"cache_salt", "task_id", "cache_priority",
                                             "cache_ttl_s"};
constexpr std::string_view kGenerateFields[] = {"prompt", "model", "stream", "generate_config"};
constexpr std::string_view kGenerateConfigFields[] = {"max_new_tokens",
                                                      "temperature",
                                                      "top_p",
                                                      "top_k",
                                                      "min_p",
                                                      "repetition_penalty",
                                                      "frequency_penalty",
                                                      "presence_penalty",
                                                      "random_seed",
                                                      "stop_words_str",
                                                      "ignore_eos",
                                                      "num_return_sequences",
                                                      "yield_generator"};

void ReadCommon(const JsonFields& fields, ParsedRequest& request) {
  if (auto v = fields.String("model")) request.model = *v;
  ReadSampling(fields, request);
  ReadCacheOptions(fields, request.cache);
  ReadPromptCacheFields(fields, request);
  if (auto v = fields.Int("n", 1, kMaxChoicesPerPrompt)) request.n = static_cast<int>(*v);
  if (auto v = fields.Bool("stream")) request.stream = *v;
  if (const nlohmann::json* options = fields.Object("stream_options")) {
    if (!request.stream) {
      throw ApiError::BadRequest("'stream_options' is only allowed when 'stream' is true",
                                 "stream_options");
    }
    JsonFields option_fields(*options, "stream_options.");
    // include_obfuscation pads events against length side channels on the open internet; it
    // changes no content, and this server adds no padding.
    option_fields.RefuseUnknown(kStreamOptionFields);
    if (auto v = option_fields.Bool("include_usage")) request.include_usage = *v;
    option_fields.Bool("include_obfuscation");
  }
  // End-user identifiers for abuse monitoring: they change nothing in the answer.
  fields.String("user");
  fields.String("safety_identifier");
  NeutralOnly(fields, "logit_bias", "token biases are not applied",
              [](const nlohmann::json& v) { return v.is_object() && v.empty(); });
}

std::string MessageContent(const nlohmann::json& content, size_t index) {
  std::string param = fmt::format("messages[{}].content", index);
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    throw ApiError::BadRequest(fmt::format("'{}' must be a string or a list of parts, got {}",
                                           param, JsonTypeName(content)),
                               param);
  }
  // Text parts are joined with newlines, as vLLM does.
  std::string text;
  bool first = true;
  for (const nlohmann::json& part : content) {
    if (!part.is_object()) {
      throw ApiError::BadRequest(fmt::format("each part of '{}' must be an object", param), param);
    }
    auto type = part.find("type");
    auto part_text = part.find("text");
    if (type == part.end() || !type->is_string() || *type != "text" || part_text == part.end() ||
        !part_text->is_string()) {
      throw ApiError::BadRequest(
          fmt::format("'{}': only parts of the form {{\"type\": \"text\", \"text\": ...}} are "
                      "supported",
                      param),
          param);
    }
    if (!first) text += '\n';
    text += part_text->get<std::string>();
    first = false;
  }
  return text;
}

std::vector<Engine::ChatMessage> ReadMessages(const JsonFields& fields) {
  const nlohmann::json* messages = fields.Find("messages");
  if (!messages) throw ApiError::BadRequest("'messages' is required", "messages");
  if (!messages->is_array() || messages->empty()) {
    throw ApiError::BadRequest("'messages' must be a non-empty list of messages", "messages");
  }
  std::vector<Engine::ChatMessage> result;
  for (size_t i = 0; i < messages->size(); ++i) {
    const nlohmann::json& message = (*messages)[i];
    JsonFields message_fields(message, fmt::format("messages[{}].", i));
    std::optional<std::string> role = message_fields.String("role");
    if (!role || role->empty()) {
      throw ApiError::BadRequest(fmt::format("'messages[{}].role' is required", i),
                                 message_fields.Param("role"));
    }
    // OpenAI's roles; its deprecated "function" goes with function calling, which is refused.
    if (*role != "system" && *role != "developer" && *role != "user" && *role != "assistant" &&
        *role != "tool") {
      throw ApiError::BadRequest(
          fmt::format("'messages[{}].role' must be one of system, developer, user, assistant or "
                      "tool, got '{}'",
                      i, *role),
          message_fields.Param("role"));
    }
    // A chat template sees role and content only; what it cannot show is refused.
    message_fields.RefuseUnknown(kMessageFields);
    NeutralOnly(message_fields, "tool_calls", "no tool calling", IsEmptyList);
    if (message_fields.Find("function_call")) {
      Unsupported(message_fields.Param("function_call"), "no function calling");
    }
    // The id of the call a tool message answers: with no tool calls here, nothing refers to it.
    message_fields.String("tool_call_id");
    message_fields.String("refusal");
    auto content = message.find("content");
    result.push_back({*role, content == message.end() ? "" : MessageContent(*content, i)});
  }
  return result;
}

std::vector<int32_t> ReadTokenList(const nlohmann::json& list, const std::string& param) {
  std::vector<int32_t> tokens;
  tokens.reserve(list.size());
  for (const nlohmann::json& token : list) {
    if (!token.is_number_integer() || token.get<int64_t>() < 0 ||
        token.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      throw ApiError::BadRequest(
          fmt::format("'{}' must hold non-negative integer token ids", param), param);
    }
    tokens.push_back(static_cast<int32_t>(token.get<int64_t>()));
  }
  return tokens;
}

// "prompt": a string, a list of strings, a list of token ids, or a list of token-id lists.
std::vector<PromptInput> ReadPrompts(const JsonFields& fields, bool allow_tokens) {
  const nlohmann::json* prompt = fields.Find("prompt");
  if (!prompt) throw ApiError::BadRequest("'prompt' is required", "prompt");
  std::vector<PromptInput> result;
  auto too_many = [&](size_t count) {
    if (count > kMaxPromptsPerRequest) {
      throw ApiError::BadRequest(fmt::format("'prompt' holds {} prompts; at most {} are allowed",
                                             count, kMaxPromptsPerRequest),
                                 "prompt");
    }
  };
  if (prompt->is_string()) {
    result.push_back({prompt->get<std::string>(), {}, false});
  } else if (prompt->is_array() && !prompt->empty()) {
    const nlohmann::json& first = prompt->front();
    if (first.is_string()) {
      too_many(prompt->size());
      for (const nlohmann::json& item : *prompt) {
        if (!item.is_string()) {
          throw ApiError::BadRequest("'prompt' must not mix strings and other values", "prompt");
        }
        result.push_back({item.get<std::string>(), {}, false});
      }
    } else if (allow_tokens && first.is_number()) {
      result.push_back({"", ReadTokenList(*prompt, "prompt"), true});
    } else if (allow_tokens && first.is_array()) {
      too_many(prompt->size());
      for (const nlohmann::json& item : *prompt) {
        if (!item.is_array() || item.empty()) {
          throw ApiError::BadRequest("'prompt' must be a list of non-empty token-id lists",
                                     "prompt");
        }
        result.push_back({"", ReadTokenList(item, "prompt"), true});
      }
    } else {
      throw ApiError::BadRequest(allow_tokens
                                     ? "'prompt' must be a string, a list of strings, or token ids"
                                     : "'prompt' must be a string or a list of strings",
                                 "prompt");
    }
  } else {
    throw ApiError::BadRequest(
        fmt::format("'prompt' must be a string or a non-empty list, got {}",
                    prompt->is_array() ? "an empty list" : JsonTypeName(*prompt)),
        "prompt");
  }
  return result;
}

bool IsNoneOrAuto(const nlohmann::json& value) {
  return value.is_string() && (value == "none" || value == "auto");
}

void ReadChatOnlyFields(const JsonFields& fields, ParsedRequest& request) {
  std::optional<bool> logprobs = fields.Bool("logprobs");
  std::optional<int64_t> top = fields.Int("top_logprobs", 0, kMaxTopLogprobs);
  if (top && !logprobs.value_or(false)) {
    throw ApiError::BadRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  }
  if (logprobs.value_or(false)) request.sampling.logprobs = static_cast<int>(top.value_or(0));
  // Tools and functions: accepted when there are none to call.
  NeutralOnly(fields, "tools", "no tool calling", IsEmptyList);
  NeutralOnly(fields, "functions", "no function calling", IsEmptyList);
  NeutralOnly(fields, "tool_choice", "no tool calling (only \"none\" or \"auto\")", IsNoneOrAuto);
  NeutralOnly(fields, "function_call", "no function calling (only \"none\" or \"auto\")",
              IsNoneOrAuto);
  fields.Bool("parallel_tool_calls");  // says how tools are called: none are
  NeutralOnly(fields, "response_format", "only {\"type\": \"text\"} (no JSON mode or schema)",
              [](const nlohmann::json& v) {
                return v.is_object() && v.size() == 1 && v.contains("type") && v["type"] == "text";
              });
  NeutralOnly(fields, "store", "completions are not stored (only false)",
              [](const nlohmann::json& v) { return v == false; });
  fields.Object("metadata");  // tags for stored completions; nothing is stored
  NeutralOnly(fields, "service_tier", "one tier (only \"auto\" or \"default\")",
              [](const nlohmann::json& v) { return v == "auto" || v == "default"; });
  NeutralOnly(fields, "modalities", "text output only (only [\"text\"])",
              [](const nlohmann::json& v) { return v == nlohmann::json::array({"text"}); });
}

void ReadCompletionOnlyFields(const JsonFields& fields, ParsedRequest& request) {
  if (auto v = fields.Int("logprobs", 0, kMaxCompletionLogprobs)) {
    request.sampling.logprobs = static_cast<int>(*v);
  }
  if (auto v = fields.Bool("echo")) request.echo = *v;
  if (request.echo && request.sampling.logprobs) {
    // The prompt's own log-probabilities would need logits at every prompt position, which a
    // prompt served from the cache never computes.
    Unsupported("echo", "'echo' with 'logprobs' (prompt log-probabilities are not computed)");
  }
  NeutralOnly(fields, "suffix", "no insertion (only an empty suffix)",
              [](const nlohmann::json& v) { return v == ""; });
  if (auto best_of = fields.Int("best_of", 1, kMaxChoicesPerPrompt)) {
    // best_of == n keeps every candidate: the same as n alone.
    int n = request.n;
    if (*best_of < n) {
      throw ApiError::BadRequest(
          fmt::format("'best_of' ({}) must be at least 'n' ({})", *best_of, n), "best_of");
    }
    if (*best_of > n) {
      Unsupported("best_of", "choosing the best of more candidates than 'n' (only best_of == n)");
    }
  }
}

void CheckChoiceCount(const ParsedRequest& request) {
  size_t choices = request.prompts.empty() ? request.n : request.prompts.size() * request.n;
  if (choices > kMaxChoicesPerRequest) {
    throw ApiError::BadRequest(fmt::format("this request asks for {} choices (prompts x n); at "
                                           "most {} are allowed",
                                           choices, kMaxChoicesPerRequest),
                               "n");
  }
}

}  // namespace

nlohmann::json ParseJsonBody(const std::string& body) {
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    throw ApiError::BadRequest("the request body is not valid JSON", "", "invalid_json");
  }
  if (!parsed.is_object()) {
    throw ApiError::BadRequest(
        fmt::format("the request body must be a JSON object, got {}", JsonTypeName(parsed)), "",
        "invalid_json");
  }
  return parsed;
}

ParsedRequest ParseChatRequest(const nlohmann::json& body) {
  JsonFields fields(body);
  fields.RefuseUnknown(kCommonFields, kChatFields);
  ParsedRequest request;
  request.kind = ApiKind::kChat;
  ReadCommon(fields, request);
  ReadChatOnlyFields(fields, request);
  request.messages = ReadMessages(fields);
  // max_completion_tokens replaces the deprecated max_tokens; it wins when both are sent.
  request.max_tokens = fields.Int("max_completion_tokens", 1, kMaxTokensLimit);
  if (!request.max_tokens) request.max_tokens = fields.Int("max_tokens", 1, kMaxTokensLimit);
  CheckChoiceCount(request);
  return request;
}

ParsedRequest ParseCompletionRequest(const nlohmann::json& body) {
  JsonFields fields(body);
  fields.RefuseUnknown(kCommonFields, kCompletionFields);
  ParsedRequest request;
  request.kind = ApiKind::kCompletion;
  ReadCommon(fields, request);
  ReadCompletionOnlyFields(fields, request);
  request.prompts = ReadPrompts(fields, /*allow_tokens=*/true);
  request.max_tokens = fields.Int("max_tokens", 1, kMaxTokensLimit);
  CheckChoiceCount(request);
  return request;
}

ParsedRequest ParseGenerateRequest(const nlohmann::json& body) {
  JsonFields fields(body);
  fields.RefuseUnknown(kGenerateFields, kCacheFields);
  ParsedRequest request;
  request.kind = ApiKind::kRtpGenerate;
  request.prompts = ReadPrompts(fields, /*allow_tokens=*/false);
  if (auto v = fields.String("model")) request.model = *v;
  // Our cache fields are accepted at the top level too.
  ReadCacheOptions(fields, request.cache);
  if (auto v = fields.Bool("stream")) request.stream = *v;
  if (const nlohmann::json* config = fields.Object("generate_config")) {
    JsonFields config_fields(*config, "generate_config.");
    config_fields.RefuseUnknown(kGenerateConfigFields, kCacheFields);
    SamplingParams& sampling = request.sampling;
    // rtp-llm's names; temperature is not capped at 2 there.
    if (auto v = config_fields.Number("temperature", 0.0, 100.0)) {
      sampling.temperature = static_cast<float>(*v);
    }
    if (auto v = config_fields.Number("top_p", 0.0, 1.0)) {
      sampling.top_p = *v == 0.0 ? 1.0f : static_cast<float>(*v);  // rtp-llm: 0 means off
    }
    if (auto v = config_fields.Int("top_k", -1, 1 << 30)) {
      sampling.top_k = *v < 0 ? 0 : static_cast<int>(*v);
    }
    if (auto v = config_fields.Number("min_p", 0.0, 1.0)) sampling.min_p = static_cast<float>(*v);
    if (auto v = config_fields.Number("repetition_penalty", 0.0, 10.0, true)) {
      sampling.repetition_penalty = static_cast<float>(*v);
    }
    if (auto v = config_fields.Number("frequency_penalty", -2.0, 2.0)) {
      sampling.frequency_penalty = static_cast<float>(*v);
    }
    if (auto v = config_fields.Number("presence_penalty", -2.0, 2.0)) {
      sampling.presence_penalty = static_cast<float>(*v);
    }
    if (auto v = config_fields.Int("random_seed", std::numeric_limits<int64_t>::min(),
                                   std::numeric_limits<int64_t>::max())) {
      sampling.seed = static_cast<uint64_t>(*v);
    }
    if (auto v = config_fields.StringOrStringList("stop_words_str", kMaxStopStrings)) {
      for (std::string& stop : *v) {
        if (!stop.empty()) sampling.stop.push_back(std::move(stop));
      }
    }
    if (auto v = config_fields.Bool("ignore_eos")) sampling.ignore_eos = *v;
    request.max_tokens = config_fields.Int("max_new_tokens", 1, kMaxTokensLimit);
    if (auto v = config_fields.Int("num_return_sequences", 0, kMaxChoicesPerPrompt)) {
      request.n = *v == 0 ? 1 : static_cast<int>(*v);
    }
    if (auto v = config_fields.Bool("yield_generator")) request.stream = *v;
    ReadCacheOptions(config_fields, request.cache);
  }
  CheckChoiceCount(request);
  return request;
}

}  // namespace reprise::server
