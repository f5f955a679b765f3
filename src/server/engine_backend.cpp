#include "server/engine_backend.h"

#include <utility>

namespace reprise::server {

EngineBackend::EngineBackend(const EngineConfig& config)
    : engine_(std::make_unique<Engine>(config)) {}

EngineBackend::~EngineBackend() = default;

uint64_t EngineBackend::Submit(GenerationRequest request, StreamCallbacks callbacks) {
  return engine_->Submit(std::move(request), std::move(callbacks));
}

void EngineBackend::Cancel(uint64_t request_id) { engine_->Cancel(request_id); }

std::vector<int32_t> EngineBackend::Tokenize(const std::string& text,
                                             bool add_special_tokens) const {
  return engine_->Tokenize(text, add_special_tokens);
}

size_t EngineBackend::EncodePrompt(GenerationRequest& request) const {
  return engine_->EncodePrompt(request);
}

std::string EngineBackend::Detokenize(const std::vector<int32_t>& tokens) const {
  return engine_->Detokenize(tokens);
}

std::string EngineBackend::ApplyChatTemplate(const std::vector<Engine::ChatMessage>& messages,
                                             const std::string& template_name) const {
  return engine_->ApplyChatTemplate(messages, template_name);
}

ModelInfo EngineBackend::Info() const { return engine_->Info(); }

EngineStats EngineBackend::Stats() const { return engine_->Stats(); }

std::vector<TaskPromptInfo> EngineBackend::TaskPrompts() const { return engine_->TaskPrompts(); }

size_t EngineBackend::ClearCache(const std::vector<std::string>& tiers,
                                 const std::optional<std::string>& owner) {
  return owner ? engine_->ClearCache(tiers, *owner) : engine_->ClearCache(tiers);
}

CacheBlockList EngineBackend::ListCacheBlocks() { return engine_->ListCacheBlocks(); }

}  // namespace reprise::server
