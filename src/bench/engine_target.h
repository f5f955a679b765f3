// BenchTarget over an in-process reprise::Engine: requests are submitted as the server would
// submit them and the engine's own TTFT figures are used.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "bench/target.h"
#include "reprise/engine.h"

namespace reprise::bench {

class BenchEngineTarget : public BenchTarget {
 public:
  // Loads the model; throws Error on a bad model or configuration.
  explicit BenchEngineTarget(const EngineConfig& config);

  BenchResult Run(const BenchRequest& request) override;
  size_t CountTokens(const std::string& text) override;
  std::vector<int32_t> Tokenize(const std::string& text) override;
  bool ClearCache(bool every_tier) override;
  std::optional<EngineTimes> Times() override;
  std::optional<ModelInfo> Info() override { return engine_->Info(); }
  bool in_process() const override { return true; }
  std::string Describe() const override;

  Engine& engine() { return *engine_; }

 private:
  EngineConfig config_;
  std::unique_ptr<Engine> engine_;
  std::atomic<uint64_t> runs_finished_{0};
};

}  // namespace reprise::bench
