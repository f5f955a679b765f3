// The JSON bodies of completion answers, whole and streamed, for each API shape: OpenAI chat
// (`chat.completion`, `chat.completion.chunk`), OpenAI text (`text_completion`) and rtp-llm
// (`response` + `aux_info`). Every usage carries prompt_tokens_details.cached_tokens and the
// top-level `reuse_len` (rtp-llm's name) with the same number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/parsed_request.h"

namespace reprise::server {

struct UsageCounts {
  size_t prompt_tokens = 0;
  size_t completion_tokens = 0;
  size_t cached_tokens = 0;
  CacheSources cache_sources;  // cached_tokens by where the KV came from
};

// The wire value of a finish reason: "stop", "length", "cancelled" or "error". (Ours, not the
// engine's FinishReasonName, because it is part of the HTTP API's contract.)
const char* FinishReasonText(FinishReason reason);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
// {"cached_tokens"}, "cache_sources": {"memory", "disk", "remote"}}
nlohmann::json UsageJson(const UsageCounts& usage);

// One finished choice.
struct ChoiceResult {
  size_t index = 0;
  std::string text;
  std::string finish_reason;  // "stop" or "length"
  size_t prompt_tokens = 0;
  size_t cached_tokens = 0;
  CacheSources cache_sources;
  size_t completion_tokens = 0;
  double ttft_seconds = 0;
  double total_seconds = 0;
  // Set when the request asked for logprobs: one entry per generated token.
  std::optional<std::vector<SampledLogprobs>> logprobs;
};

// The bytes the tokens of `entries` spell: where the next token starts in the text (the
// completions API's text_offset).
size_t LogprobsTextBytes(const std::vector<SampledLogprobs>& entries);

class ResponseBuilder {
 public:
  ResponseBuilder(ApiKind kind, std::string id, int64_t created, std::string model);

  // The whole answer of a non-streamed request; `choices` ordered by index.
  nlohmann::json Full(const std::vector<ChoiceResult>& choices, const UsageCounts& usage) const;

  // Streamed pieces (OpenAI shapes; the caller frames them as SSE).
  nlohmann::json RoleChunk(size_t index) const;  // chat only: delta {"role": "assistant"}
  // With `logprobs` (not null): the log-probabilities of the tokens sampled since the last
  // chunk, the first of them at byte `text_offset` of the choice's text.
  nlohmann::json DeltaChunk(size_t index, const std::string& text,
                            const std::vector<SampledLogprobs>* logprobs = nullptr,
                            size_t text_offset = 0) const;
  // A choice's last chunk with its finish reason; with `usage` when not null (the request's last
  // chunk when the client did not ask for a separate usage chunk).
  nlohmann::json FinishChunk(size_t index, const std::string& finish_reason,
                             const UsageCounts* usage) const;
  // The separate final chunk of stream_options.include_usage: empty choices, the usage.
  nlohmann::json UsageChunk(const UsageCounts& usage) const;

  // rtp-llm streaming: the text so far of one choice, and its aux_info.
  nlohmann::json RtpStreamEvent(const ChoiceResult& so_far, bool finished) const;

  const std::string& id() const { return id_; }

 private:
  nlohmann::json ChunkEnvelope() const;
  // Chat: {"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}; completions:
  // {tokens, token_logprobs, top_logprobs, text_offset}.
  nlohmann::json LogprobsJson(const std::vector<SampledLogprobs>& entries,
                              size_t text_offset) const;
  nlohmann::json RtpAuxInfo(const ChoiceResult& choice) const;

  ApiKind kind_;
  std::string id_;
  int64_t created_;
  std::string model_;
};

}  // namespace reprise::server
