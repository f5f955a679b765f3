#include "server/response_builder.h"

#include <utility>

namespace reprise::server {

const char* FinishReasonText(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "error";
}

nlohmann::json UsageJson(const UsageCounts& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
          {"cache_sources",
           {{"memory", usage.cache_sources.memory},
            {"disk", usage.cache_sources.disk},
            {"remote", usage.cache_sources.remote}}}};
}

size_t LogprobsTextBytes(const std::vector<SampledLogprobs>& entries) {
  size_t bytes = 0;
  for (const SampledLogprobs& entry : entries) bytes += entry.sampled.bytes.size();
  return bytes;
}

nlohmann::json ResponseBuilder::LogprobsJson(const std::vector<SampledLogprobs>& entries,
                                             size_t text_offset) const {
  if (kind_ == ApiKind::kChat) {
    // `bytes` lets a client join tokens that each hold part of a UTF-8 character; `token` is
    // their text (an incomplete character shows as U+FFFD).
    auto describe = [](const TokenLogprob& token) {
      nlohmann::json bytes = nlohmann::json::array();
      for (unsigned char byte : token.bytes) bytes.push_back(byte);
      return nlohmann::json{
          {"token", token.bytes}, {"logprob", token.logprob}, {"bytes", std::move(bytes)}};
    };
    nlohmann::json content = nlohmann::json::array();
    for (const SampledLogprobs& entry : entries) {
      nlohmann::json item = describe(entry.sampled);
      nlohmann::json top = nlohmann::json::array();
      for (const TokenLogprob& alternative : entry.top) top.push_back(describe(alternative));
      item["top_logprobs"] = std::move(top);
      content.push_back(std::move(item));
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  nlohmann::json tokens = nlohmann::json::array();
  nlohmann::json token_logprobs = nlohmann::json::array();
  nlohmann::json top_logprobs = nlohmann::json::array();
  nlohmann::json offsets = nlohmann::json::array();
  for (const SampledLogprobs& entry : entries) {
    tokens.push_back(entry.sampled.bytes);
    token_logprobs.push_back(entry.sampled.logprob);
    // As vLLM: the top tokens and the sampled one, so up to logprobs + 1 entries.
    nlohmann::json top = nlohmann::json::object();
    for (const TokenLogprob& alternative : entry.top) top[alternative.bytes] = alternative.logprob;
    top[entry.sampled.bytes] = entry.sampled.logprob;
    top_logprobs.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += entry.sampled.bytes.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

ResponseBuilder::ResponseBuilder(ApiKind kind, std::string id, int64_t created, std::string model)
    : kind_(kind), id_(std::move(id)), created_(created), model_(std::move(model)) {}

nlohmann::json ResponseBuilder::RtpAuxInfo(const ChoiceResult& choice) const {
  double cost_ms = choice.total_seconds * 1000.0;
  return {{"input_len", choice.prompt_tokens},
          {"output_len", choice.completion_tokens},
          {"reuse_len", choice.cached_tokens},
          {"prefix_len", 0},
          {"iter_count", choice.completion_tokens},
          {"cost_time_ms", cost_ms},
          {"cost_time", cost_ms},  // rtp-llm's own name, in milliseconds too
          {"first_token_cost_time_ms", choice.ttft_seconds * 1000.0},
          {"first_token_cost_time", choice.ttft_seconds * 1000.0}};
}

nlohmann::json ResponseBuilder::Full(const std::vector<ChoiceResult>& choices,
                                     const UsageCounts& usage) const {
  if (kind_ == ApiKind::kRtpGenerate) {
    nlohmann::json result = {{"finished", true}};
    if (choices.size() == 1) {
      result["response"] = choices[0].text;
      result["aux_info"] = RtpAuxInfo(choices[0]);
      result["aux_info"]["finish_reason"] = choices[0].finish_reason;
    } else {
      nlohmann::json responses = nlohmann::json::array();
      nlohmann::json aux = nlohmann::json::array();
      for (const ChoiceResult& choice : choices) {
        responses.push_back(choice.text);
        aux.push_back(RtpAuxInfo(choice));
        aux.back()["finish_reason"] = choice.finish_reason;
      }
      result["response"] = std::move(responses);
      result["aux_info"] = std::move(aux);
    }
    result["reuse_len"] = usage.cached_tokens;
    return result;
  }
  nlohmann::json out_choices = nlohmann::json::array();
  for (const ChoiceResult& choice : choices) {
    nlohmann::json item = {{"index", choice.index}};
    if (kind_ == ApiKind::kChat) {
      item["message"] = {{"role", "assistant"}, {"content", choice.text}};
    } else {
      item["text"] = choice.text;
    }
    item["logprobs"] = choice.logprobs ? LogprobsJson(*choice.logprobs, 0) : nlohmann::json();
    item["finish_reason"] = choice.finish_reason;
    out_choices.push_back(std::move(item));
  }
  return {{"id", id_},
          {"object", kind_ == ApiKind::kChat ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", std::move(out_choices)},
          {"usage", UsageJson(usage)},
          {"reuse_len", usage.cached_tokens},
          {"system_fingerprint", nullptr}};
}

nlohmann::json ResponseBuilder::ChunkEnvelope() const {
  return {{"id", id_},
          {"object", kind_ == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"system_fingerprint", nullptr}};
}

nlohmann::json ResponseBuilder::RoleChunk(size_t index) const {
  nlohmann::json chunk = ChunkEnvelope();
  chunk["choices"] = nlohmann::json::array({{{"index", index},
                                             {"delta", {{"role", "assistant"}, {"content", ""}}},
                                             {"logprobs", nullptr},
                                             {"finish_reason", nullptr}}});
  return chunk;
}

nlohmann::json ResponseBuilder::DeltaChunk(size_t index, const std::string& text,
                                           const std::vector<SampledLogprobs>* logprobs,
                                           size_t text_offset) const {
  nlohmann::json chunk = ChunkEnvelope();
  nlohmann::json choice = {{"index", index}};
  if (kind_ == ApiKind::kChat) {
    choice["delta"] = {{"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs ? LogprobsJson(*logprobs, text_offset) : nlohmann::json();
  choice["finish_reason"] = nullptr;
  chunk["choices"] = nlohmann::json::array({std::move(choice)});
  return chunk;
}

nlohmann::json ResponseBuilder::FinishChunk(size_t index, const std::string& finish_reason,
                                            const UsageCounts* usage) const {
  nlohmann::json chunk = ChunkEnvelope();
  nlohmann::json choice = {{"index", index}};
  if (kind_ == ApiKind::kChat) {
    choice["delta"] = nlohmann::json::object();
  } else {
    choice["text"] = "";
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  chunk["choices"] = nlohmann::json::array({std::move(choice)});
  if (usage != nullptr) {
    chunk["usage"] = UsageJson(*usage);
    chunk["reuse_len"] = usage->cached_tokens;
  }
  return chunk;
}

nlohmann::json ResponseBuilder::UsageChunk(const UsageCounts& usage) const {
  nlohmann::json chunk = ChunkEnvelope();
  chunk["choices"] = nlohmann::json::array();
  chunk["usage"] = UsageJson(usage);
  chunk["reuse_len"] = usage.cached_tokens;
  return chunk;
}

nlohmann::json ResponseBuilder::RtpStreamEvent(const ChoiceResult& so_far, bool finished) const {
  nlohmann::json aux = RtpAuxInfo(so_far);
  if (finished) aux["finish_reason"] = so_far.finish_reason;
  return {{"response", so_far.text}, {"finished", finished}, {"aux_info", std::move(aux)}};
}

}  // namespace reprise::server
