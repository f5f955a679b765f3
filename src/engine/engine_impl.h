// The engine behind reprise::Engine: owns the model, tokenizer, prefix cache and scheduler, and
// runs the step loop on its own thread. HTTP threads only enqueue requests and read callbacks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "kernels/paged_attention.h"
#include "kvcache/prefix_cache.h"
#include "model/model.h"
#include "reprise/engine.h"
#include "tokenizer/tokenizer.h"

namespace reprise {

class EngineImpl {
 public:
  explicit EngineImpl(const EngineConfig& config);
  ~EngineImpl();

  uint64_t Submit(GenerationRequest request, StreamCallbacks callbacks);
  void Cancel(uint64_t request_id);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const Model& model() const { return *model_; }
  ModelInfo Info() const;
  EngineStats Stats() const;
  std::vector<TaskPromptInfo> TaskPrompts() const { return task_infos_; }
  // Every unpinned cached block, or those of one owner (CacheOptions::owner).
  size_t ClearCache(const std::optional<std::string>& owner);

 private:
  struct TaskPrompt {
    std::vector<int32_t> tokens;
  };

  std::unique_ptr<Sequence> MakeSequence(GenerationRequest request, StreamCallbacks callbacks);
  void ComputeTaskPrompts(const std::string& json_text);
  void Loop();
  void Step();
  // Samples the next token from `logits` ([vocab], modified by the penalties).
  void HandleLogits(Sequence& sequence, float* logits);
  void Emit(Sequence& sequence, bool final);
  void FinishSequence(Sequence* sequence, FinishReason reason, const std::string& error = "");
  void Deliver(std::unique_ptr<Sequence> sequence, FinishReason reason, const std::string& error);
  void PublishStats();
  template <typename Result>
  Result RunOnEngineThread(std::function<Result()> task);

  EngineConfig config_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PrefixCache> cache_;
  std::unique_ptr<Scheduler> scheduler_;
  kernels::PagedKv paged_kv_;
  int64_t max_context_ = 0;
  int64_t num_blocks_ = 0;
  size_t block_bytes_ = 0;
  ForwardBatch batch_;
  AlignedBuffer<float> logits_;  // [max_running][vocab]
  std::map<std::string, TaskPrompt> task_prompts_;
  std::vector<TaskPromptInfo> task_infos_;

  std::mutex mutex_;  // guards the members below
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> incoming_;
  std::vector<uint64_t> cancels_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  size_t queued_ = 0;  // submitted and not finished

  mutable std::mutex stats_mutex_;
  EngineStats stats_;
  uint64_t finished_ = 0;
  uint64_t cancelled_ = 0;
  uint64_t generation_tokens_ = 0;
  uint64_t prompt_tokens_ = 0;
  // Step-thread only (published by PublishStats): where the step thread's time goes.
  double scheduling_seconds_ = 0;
  double forward_seconds_ = 0;

  std::thread thread_;
};

}  // namespace reprise
