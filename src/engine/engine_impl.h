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
#include "engine/tier_events.h"
#include "engine/tier_link.h"
#include "kernels/paged_attention.h"
#include "kvcache/prefix_cache.h"
#include "kvevents/kv_event_publisher.h"
#include "model/model.h"
#include "reprise/engine.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace reprise {

class EngineImpl {
 public:
  explicit EngineImpl(const EngineConfig& config);
  ~EngineImpl();

  uint64_t Submit(GenerationRequest request, StreamCallbacks callbacks);
  // See Engine::EncodePrompt. Safe on any thread.
  size_t EncodePrompt(GenerationRequest& request) const;
  void Cancel(uint64_t request_id);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const EngineConfig& config() const { return config_; }
  // The chat template resolved and checked at start-up (see EngineConfig::chat_template).
  const ChatTemplate& chat_template() const { return *chat_template_; }
  const Model& model() const { return *model_; }
  ModelInfo Info() const;
  EngineStats Stats() const;
  std::vector<TaskPromptInfo> TaskPrompts() const { return task_infos_; }
  // Clears the named tiers ("memory", "disk", "remote"); with `owner`, only the blocks that
  // owner's requests (CacheOptions::owner) added, in each of them.
  size_t ClearCache(const std::vector<std::string>& tiers, const std::optional<std::string>& owner);
  CacheBlockList ListCacheBlocks();

 private:
  struct TaskPrompt {
    std::vector<int32_t> tokens;
  };

  // The task prompt named by request.cache.task_id (empty for none); throws Error for an unknown
  // one.
  const std::vector<int32_t>& TaskPromptTokens(const GenerationRequest& request) const;
  // The request's own tokens: prompt_tokens, or its text encoded with BOS unless it follows a
  // task prompt (which holds BOS) or add_special_tokens is false.
  std::vector<int32_t> OwnPromptTokens(const GenerationRequest& request) const;
  std::unique_ptr<Sequence> MakeSequence(GenerationRequest request, StreamCallbacks callbacks);
  void ComputeTaskPrompts(const std::string& json_text);
  // Opens the tiers beyond memory that the config names (the disk tier) and links them in.
  void OpenTiers(const ModelConfig& model_config);
  void OpenKvEvents();
  // Steps until every sequence added so far is done (start-up work: task prompts).
  void RunUntilIdle();
  // Hands finished tier loads to their sequences (engine thread).
  void DrainLoads();
  void Loop();
  void Step();
  // Builds the batch of `plan`, runs the model and advances the requests' computed positions.
  void Forward(const StepPlan& plan);
  // The fault boundary's end: logs the fault once with its context, then finishes each request
  // of `ids` still known with FinishReason::kError and `reason`, releasing its blocks.
  void FailRequests(const std::vector<uint64_t>& ids, const std::string& stage,
                    const std::string& reason);
  // Samples the next token from `logits` ([vocab], modified by the penalties).
  void HandleLogits(Sequence& sequence, float* logits);
  void Emit(Sequence& sequence, bool final);
  // The sampled token's log-probability and the `top` most likely, from logprob_scratch_.
  SampledLogprobs DescribeLogprobs(int32_t token, int top) const;
  // The sequence's log-probabilities not yet sent in a token event; marks them sent.
  static std::vector<SampledLogprobs> UnstreamedLogprobs(Sequence& sequence);
  void FinishSequence(Sequence* sequence, FinishReason reason, const std::string& error = "");
  void Deliver(std::unique_ptr<Sequence> sequence, FinishReason reason, const std::string& error);
  void PublishStats();
  template <typename Result>
  Result RunOnEngineThread(std::function<Result()> task);

  EngineConfig config_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PrefixCache> cache_;
  std::unique_ptr<Scheduler> scheduler_;
  // Before tier_link_: the tiers' writing thread tells it of blocks stored, up to its end.
  std::unique_ptr<kvevents::KvEventPublisher> kv_events_;  // null without KV events
  std::unique_ptr<TierEvents> tier_events_;  // the tiers' listener; null without KV events
  std::unique_ptr<TierLink> tier_link_;      // null without tiers beyond memory
  PrefixCacheListeners cache_listeners_;     // the tiers and the events
  kernels::PagedKv paged_kv_;
  int64_t max_context_ = 0;
  int64_t num_blocks_ = 0;
  size_t block_bytes_ = 0;
  std::string numerics_;  // kernels::KernelNumerics of the target the model runs on
  ForwardBatch batch_;
  AlignedBuffer<float> logits_;         // [max_running][vocab]
  std::vector<float> logprob_scratch_;  // [vocab]: the log-softmax of the row being sampled
  std::map<std::string, TaskPrompt> task_prompts_;
  std::vector<TaskPromptInfo> task_infos_;

  std::mutex mutex_;  // guards the members below
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> incoming_;
  std::vector<uint64_t> cancels_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  bool loads_ready_ = false;  // a tier load finished since the loop last looked
  uint64_t next_id_ = 1;
  size_t queued_ = 0;  // submitted and not finished

  mutable std::mutex stats_mutex_;
  EngineStats stats_;
  uint64_t finished_ = 0;
  uint64_t cancelled_ = 0;
  uint64_t generation_tokens_ = 0;
  uint64_t prompt_tokens_ = 0;
  CacheSources prompt_tokens_cached_;
  // Step-thread only (published by PublishStats): where the step thread's time goes.
  double scheduling_seconds_ = 0;
  double forward_seconds_ = 0;
  uint64_t steps_ = 0;

  std::thread thread_;
};

}  // namespace reprise
