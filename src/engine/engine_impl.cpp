#include "engine/engine_impl.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <future>
#include <optional>
#include <random>
#include <string_view>
#include <type_traits>

#include "core/error.h"
#include "core/log.h"
#include "core/text.h"
#include "engine/prompt_keys.h"
#include "engine/task_prompts.h"
#include "model/kv_layout.h"
#include "sampling/logprobs.h"
#include "tiers/disk_tier.h"
#include "tiers/redis_tier.h"
#include "tokenizer/chat_template.h"

namespace reprise {

namespace {

// Runs `work` and adds its wall time to `seconds`: what the scheduler and the prefix cache cost
// the step thread, reported beside the forward passes so that the cache's own price is visible.
template <typename Work>
auto TimeInto(double& seconds, Work&& work) {
  Clock::time_point start = Clock::now();
  if constexpr (std::is_void_v<decltype(work())>) {
    work();
    seconds += SecondsSince(start);
  } else {
    auto result = work();
    seconds += SecondsSince(start);
    return result;
  }
}

}  // namespace

void EngineImpl::RunUntilIdle() {
  while (scheduler_->HasWork()) {
    DrainLoads();
    if (scheduler_->HasRunnableWork()) {
      Step();
    } else {
      REPRISE_CHECK(tier_link_ && tier_link_->LoadsInFlight() > 0,
                    "the engine has work it cannot run");
      tier_link_->tiers().WaitForLoad();
    }
  }
}

void EngineImpl::DrainLoads() {
  if (!tier_link_) return;
  for (const TierLink::Finished& done : tier_link_->TakeFinished()) {
    Sequence& sequence = *done.sequence;
    const uint64_t id = sequence.id;
    // The fault boundary covers a load's end too: a fault fails this request alone. It is still
    // loading here, so FailRequests marks it, and it is delivered as an error just below.
    try {
      if (config_.fault_hook) config_.fault_hook(EngineFaultSite::kLoad, sequence.request);
    } catch (const std::exception& error) {
      FailRequests({id}, "load from the KV tiers", error.what());
    }
    const size_t reused = TimeInto(scheduling_seconds_,
                                   [&] { return scheduler_->FinishLoad(sequence, done.loaded); });
    if (reused > 0) {
      sequence.cache_sources.disk += done.sources.disk;
      sequence.cache_sources.remote += done.sources.remote;
    }
    if (sequence.cancel_requested) {
      std::unique_ptr<Sequence> removed =
          TimeInto(scheduling_seconds_, [&] { return scheduler_->Remove(id); });
      if (removed) {
        // A request that failed while it loaded is an error, not a cancellation.
        std::string failure = std::move(removed->failure);
        const FinishReason reason =
            failure.empty() ? FinishReason::kCancelled : FinishReason::kError;
        Deliver(std::move(removed), reason, failure);
      }
    }
  }
}

EngineImpl::~EngineImpl() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (tier_link_) {
    try {
      tier_link_->PersistAll();
    } catch (const std::exception& error) {
      spdlog::warn("could not keep the KV cache in the tiers at shutdown: {}", error.what());
    }
  }
}

const std::vector<int32_t>& EngineImpl::TaskPromptTokens(const GenerationRequest& request) const {
  static const std::vector<int32_t> kNone;
  if (request.cache.task_id.empty()) return kNone;
  auto task = task_prompts_.find(request.cache.task_id);
  if (task == task_prompts_.end()) {
    throw Error(fmt::format("unknown task_id '{}'", request.cache.task_id));
  }
  return task->second.tokens;
}

std::vector<int32_t> EngineImpl::OwnPromptTokens(const GenerationRequest& request) const {
  if (!request.prompt_tokens.empty()) return request.prompt_tokens;
  // A task prompt already holds BOS: the request's own text follows it as is.
  const bool add_bos = request.add_special_tokens && request.cache.task_id.empty();
  return tokenizer_->EncodePrompt(request.prompt, add_bos);
}

size_t EngineImpl::EncodePrompt(GenerationRequest& request) const {
  const size_t task_tokens = TaskPromptTokens(request).size();
  if (request.prompt_tokens.empty()) {
    request.prompt_tokens = OwnPromptTokens(request);
    request.prompt.clear();
  }
  return task_tokens + request.prompt_tokens.size();
}

std::unique_ptr<Sequence> EngineImpl::MakeSequence(GenerationRequest request,
                                                   StreamCallbacks callbacks) {
  auto sequence = std::make_unique<Sequence>();
  // The one place a task prompt is prepended.
  std::vector<int32_t> tokens = TaskPromptTokens(request);
  std::vector<int32_t> own = OwnPromptTokens(request);
  tokens.insert(tokens.end(), own.begin(), own.end());
  if (tokens.empty()) throw Error("the prompt is empty");
  const int64_t vocab = model_->config().vocab_size;
  for (int32_t token : tokens) {
    if (token < 0 || token >= vocab) {
      throw Error(fmt::format("token id {} is outside the vocabulary of {}", token, vocab));
    }
  }
  if (static_cast<int64_t>(tokens.size()) >= max_context_) {
    throw Error(
        fmt::format("the prompt has {} tokens, but the context holds {} (prompt plus at "
                    "least one generated token)",
                    tokens.size(), max_context_));
  }
  const auto block_size = static_cast<size_t>(config_.block_size);
  if (static_cast<int64_t>(tokens.size() / block_size + 1) > num_blocks_) {
    throw Error(fmt::format("the prompt of {} tokens does not fit a KV cache of {} blocks",
                            tokens.size(), num_blocks_));
  }
  const SamplingParams& sampling = request.sampling;
  if (sampling.max_tokens < 1) throw Error("max_tokens must be at least 1");
  if (sampling.logprobs && (*sampling.logprobs < 0 || *sampling.logprobs > kMaxTopLogprobs)) {
    throw Error(fmt::format("logprobs must be between 0 and {}", kMaxTopLogprobs));
  }
  if (sampling.temperature < 0 || sampling.top_p <= 0 || sampling.top_p > 1 || sampling.min_p < 0 ||
      sampling.min_p > 1 || sampling.repetition_penalty <= 0) {
    throw Error("sampling parameters out of range");
  }

  SamplerConfig sampler_config;
  sampler_config.temperature = sampling.temperature;
  sampler_config.top_k = sampling.top_k;
  sampler_config.top_p = sampling.top_p;
  sampler_config.min_p = sampling.min_p;
  sampler_config.repetition_penalty = sampling.repetition_penalty;
  sampler_config.frequency_penalty = sampling.frequency_penalty;
  sampler_config.presence_penalty = sampling.presence_penalty;
  sampler_config.seed = sampling.seed ? *sampling.seed : std::random_device{}();

  sequence->tokens = std::move(tokens);
  sequence->prompt_len = sequence->tokens.size();
  sequence->sampler = std::make_unique<Sampler>(sampler_config, sequence->tokens);
  sequence->output.emplace(*tokenizer_, sampling.stop);
  sequence->extras.cache_salt = request.cache.cache_salt;
  sequence->retention.priority = std::clamp(request.cache.priority, 0, 100);
  sequence->retention.ttl_seconds = std::max(0.0, request.cache.ttl_seconds);
  sequence->retention.owner = TenantSaltDigest(request.cache.owner);
  sequence->callbacks = std::move(callbacks);
  sequence->submitted_at = Clock::now();
  sequence->request = std::move(request);
  return sequence;
}

uint64_t EngineImpl::Submit(GenerationRequest request, StreamCallbacks callbacks) {
  auto sequence = MakeSequence(std::move(request), std::move(callbacks));
  uint64_t id;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw Error("the engine is shutting down");
    if (queued_ >= config_.max_queued_requests) {
      throw QueueFullError(fmt::format("the request queue is full ({} requests)", queued_));
    }
    id = next_id_++;
    sequence->id = id;
    ++queued_;
    incoming_.push_back(std::move(sequence));
  }
  wake_.notify_one();
  return id;
}

void EngineImpl::Cancel(uint64_t request_id) {
  {
    std::lock_guard lock(mutex_);
    cancels_.push_back(request_id);
  }
  wake_.notify_one();
}

template <typename Result>
Result EngineImpl::RunOnEngineThread(std::function<Result()> task) {
  auto promise = std::make_shared<std::promise<Result>>();
  auto future = promise->get_future();
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back([promise, task = std::move(task)] {
      try {
        promise->set_value(task());
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
  }
  wake_.notify_one();
  return future.get();
}

size_t EngineImpl::ClearCache(const std::vector<std::string>& tiers,
                              const std::optional<std::string>& owner) {
  for (const std::string& name : tiers) {
    if (name != "memory" && name != "disk" && name != "remote") {
      throw Error(fmt::format("unknown cache tier '{}' (memory, disk or remote)", name));
    }
  }
  auto named = [&](const char* name) {
    return std::find(tiers.begin(), tiers.end(), name) != tiers.end();
  };
  std::optional<Digest> owned;
  if (owner) owned = TenantSaltDigest(*owner);
  return RunOnEngineThread<size_t>([this, named, owned] {
    size_t dropped = 0;
    if (named("memory")) {
      dropped += owned ? cache_->ClearOwned(*owned) : cache_->ClearUnpinned();
      // What memory dropped was written back: have it on disk before anyone asks for it.
      if (tier_link_) tier_link_->tiers().Flush();
    }
    for (const char* name : {"disk", "remote"}) {
      size_t count = 0;
      if (named(name) && tier_link_ && tier_link_->tiers().Clear(name, owned, &count)) {
        dropped += count;
      }
    }
    PublishStats();
    return dropped;
  });
}

CacheBlockList EngineImpl::ListCacheBlocks() {
  // The events' position first, then the lists: every change told below it is in them, and one
  // told after it that is in them too does no harm (see CacheBlockList).
  CacheBlockList list = RunOnEngineThread<CacheBlockList>([this] {
    CacheBlockList memory;
    memory.replica_id = config_.kv_replica_id;
    memory.root = cache_->root_fingerprint();
    if (kv_events_) {
      memory.kv_events = true;
      memory.instance = kv_events_->instance();
      memory.next_seq = kv_events_->next_seq();
    }
    // Memory's events are told on this thread: the list matches the position exactly.
    cache_->ForEachIndexed([&](const CachedBlockInfo& block) {
      if (!block.full) return;  // as the events: only full blocks
      memory.memory.push_back({*block.key, *block.parent_key, *block.extras_digest,
                               block.owner ? *block.owner : Digest{}});
    });
    return memory;
  });
  if (!tier_link_) return list;
  const TierSet& tiers = tier_link_->tiers();
  for (size_t i = 0; i < tiers.size(); ++i) {
    std::vector<CacheBlockRef>& out =
        std::string_view(tiers.TierName(i)) == "disk" ? list.disk : list.remote;
    for (const TierBlockRef& block : tiers.Blocks(i)) {
      out.push_back({block.key, block.parent_key, block.extras_digest, block.owner});
    }
  }
  return list;
}

void EngineImpl::Loop() {
  while (true) {
    std::vector<uint64_t> cancels;
    std::deque<std::function<void()>> tasks;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return stopping_ || !incoming_.empty() || !cancels_.empty() || !tasks_.empty() ||
               loads_ready_ || scheduler_->HasRunnableWork();
      });
      if (stopping_) break;
      loads_ready_ = false;
      while (!incoming_.empty()) {
        scheduler_->Add(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      cancels.swap(cancels_);
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
    DrainLoads();
    for (uint64_t id : cancels) {
      std::unique_ptr<Sequence> sequence =
          TimeInto(scheduling_seconds_, [&] { return scheduler_->Remove(id); });
      if (sequence) {
        Deliver(std::move(sequence), FinishReason::kCancelled, "");
      }
    }
    if (scheduler_->HasRunnableWork()) Step();
    PublishStats();
  }
  // Loads in flight write into blocks the sequences hold: wait for them before letting go.
  while (tier_link_ && tier_link_->LoadsInFlight() > 0) {
    tier_link_->tiers().WaitForLoad();
    DrainLoads();
  }
  // Shutting down: every request still known ends as cancelled, so no caller waits forever.
  std::deque<std::unique_ptr<Sequence>> leftover;
  std::deque<std::function<void()>> tasks;
  {
    std::lock_guard lock(mutex_);
    leftover.swap(incoming_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task();
  for (auto& sequence : leftover) Deliver(std::move(sequence), FinishReason::kCancelled, "");
  for (auto& sequence : scheduler_->RemoveAll()) {
    Deliver(std::move(sequence), FinishReason::kCancelled, "");
  }
}

void EngineImpl::Step() {
  StepPlan plan = TimeInto(scheduling_seconds_, [&] { return scheduler_->Schedule(); });
  for (auto& failed : plan.failed) {
    Deliver(std::move(failed), FinishReason::kError,
            fmt::format("the KV cache ({} blocks) is too small for this request", num_blocks_));
  }
  if (plan.entries.empty()) return;

  // The fault boundary: an exception in the forward pass fails the requests of this step, one
  // in a request's sampling or streaming fails that request; the engine goes on with the rest.
  // Requests are named by id, since a failed one may already have been finished and freed.
  std::vector<uint64_t> step_ids;
  for (const StepEntry& entry : plan.entries) step_ids.push_back(entry.sequence->id);
  try {
    Forward(plan);
  } catch (const std::exception& error) {
    FailRequests(step_ids, fmt::format("forward pass of {} tokens", plan.num_tokens), error.what());
    return;
  }

  const auto vocab = static_cast<size_t>(model_->config().vocab_size);
  size_t row = 0;
  for (const StepEntry& entry : plan.entries) {
    Sequence& sequence = *entry.sequence;
    if (!entry.wants_logits) continue;
    const uint64_t id = sequence.id;
    try {
      if (sequence.prefill_only) {
        TimeInto(scheduling_seconds_, [&] { return scheduler_->Finish(&sequence, /*pin=*/true); });
        continue;
      }
      float* logits = logits_.data() + row * vocab;
      ++row;
      HandleLogits(sequence, logits);
    } catch (const std::exception& error) {
      FailRequests({id}, "sampling", error.what());
    }
  }
}

void EngineImpl::Forward(const StepPlan& plan) {
  batch_.Clear();
  for (size_t s = 0; s < plan.entries.size(); ++s) {
    const StepEntry& entry = plan.entries[s];
    Sequence& sequence = *entry.sequence;
    if (config_.fault_hook) config_.fault_hook(EngineFaultSite::kForward, sequence.request);
    batch_.block_tables.emplace_back(sequence.blocks);
    for (size_t p = entry.start; p < entry.start + entry.count; ++p) {
      batch_.tokens.push_back(sequence.tokens[p]);
      batch_.positions.push_back(static_cast<int32_t>(p));
      batch_.sequence_index.push_back(static_cast<int32_t>(s));
    }
    if (entry.wants_logits && !sequence.prefill_only) {
      batch_.logit_rows.push_back(static_cast<int32_t>(batch_.tokens.size() - 1));
    }
  }
  Clock::time_point forward_start = Clock::now();
  model_->Forward(batch_, paged_kv_, *pool_, logits_.data());
  double forward_seconds = SecondsSince(forward_start);
  forward_seconds_ += forward_seconds;
  ++steps_;
  TimeInto(scheduling_seconds_, [&] { scheduler_->Complete(plan); });
  for (const StepEntry& entry : plan.entries) {
    if (!entry.sequence->first_token_seen)
      entry.sequence->prefill_compute_seconds += forward_seconds;
  }
}

void EngineImpl::FailRequests(const std::vector<uint64_t>& ids, const std::string& stage,
                              const std::string& reason) {
  // One line with the context an operator needs; the clients get the reason itself.
  spdlog::error("engine fault in the {} (requests {}): {}; failing them, the engine goes on", stage,
                fmt::join(ids, ", "), reason);
  const std::string message = fmt::format("internal error in the {}: {}", stage, reason);
  for (uint64_t id : ids) {
    try {
      std::unique_ptr<Sequence> sequence =
          TimeInto(scheduling_seconds_, [&] { return scheduler_->Remove(id, message); });
      if (sequence) Deliver(std::move(sequence), FinishReason::kError, message);
    } catch (const std::exception& error) {
      // Removing it failed too (a broken invariant): the request is gone either way.
      spdlog::error("engine fault: failing request {} failed as well: {}", id, error.what());
    }
  }
}

void EngineImpl::HandleLogits(Sequence& sequence, float* logits) {
  if (config_.fault_hook) config_.fault_hook(EngineFaultSite::kSample, sequence.request);
  const auto vocab = static_cast<size_t>(model_->config().vocab_size);
  std::span<float> row(logits, vocab);
  if (sequence.request.record_logits) sequence.logits.emplace_back(row.begin(), row.end());
  const std::optional<int>& top_logprobs = sequence.request.sampling.logprobs;
  // Taken before sampling, which applies the penalties to `row` in place.
  if (top_logprobs) LogSoftmax(row, logprob_scratch_);
  int32_t token = sequence.sampler->Sample(row);
  sequence.sampler->Accept(token);
  sequence.tokens.push_back(token);
  if (top_logprobs) sequence.logprobs.push_back(DescribeLogprobs(token, *top_logprobs));
  ++sequence.generated;
  {
    std::lock_guard lock(stats_mutex_);
    ++generation_tokens_;
  }
  if (!sequence.first_token_seen) {
    sequence.first_token_seen = true;
    sequence.ttft_seconds = SecondsSince(sequence.submitted_at);
  }
  const SamplingParams& sampling = sequence.request.sampling;
  if (!sampling.ignore_eos && tokenizer_->IsEndOfGeneration(token)) {
    if (sequence.callbacks.on_token) {
      sequence.callbacks.on_token(TokenEvent{sequence.id, token, "", sequence.prompt_len,
                                             sequence.cached_tokens, UnstreamedLogprobs(sequence),
                                             sequence.cache_sources});
    }
    FinishSequence(&sequence, FinishReason::kStop);
    return;
  }
  if (sequence.output->Push(token)) {  // a stop string
    Emit(sequence, /*final=*/true);
    FinishSequence(&sequence, FinishReason::kStop);
    return;
  }
  bool out_of_tokens = static_cast<int>(sequence.generated) >= sampling.max_tokens;
  bool out_of_context = static_cast<int64_t>(sequence.tokens.size()) >= max_context_;
  if (out_of_tokens || out_of_context) {
    sequence.output->Flush();
    Emit(sequence, /*final=*/true);
    FinishSequence(&sequence, FinishReason::kLength);
    return;
  }
  Emit(sequence, /*final=*/false);
}

void EngineImpl::Emit(Sequence& sequence, bool final) {
  std::string delta = sequence.output->TakeDelta(final);
  bool logprobs_pending = sequence.logprobs_streamed < sequence.logprobs.size();
  if (sequence.callbacks.on_token && (!delta.empty() || !final || logprobs_pending)) {
    sequence.callbacks.on_token(TokenEvent{sequence.id, sequence.tokens.back(), std::move(delta),
                                           sequence.prompt_len, sequence.cached_tokens,
                                           UnstreamedLogprobs(sequence), sequence.cache_sources});
  }
}

SampledLogprobs EngineImpl::DescribeLogprobs(int32_t token, int top) const {
  auto describe = [this](int32_t id, float logprob) {
    return TokenLogprob{id, logprob, tokenizer_->TokenToPiece(id)};
  };
  SampledLogprobs result;
  result.sampled = describe(token, logprob_scratch_[static_cast<size_t>(token)]);
  for (const auto& [id, logprob] : TopEntries(logprob_scratch_, top)) {
    result.top.push_back(describe(id, logprob));
  }
  return result;
}

std::vector<SampledLogprobs> EngineImpl::UnstreamedLogprobs(Sequence& sequence) {
  std::vector<SampledLogprobs> pending(
      sequence.logprobs.begin() + static_cast<ptrdiff_t>(sequence.logprobs_streamed),
      sequence.logprobs.end());
  sequence.logprobs_streamed = sequence.logprobs.size();
  return pending;
}

void EngineImpl::FinishSequence(Sequence* sequence, FinishReason reason, const std::string& error) {
  std::unique_ptr<Sequence> finished =
      TimeInto(scheduling_seconds_, [&] { return scheduler_->Finish(sequence); });
  Deliver(std::move(finished), reason, error);
}

void EngineImpl::Deliver(std::unique_ptr<Sequence> sequence, FinishReason reason,
                         const std::string& error) {
  GenerationOutput output;
  output.request_id = sequence->id;
  if (sequence->output) output.text = sequence->output->TakeText();
  output.token_ids.assign(sequence->tokens.begin() + static_cast<ptrdiff_t>(sequence->prompt_len),
                          sequence->tokens.end());
  output.prompt_tokens = sequence->prompt_len;
  output.cached_tokens = sequence->cached_tokens;
  output.cache_sources = sequence->cache_sources;
  output.finish_reason = reason;
  output.error = error;
  output.ttft_seconds = sequence->ttft_seconds;
  output.prefill_compute_seconds = sequence->prefill_compute_seconds;
  output.total_seconds = SecondsSince(sequence->submitted_at);
  output.logits = std::move(sequence->logits);
  output.logprobs = std::move(sequence->logprobs);
  {
    std::lock_guard lock(mutex_);
    if (queued_ > 0) --queued_;
  }
  {
    std::lock_guard lock(stats_mutex_);
    ++finished_;
    if (reason == FinishReason::kCancelled) ++cancelled_;
    prompt_tokens_ += output.prompt_tokens;
    prompt_tokens_cached_.memory += output.cache_sources.memory;
    prompt_tokens_cached_.disk += output.cache_sources.disk;
    prompt_tokens_cached_.remote += output.cache_sources.remote;
  }
  if (!sequence->callbacks.on_finish) return;
  try {
    sequence->callbacks.on_finish(output);
  } catch (const std::exception& error) {
    // The request is finished either way; a throwing consumer must not fail anyone else.
    spdlog::error("request {}: its on_finish callback threw: {}", output.request_id, error.what());
  }
}

void EngineImpl::PublishStats() {
  CacheStats cache = cache_->Stats();
  const SchedulerStats& scheduler = scheduler_->stats();
  std::optional<TierSetStats> tiers;
  if (tier_link_) tiers = tier_link_->tiers().Stats();
  std::lock_guard lock(stats_mutex_);
  if (tiers) {
    stats_.tiers.clear();
    for (const TierStats& tier : tiers->tiers) {
      stats_.tiers.push_back({tier.name, tier.available, tier.last_error, tier.blocks, tier.bytes,
                              tier.capacity_bytes, tier.blocks_written, tier.bytes_written,
                              tier.blocks_read, tier.bytes_read, tier.evictions,
                              tier.corrupt_blocks, tier.foreign_blocks, tier.errors});
    }
    stats_.tier_load_bounds.assign(std::begin(kLoadSecondsBounds), std::end(kLoadSecondsBounds));
    stats_.tier_load_buckets = tiers->load_seconds_buckets;
    stats_.tier_load_seconds_sum = tiers->load_seconds_sum;
    stats_.tier_writes_dropped = tiers->writes_dropped;
  }
  stats_.prompt_tokens_cached = prompt_tokens_cached_;
  stats_.prefix_cache_queries = scheduler.prompt_tokens_queried;
  stats_.prefix_cache_hits = scheduler.prompt_tokens_hit;
  stats_.evictions = cache.evictions;
  stats_.blocks_total = num_blocks_;
  stats_.blocks_in_use = cache.blocks_in_use;
  stats_.blocks_cached = cache.blocks_cached;
  stats_.blocks_free = cache.blocks_free;
  stats_.blocks_pinned = cache.blocks_pinned;
  stats_.blocks_protected = cache.blocks_protected;
  stats_.preemptions = scheduler.preemptions;
  stats_.requests_running = scheduler_->num_running();
  stats_.requests_waiting = scheduler_->num_waiting();
  stats_.requests_finished = finished_;
  stats_.requests_cancelled = cancelled_;
  stats_.prompt_tokens_total = prompt_tokens_;
  stats_.generation_tokens_total = generation_tokens_;
  stats_.scheduling_seconds_total = scheduling_seconds_;
  stats_.forward_seconds_total = forward_seconds_;
  stats_.steps_total = steps_;
}

EngineStats EngineImpl::Stats() const {
  EngineStats stats;
  {
    std::lock_guard lock(stats_mutex_);
    stats = stats_;
  }
  if (kv_events_) {  // read now: the publisher's thread moves them while the engine idles
    const kvevents::KvEventPublisherStats events = kv_events_->stats();
    stats.kv_events = true;
    stats.kv_events_published = events.published;
    stats.kv_events_dropped = events.dropped;
    stats.kv_events_write_failures = events.failures;
    stats.kv_events_connected = events.connected;
  }
  return stats;
}

ModelInfo EngineImpl::Info() const {
  ModelInfo info;
  const ModelConfig& config = model_->config();
  info.name = config.name;
  info.architecture = config.architecture;
  info.vocab_size = config.vocab_size;
  info.context_length = max_context_;
  info.block_size = config_.block_size;
  info.prefix_caching = config_.enable_prefix_caching;
  info.kv_type = config_.kv_type;
  info.numerics = numerics_;
  info.kv_cache_blocks = num_blocks_;
  info.kv_cache_bytes = static_cast<size_t>(num_blocks_) * block_bytes_;
  info.num_threads = pool_->num_threads();
  info.decode_weight_bytes = model_->DecodeWeightBytes();
  return info;
}

}  // namespace reprise
