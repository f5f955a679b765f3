#include "server/completion_handler.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "server/api_error.h"
#include "server/completion_job.h"
#include "server/http_connection.h"
#include "server/response_builder.h"
#include "server/sse.h"

namespace reprise::server {
namespace {

constexpr std::chrono::milliseconds kStreamPoll{100};
constexpr std::chrono::milliseconds kWaitPoll{500};
constexpr size_t kCompletionsDefaultMaxTokens = 16;  // OpenAI's default for /v1/completions

// A prompt ready to submit (as tokens), with its length as the engine sees it (task prompt
// included).
struct PreparedPrompt {
  GenerationRequest request;
  size_t prompt_tokens = 0;
};

const char* IdPrefix(ApiKind kind) {
  switch (kind) {
    case ApiKind::kChat:
      return "chatcmpl";
    case ApiKind::kCompletion:
      return "cmpl";
    case ApiKind::kRtpGenerate:
      return "gen";
  }
  return "req";
}

// Refuses an unknown task_id with a 400 that names only the id the client sent (the list of
// tasks is not theirs to see).
void CheckTaskId(const std::string& task_id, const InferenceBackend& backend) {
  if (task_id.empty()) return;
  for (const TaskPromptInfo& task : backend.TaskPrompts()) {
    if (task.task_id == task_id) return;
  }
  throw ApiError::BadRequest(fmt::format("unknown task_id '{}'", task_id), "task_id",
                             "task_not_found");
}

// Sets the request's max_tokens from the client's value or the route's default, and checks the
// prompt and the completion against the context.
void DecideMaxTokens(const ParsedRequest& parsed, const ModelInfo& info, PreparedPrompt& prompt) {
  int64_t context = info.context_length;
  int64_t prompt_tokens = static_cast<int64_t>(prompt.prompt_tokens);
  if (prompt_tokens == 0) throw ApiError::BadRequest("the prompt is empty", "prompt");
  if (context > 0 && prompt_tokens >= context) {
    throw ApiError::BadRequest(
        fmt::format("This model's maximum context length is {} tokens, and the prompt has {} "
                    "tokens; shorten the prompt",
                    context, prompt_tokens),
        parsed.kind == ApiKind::kChat ? "messages" : "prompt", "context_length_exceeded");
  }
  int64_t room = context > 0 ? context - prompt_tokens : INT32_MAX;
  int64_t max_tokens = room;
  if (parsed.max_tokens) {
    max_tokens = *parsed.max_tokens;
    if (max_tokens > room) {
      if (parsed.kind == ApiKind::kRtpGenerate) {
        max_tokens = room;  // rtp-llm stops at the context end instead of refusing
      } else {
        throw ApiError::BadRequest(
            fmt::format("This model's maximum context length is {} tokens. However, you "
                        "requested {} tokens ({} in the prompt, {} for the completion); reduce "
                        "the prompt or max_tokens",
                        context, prompt_tokens + max_tokens, prompt_tokens, max_tokens),
            "max_tokens", "context_length_exceeded");
      }
    }
  } else if (parsed.kind == ApiKind::kCompletion) {
    max_tokens = std::min<int64_t>(room, kCompletionsDefaultMaxTokens);
  }
  prompt.request.sampling.max_tokens = static_cast<int>(std::min<int64_t>(max_tokens, INT32_MAX));
}

// Each prompt is tokenized here, once, by the engine's rule (task prompt and BOS included), and
// handed to the engine as tokens.
std::vector<PreparedPrompt> PreparePrompts(const ParsedRequest& parsed, const ReadyBackend& ready,
                                           const std::string& chat_template) {
  const InferenceBackend& backend = *ready.backend;
  CheckTaskId(parsed.cache.task_id, backend);
  GenerationRequest base;
  base.sampling = parsed.sampling;
  base.cache = parsed.cache;

  std::vector<PreparedPrompt> prompts;
  if (parsed.kind == ApiKind::kChat) {
    PreparedPrompt prompt{base, 0};
    prompt.request.prompt = RenderChatPrompt(ready, parsed.messages, chat_template);
    prompts.push_back(std::move(prompt));
  } else {
    for (const PromptInput& input : parsed.prompts) {
      PreparedPrompt prompt{base, 0};
      if (input.is_tokens) {
        for (int32_t token : input.tokens) {
          if (token >= ready.info.vocab_size) {
            throw ApiError::BadRequest(
                fmt::format("token id {} is outside the vocabulary (size {})", token,
                            ready.info.vocab_size),
                "prompt");
          }
        }
        prompt.request.prompt_tokens = input.tokens;
      } else {
        prompt.request.prompt = input.text;
      }
      prompts.push_back(std::move(prompt));
    }
  }
  for (PreparedPrompt& prompt : prompts) {
    prompt.prompt_tokens = backend.EncodePrompt(prompt.request);
    DecideMaxTokens(parsed, ready.info, prompt);
  }
  return prompts;
}

// Submits every choice; on failure cancels those already submitted and reports the reason.
void SubmitAll(CompletionJob& job, const ParsedRequest& parsed,
               std::vector<PreparedPrompt>& prompts) {
  try {
    size_t index = 0;
    for (PreparedPrompt& prompt : prompts) {
      for (int j = 0; j < parsed.n; ++j, ++index) {
        GenerationRequest request = prompt.request;
        // Distinct seeds, or n seeded choices would all be the same.
        if (request.sampling.seed && j > 0) *request.sampling.seed += static_cast<uint64_t>(j);
        job.Submit(index, std::move(request));
      }
    }
  } catch (const QueueFullError& error) {
    job.CancelUnfinished();
    throw ApiError::Unavailable(fmt::format("the server is busy ({}); retry later", error.what()),
                                "queue_full");
  } catch (const Error& error) {
    job.CancelUnfinished();
    throw ApiError::BadRequest(error.what(), "", "invalid_request");
  } catch (...) {
    job.CancelUnfinished();
    throw;
  }
}

// Logs a finished request and adds it to its tenant's figures.
void LogFinished(const std::string& id, const CompletionJob& job,
                 const std::string& prompt_cache_key, TenantRegistry& tenants,
                 const std::string& tenant) {
  UsageCounts usage = job.Usage();
  tenants.RecordUsage(tenant, TenantUsage{1, static_cast<uint64_t>(usage.prompt_tokens),
                                          static_cast<uint64_t>(usage.cached_tokens),
                                          static_cast<uint64_t>(usage.completion_tokens)});
  const ChoiceResult& first = job.result(0);
  spdlog::info(
      "{}: prompt {} tokens (cached {}: memory {}, disk {}, remote {}), generated {}, "
      "ttft {:.1f} ms, total {:.1f} ms, {}{}{}",
      id, usage.prompt_tokens, usage.cached_tokens, usage.cache_sources.memory,
      usage.cache_sources.disk, usage.cache_sources.remote, usage.completion_tokens,
      first.ttft_seconds * 1e3, first.total_seconds * 1e3, first.finish_reason,
      prompt_cache_key.empty() ? "" : ", prompt_cache_key ",
      // Quoted and escaped, and cut short: it is the client's text.
      prompt_cache_key.empty() ? std::string()
                               : fmt::format("{:?}", prompt_cache_key.substr(0, 200)));
}

// echo: each choice's prompt as the client sent it (token ids as their text), else nothing.
std::vector<std::string> EchoTexts(const ParsedRequest& parsed, const InferenceBackend& backend) {
  std::vector<std::string> texts;
  if (!parsed.echo) return texts;
  for (const PromptInput& input : parsed.prompts) {
    std::string text = input.is_tokens ? backend.Detokenize(input.tokens) : input.text;
    texts.insert(texts.end(), static_cast<size_t>(parsed.n), text);
  }
  return texts;
}

void RecordFinish(ServerMetrics& metrics, const CompletionJob& job, size_t index) {
  FinishReason reason = job.finish_reason(index);
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) {
    metrics.RecordFinished(reason, job.result(index).ttft_seconds, job.result(index).total_seconds);
  }
}

// Nobody reads it; the status is nginx's for a request its client abandoned.
ApiError ClientClosedError() {
  return ApiError(499, "the client closed the connection", "invalid_request_error",
                  "client_closed_request");
}

// True when the client of the request this thread answers has closed its connection.
bool ClientGone() {
  ConnectionContext* connection = CurrentConnection();
  return connection != nullptr && connection->stream->PeerGone();
}

// State of one streamed answer, owned by httplib's content provider.
struct StreamState {
  std::unique_ptr<CompletionJob> job;
  ResponseBuilder builder;
  ApiKind kind;
  bool include_usage = false;
  bool started = false;
  ServerState* server = nullptr;
  std::vector<std::string> echo_texts;  // per choice, sent first; empty without echo
  std::string prompt_cache_key;
  std::string tenant;
};

// One call of the chunked content provider: writes what the engine reported since the last
// call. Returns false to end the response (client gone, server stopping).
bool StreamStep(StreamState& stream, httplib::DataSink& sink) {
  CompletionJob& job = *stream.job;
  auto write = [&sink](const std::string& text) { return sink.write(text.data(), text.size()); };
  if (!stream.started) {
    stream.started = true;
    if (stream.kind == ApiKind::kChat) {
      for (size_t i = 0; i < job.size(); ++i) {
        if (!write(SseData(stream.builder.RoleChunk(i)))) return false;
      }
    }
    for (size_t i = 0; i < stream.echo_texts.size(); ++i) {
      if (!write(SseData(stream.builder.DeltaChunk(i, stream.echo_texts[i])))) return false;
    }
  }
  for (const ChannelEvent& event : job.channel().PopAll(kStreamPoll)) {
    const std::optional<std::vector<SampledLogprobs>>& so_far = job.result(event.choice).logprobs;
    size_t text_offset = so_far ? LogprobsTextBytes(*so_far) : 0;
    size_t index = job.Apply(event);
    if (!event.finished()) {
      const TokenEvent& token = std::get<TokenEvent>(event.payload);
      if (stream.kind == ApiKind::kRtpGenerate) {
        if (!write(SseData(stream.builder.RtpStreamEvent(job.result(index), false)))) return false;
      } else if (so_far) {
        // With logprobs every token is reported, text or not (a stop string may hold it back).
        if (!write(SseData(
                stream.builder.DeltaChunk(index, token.text, &token.logprobs, text_offset)))) {
          return false;
        }
      } else if (!token.text.empty()) {
        if (!write(SseData(stream.builder.DeltaChunk(index, token.text)))) return false;
      }
      continue;
    }
    RecordFinish(stream.server->metrics(), job, index);
    FinishReason reason = job.finish_reason(index);
    if (reason == FinishReason::kError || reason == FinishReason::kCancelled) {
      std::string message = reason == FinishReason::kError
                                ? "generation failed: " + job.error(index)
                                : std::string("the request was cancelled");
      if (!write(SseData(ApiError::Internal(message).ToJson()))) return false;
      continue;
    }
    if (stream.kind == ApiKind::kRtpGenerate) {
      if (!write(SseData(stream.builder.RtpStreamEvent(job.result(index), true)))) return false;
      continue;
    }
    UsageCounts usage = job.Usage();
    bool usage_here = job.AllFinished() && !stream.include_usage;
    if (!write(SseData(stream.builder.FinishChunk(index, job.result(index).finish_reason,
                                                  usage_here ? &usage : nullptr)))) {
      return false;
    }
  }
  if (!job.AllFinished() && ClientGone()) return false;
  if (job.AllFinished()) {
    LogFinished(stream.builder.id(), job, stream.prompt_cache_key, stream.server->tenants(),
                stream.tenant);
    if (stream.kind != ApiKind::kRtpGenerate) {
      if (stream.include_usage && !write(SseData(stream.builder.UsageChunk(job.Usage())))) {
        return false;
      }
      if (!write(std::string(kSseDone))) return false;
    }
    sink.done();
    return true;
  }
  return !stream.server->stopping();
}

}  // namespace

std::string RenderChatPrompt(const ReadyBackend& ready,
                             const std::vector<Engine::ChatMessage>& messages,
                             const std::string& chat_template) {
  try {
    return ready.backend->ApplyChatTemplate(messages, chat_template);
  } catch (const Error& error) {
    throw ApiError::BadRequest(error.what(), "messages", "chat_template_error");
  }
}

void CompletionHandler::Handle(ApiKind kind, const httplib::Request& http_request,
                               httplib::Response& http_response) {
  nlohmann::json body = ParseJsonBody(http_request.body);
  ParsedRequest parsed = kind == ApiKind::kChat         ? ParseChatRequest(body)
                         : kind == ApiKind::kCompletion ? ParseCompletionRequest(body)
                                                        : ParseGenerateRequest(body);
  std::shared_ptr<const ReadyBackend> ready = state_.RequireReady();
  // The tenant's salt is mixed into the client's: no salt a client sends reaches another
  // tenant's blocks.
  const Tenant& caller = state_.Caller(http_request.get_header_value("Authorization"));
  parsed.cache.cache_salt = state_.tenants().EngineSalt(caller, parsed.cache.cache_salt);
  parsed.cache.owner = caller.cache_salt;
  const std::string& served_name = state_.options().served_model_name;
  if (!parsed.model.empty() && parsed.model != served_name) {
    throw ApiError::NotFound(fmt::format("The model '{}' does not exist; this server serves '{}'",
                                         parsed.model, served_name),
                             "model_not_found");
  }
  if (kind == ApiKind::kRtpGenerate && parsed.stream &&
      parsed.prompts.size() * static_cast<size_t>(parsed.n) != 1) {
    throw ApiError::BadRequest("streaming answers one prompt with one sequence", "prompt");
  }
  std::vector<PreparedPrompt> prompts =
      PreparePrompts(parsed, *ready, state_.options().chat_template);
  // A client that left while its request was read gets nothing computed.
  if (ClientGone()) throw ClientClosedError();

  auto job = std::make_unique<CompletionJob>(
      ready->backend, prompts.size() * static_cast<size_t>(parsed.n), parsed.n);
  SubmitAll(*job, parsed, prompts);
  ResponseBuilder builder(kind, state_.NextId(IdPrefix(kind)),
                          std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count(),
                          served_name);

  if (parsed.stream) {
    auto stream = std::make_shared<StreamState>(
        StreamState{std::move(job), std::move(builder), kind, parsed.include_usage, false, &state_,
                    EchoTexts(parsed, *ready->backend), parsed.prompt_cache_key, caller.name});
    http_response.set_header("Cache-Control", "no-cache");
    http_response.set_header("X-Accel-Buffering", "no");
    http_response.set_chunked_content_provider(
        "text/event-stream",
        [stream](size_t /*offset*/, httplib::DataSink& sink) {
          bool keep_going = false;
          try {
            keep_going = StreamStep(*stream, sink);
          } catch (const std::exception& error) {
            spdlog::error("{}: streaming failed: {}", stream->builder.id(), error.what());
          }
          if (!keep_going) stream->job->CancelUnfinished();
          return keep_going;
        },
        // Called when the response ends either way: a client that went away stops its requests.
        [stream](bool /*success*/) { stream->job->CancelUnfinished(); });
    return;
  }

  while (!job->AllFinished()) {
    for (const ChannelEvent& event : job->channel().PopAll(kWaitPoll)) {
      size_t index = job->Apply(event);
      if (event.finished()) RecordFinish(state_.metrics(), *job, index);
    }
    if (!job->AllFinished() && state_.stopping()) {
      job->CancelUnfinished();
      throw ApiError::Unavailable("the server is shutting down", "shutting_down");
    }
    if (!job->AllFinished() && ClientGone()) {
      job->CancelUnfinished();
      throw ClientClosedError();
    }
  }
  for (size_t i = 0; i < job->size(); ++i) {
    if (job->finish_reason(i) == FinishReason::kError) {
      throw ApiError::Internal("generation failed: " + job->error(i));
    }
    if (job->finish_reason(i) == FinishReason::kCancelled) {
      throw ApiError::Unavailable("the request was cancelled", "cancelled");
    }
  }
  LogFinished(builder.id(), *job, parsed.prompt_cache_key, state_.tenants(), caller.name);
  std::vector<ChoiceResult> results = job->Results();
  std::vector<std::string> echo_texts = EchoTexts(parsed, *ready->backend);
  for (size_t i = 0; i < echo_texts.size(); ++i) results[i].text.insert(0, echo_texts[i]);
  http_response.set_content(JsonText(builder.Full(results, job->Usage())), "application/json");
}

}  // namespace reprise::server
