// What the HTTP server needs from an engine: the part of reprise::Engine's public API that the
// routes use, behind an interface so that route tests can run against a fake with no model.
// EngineBackend (engine_backend.h) is the real one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reprise/engine.h"

namespace reprise::server {

class InferenceBackend {
 public:
  virtual ~InferenceBackend() = default;

  // Same contracts as reprise::Engine's methods of the same names.
  virtual uint64_t Submit(GenerationRequest request, StreamCallbacks callbacks) = 0;
  virtual void Cancel(uint64_t request_id) = 0;
  virtual std::vector<int32_t> Tokenize(const std::string& text, bool add_special_tokens) const = 0;
  virtual size_t EncodePrompt(GenerationRequest& request) const = 0;
  virtual std::string Detokenize(const std::vector<int32_t>& tokens) const = 0;
  virtual std::string ApplyChatTemplate(const std::vector<Engine::ChatMessage>& messages,
                                        const std::string& template_name) const = 0;
  virtual ModelInfo Info() const = 0;
  virtual EngineStats Stats() const = 0;
  virtual std::vector<TaskPromptInfo> TaskPrompts() const = 0;
  // Clears the named tiers ("memory", "disk", "remote"); with `owner` (a CacheOptions::owner),
  // only the blocks that owner's requests added, in each of them.
  virtual size_t ClearCache(const std::vector<std::string>& tiers,
                            const std::optional<std::string>& owner) = 0;
  virtual CacheBlockList ListCacheBlocks() = 0;
};

}  // namespace reprise::server
