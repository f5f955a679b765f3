// The InferenceBackend that serves with a real reprise::Engine.
#pragma once

#include <memory>

#include "server/inference_backend.h"

namespace reprise::server {

class EngineBackend : public InferenceBackend {
 public:
  // Loads the model and computes task prompts (slow); throws reprise::Error on bad config.
  explicit EngineBackend(const EngineConfig& config);
  ~EngineBackend() override;

  uint64_t Submit(GenerationRequest request, StreamCallbacks callbacks) override;
  void Cancel(uint64_t request_id) override;
  std::vector<int32_t> Tokenize(const std::string& text, bool add_special_tokens) const override;
  size_t EncodePrompt(GenerationRequest& request) const override;
  std::string Detokenize(const std::vector<int32_t>& tokens) const override;
  std::string ApplyChatTemplate(const std::vector<Engine::ChatMessage>& messages,
                                const std::string& template_name) const override;
  ModelInfo Info() const override;
  EngineStats Stats() const override;
  std::vector<TaskPromptInfo> TaskPrompts() const override;
  size_t ClearCache(const std::vector<std::string>& tiers,
                    const std::optional<std::string>& owner) override;
  CacheBlockList ListCacheBlocks() override;

 private:
  std::unique_ptr<Engine> engine_;
};

}  // namespace reprise::server
