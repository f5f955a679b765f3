// A generation request as a client sent it to /v1/chat/completions, /v1/completions or the
// rtp-llm routes (POST /, /generate), parsed and range-checked but not yet tokenized.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "reprise/engine.h"

namespace reprise::server {

enum class ApiKind { kChat, kCompletion, kRtpGenerate };

// One prompt of /v1/completions: text, or token ids.
struct PromptInput {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
};

struct ParsedRequest {
  ApiKind kind = ApiKind::kChat;
  std::string model;                          // empty when the client sent none
  std::vector<Engine::ChatMessage> messages;  // kChat
  std::vector<PromptInput> prompts;           // kCompletion, kRtpGenerate: at least one
  SamplingParams sampling;                    // max_tokens is decided later (see below)
  std::optional<int64_t> max_tokens;          // unset: the route's default
  int n = 1;                                  // choices per prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  CacheOptions cache;
  bool echo = false;  // kCompletion: the prompt before the completion
  // OpenAI's prompt_cache_key: logged, and read by routers in front of us to keep requests that
  // share it on one server. Reuse here needs no hint: every prompt's prefix is matched.
  std::string prompt_cache_key;
};

// Limits on one request.
inline constexpr int kMaxChoicesPerPrompt = 16;  // n
inline constexpr size_t kMaxPromptsPerRequest = 16;
inline constexpr size_t kMaxChoicesPerRequest = 64;  // prompts * n
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr int kMaxCompletionLogprobs = 5;  // /v1/completions' logprobs (OpenAI's limit)
// prompt_cache_retention "24h": the TTL it maps to.
inline constexpr double kExtendedRetentionSeconds = 24.0 * 3600;

// Parses a request body as JSON; malformed JSON or a non-object is a 400 ApiError.
nlohmann::json ParseJsonBody(const std::string& body);

// Each throws ApiError (400) naming the offending field.
ParsedRequest ParseChatRequest(const nlohmann::json& body);
ParsedRequest ParseCompletionRequest(const nlohmann::json& body);
// rtp-llm: {"prompt": ..., "generate_config": {"max_new_tokens", "top_k", "top_p",
// "temperature", "repetition_penalty", "random_seed", "stop_words_str", "task_id", ...}}.
ParsedRequest ParseGenerateRequest(const nlohmann::json& body);

}  // namespace reprise::server
