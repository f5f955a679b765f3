// reprise::Engine, the public API, as a thin layer over EngineImpl.
#include "reprise/engine.h"

#include <future>

#include "core/error.h"
#include "engine/engine_impl.h"
#include "engine/prompt_keys.h"

namespace reprise {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "error";
}

Engine::Engine(const EngineConfig& config) : impl_(std::make_unique<EngineImpl>(config)) {}
Engine::~Engine() = default;

std::vector<GenerationOutput> Engine::Generate(const std::vector<std::string>& prompts,
                                               const SamplingParams& params) {
  std::vector<GenerationRequest> requests;
  for (const auto& prompt : prompts) {
    GenerationRequest request;
    request.prompt = prompt;
    request.sampling = params;
    requests.push_back(std::move(request));
  }
  return Generate(std::move(requests));
}

std::vector<GenerationOutput> Engine::Generate(std::vector<GenerationRequest> requests) {
  std::vector<std::promise<GenerationOutput>> promises(requests.size());
  std::vector<std::future<GenerationOutput>> futures;
  for (auto& promise : promises) futures.push_back(promise.get_future());
  for (size_t i = 0; i < requests.size(); ++i) {
    StreamCallbacks callbacks;
    callbacks.on_finish = [&promises, i](const GenerationOutput& output) {
      promises[i].set_value(output);
    };
    try {
      impl_->Submit(std::move(requests[i]), std::move(callbacks));
    } catch (...) {
      // Requests already submitted still finish before the promises go away.
      for (size_t j = 0; j < i; ++j) futures[j].wait();
      throw;
    }
  }
  std::vector<GenerationOutput> outputs;
  for (auto& future : futures) outputs.push_back(future.get());
  return outputs;
}

uint64_t Engine::Submit(GenerationRequest request, StreamCallbacks callbacks) {
  return impl_->Submit(std::move(request), std::move(callbacks));
}

void Engine::Cancel(uint64_t request_id) { impl_->Cancel(request_id); }

std::vector<int32_t> Engine::Tokenize(const std::string& text, bool add_special_tokens) const {
  return impl_->tokenizer().EncodePrompt(text, add_special_tokens);
}

size_t Engine::EncodePrompt(GenerationRequest& request) const {
  return impl_->EncodePrompt(request);
}

std::string Engine::Detokenize(const std::vector<int32_t>& tokens) const {
  return impl_->tokenizer().Decode(tokens);  // throws Error for an id outside the vocabulary
}

std::string Engine::ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                      const std::string& template_name) const {
  std::vector<reprise::ChatMessage> converted;
  for (const auto& message : messages) converted.push_back({message.role, message.content});
  // The template resolved at start-up, unless the caller names another one.
  std::optional<ChatTemplate> other;
  if (!template_name.empty() && template_name != impl_->config().chat_template) {
    other.emplace(ChatTemplate::Resolve(template_name, impl_->tokenizer()));
  }
  const ChatTemplate& chat = other ? *other : impl_->chat_template();
  try {
    return chat.Render(converted, /*add_generation_prompt=*/true);
  } catch (const jinja::Error& error) {
    throw Error(fmt::format("{}: {}", chat.description(), error.what()));
  }
}

ModelInfo Engine::Info() const { return impl_->Info(); }
EngineStats Engine::Stats() const { return impl_->Stats(); }
std::vector<TaskPromptInfo> Engine::TaskPrompts() const { return impl_->TaskPrompts(); }
size_t Engine::ClearCache() { return impl_->ClearCache({"memory"}, std::nullopt); }
size_t Engine::ClearCache(const std::vector<std::string>& tiers) {
  return impl_->ClearCache(tiers, std::nullopt);
}
size_t Engine::ClearCache(const std::vector<std::string>& tiers, const std::string& owner) {
  return impl_->ClearCache(tiers, owner);
}
CacheBlockList Engine::ListCacheBlocks() { return impl_->ListCacheBlocks(); }

}  // namespace reprise
