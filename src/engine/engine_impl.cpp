#include "engine/engine_impl.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <future>
#include <optional>
#include <random>
#include <type_traits>

#include "core/error.h"
#include "core/log.h"
#include "engine/task_prompts.h"
#include "tokenizer/chat_template.h"

namespace reprise {

namespace {

// The default KV budget: 30% of available memory, at most 4 GiB.
size_t DefaultKvBudget() {
  size_t available_kib = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t value = 0;
  std::string unit;
  while (meminfo >> key >> value >> unit) {
    if (key == "MemAvailable:") available_kib = value;
  }
  size_t budget = available_kib == 0 ? (size_t{1} << 30) : available_kib * 1024 / 10 * 3;
  return std::min(budget, size_t{4} << 30);
}

kernels::KvType ParseKvType(const std::string& name) {
  if (name == "f16") return kernels::KvType::kF16;
  if (name == "f32") return kernels::KvType::kF32;
  throw Error(fmt::format("unknown KV cache type '{}' (f16 or f32)", name));
}

std::optional<PrefillOrder> FindSchedulePolicy(const std::string& name) {
  if (name == "cache-aware" || name == "lpm") return PrefillOrder::kCacheAware;
  if (name == "fcfs") return PrefillOrder::kArrival;
  return std::nullopt;
}

PrefillOrder ParseSchedulePolicy(const std::string& name) {
  std::optional<PrefillOrder> order = FindSchedulePolicy(name);
  if (!order) {
    throw Error(fmt::format("unknown schedule policy '{}' ({})", name, kSchedulePolicyNames));
  }
  return *order;
}

// The share of the KV pool kept for blocks that proved their reuse, by eviction policy name.
// Scan resistance leaves a fifth of the pool to probation: enough for the blocks of the requests
// in flight on any budget that is not tiny; below that the protected tier is evicted by LRU too.
std::optional<double> FindEvictionPolicy(const std::string& name) {
  if (name == "scan-resistant") return 0.8;
  if (name == "lru") return 0.0;
  return std::nullopt;
}

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

bool IsSchedulePolicy(const std::string& name) { return FindSchedulePolicy(name).has_value(); }
bool IsEvictionPolicy(const std::string& name) { return FindEvictionPolicy(name).has_value(); }

EngineImpl::EngineImpl(const EngineConfig& config) : config_(config) {
  const int block_size = config_.block_size;
  if (block_size < 1 || block_size > 256 || (block_size & (block_size - 1)) != 0) {
    throw Error(fmt::format("block size {} is not a power of two from 1 to 256", block_size));
  }
  if (config_.max_batch_tokens < 1) throw Error("max batch tokens must be at least 1");
  if (config_.max_running_requests < 1) throw Error("max running requests must be at least 1");
  const PrefillOrder prefill_order = ParseSchedulePolicy(config_.schedule_policy);
  const std::optional<double> protected_share = FindEvictionPolicy(config_.eviction_policy);
  if (!protected_share) {
    throw Error(fmt::format("unknown eviction policy '{}' ({})", config_.eviction_policy,
                            kEvictionPolicyNames));
  }

  model_ = Model::Load(config_.model_path);
  tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::FromGguf(model_->file()));
  const ModelConfig& model_config = model_->config();
  max_context_ = model_config.context_length;
  if (config_.max_context > 0) max_context_ = std::min(max_context_, config_.max_context);
  pool_ = std::make_unique<ThreadPool>(config_.num_threads);

  paged_kv_.type = ParseKvType(config_.kv_type);
  paged_kv_.n_layer = model_config.n_layer;
  paged_kv_.n_kv_head = model_config.n_kv_head;
  paged_kv_.head_dim = model_config.head_dim;
  paged_kv_.block_size = block_size;
  block_bytes_ = paged_kv_.BlockBytes();
  size_t budget = config_.kv_cache_memory_bytes;
  if (budget == 0) {
    // No more than every running request at full context could use, plus as much again as
    // cache for later requests.
    size_t blocks_per_context = static_cast<size_t>(max_context_ + block_size - 1) / block_size + 1;
    size_t useful = 2 * static_cast<size_t>(config_.max_running_requests) * blocks_per_context * block_bytes_;
    budget = std::min(DefaultKvBudget(), useful);
  }
  num_blocks_ = static_cast<int64_t>(budget / block_bytes_);
  if (num_blocks_ < 2) {
    throw Error(fmt::format("a KV cache of {} bytes holds fewer than 2 blocks of {} bytes", budget,
                            block_bytes_));
  }

  // The root of every block key: blocks of another model or KV setting can never match.
  Sha256 fingerprint;
  fingerprint.Update("reprise-kv-v1");
  Digest weights = model_->WeightsFingerprint();
  fingerprint.Update(weights.data(), weights.size());
  fingerprint.UpdateValue(static_cast<uint32_t>(paged_kv_.type));
  fingerprint.UpdateValue(static_cast<uint32_t>(block_size));

  PrefixCacheConfig cache_config;
  cache_config.num_blocks = num_blocks_;
  cache_config.block_size = block_size;
  cache_config.block_bytes = block_bytes_;
  cache_config.root_fingerprint = fingerprint.Finish();
  cache_config.enable_reuse = config_.enable_prefix_caching;
  cache_config.protected_share = *protected_share;
  cache_ = std::make_unique<PrefixCache>(cache_config);
  paged_kv_.base = cache_->BlockData(0);

  SchedulerConfig scheduler_config;
  scheduler_config.block_size = block_size;
  scheduler_config.max_batch_tokens = config_.max_batch_tokens;
  scheduler_config.max_running = config_.max_running_requests;
  scheduler_config.enable_reuse = config_.enable_prefix_caching;
  scheduler_config.prefill_order = prefill_order;
  scheduler_ = std::make_unique<Scheduler>(scheduler_config, *cache_);

  size_t max_logit_rows = static_cast<size_t>(
      std::min(config_.max_batch_tokens, config_.max_running_requests));
  logits_.Resize(max_logit_rows * static_cast<size_t>(model_config.vocab_size));
  model_->Reserve(static_cast<size_t>(config_.max_batch_tokens), max_logit_rows);

  spdlog::info("model {} ({}): {} layers, {} heads ({} KV), vocab {}, context {}",
               model_config.name, model_config.architecture, model_config.n_layer,
               model_config.n_head, model_config.n_kv_head, model_config.vocab_size, max_context_);
  spdlog::info("reuse_cache: {}, block_size: {}, kv_cache: {} blocks of {} bytes ({:.1f} MiB, {}), "
               "max_batch_tokens: {}, threads: {}",
               config_.enable_prefix_caching, block_size, num_blocks_, block_bytes_,
               static_cast<double>(num_blocks_) * static_cast<double>(block_bytes_) / (1 << 20),
               config_.kv_type, config_.max_batch_tokens, pool_->num_threads());

  if (!config_.task_prompts_json.empty()) ComputeTaskPrompts(config_.task_prompts_json);
  PublishStats();
  thread_ = std::thread([this] { Loop(); });
}

EngineImpl::~EngineImpl() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineImpl::ComputeTaskPrompts(const std::string& json_text) {
  std::vector<TaskPromptSpec> specs = ParseTaskPrompts(json_text);
  const auto block_size = static_cast<size_t>(config_.block_size);
  size_t blocks_needed = 0;
  std::vector<std::vector<int32_t>> token_lists;
  for (const auto& spec : specs) {
    token_lists.push_back(EncodeChatPrompt(*tokenizer_, spec.prompt));
    if (static_cast<int64_t>(token_lists.back().size()) >= max_context_) {
      throw Error(fmt::format("task prompt {} has {} tokens, beyond the context of {}",
                              spec.task_id, token_lists.back().size(), max_context_));
    }
    blocks_needed += (token_lists.back().size() + block_size - 1) / block_size;
  }
  // Pinned blocks count against the budget, and requests need room beside them.
  if (static_cast<int64_t>(blocks_needed) + 1 > num_blocks_) {
    throw Error(fmt::format(
        "the task prompts need {} KV blocks ({} bytes) but the KV cache holds {} blocks ({} "
        "bytes); raise --kv-cache-memory",
        blocks_needed, (blocks_needed + 1) * block_bytes_, num_blocks_,
        static_cast<size_t>(num_blocks_) * block_bytes_));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    GenerationRequest request;
    request.prompt_tokens = token_lists[i];
    auto sequence = MakeSequence(std::move(request), {});
    sequence->prefill_only = true;
    sequence->retention.pinned = true;
    scheduler_->Add(std::move(sequence));
    task_prompts_[specs[i].task_id] = TaskPrompt{token_lists[i]};
    task_infos_.push_back({specs[i].task_id, token_lists[i].size(),
                           (token_lists[i].size() + block_size - 1) / block_size});
  }
  while (scheduler_->HasWork()) Step();
  for (const auto& info : task_infos_) {
    spdlog::info("task prompt {}: {} tokens in {} pinned blocks", info.task_id, info.tokens,
                 info.blocks);
  }
}

std::unique_ptr<Sequence> EngineImpl::MakeSequence(GenerationRequest request,
                                                   StreamCallbacks callbacks) {
  auto sequence = std::make_unique<Sequence>();
  std::vector<int32_t> tokens;
  if (!request.cache.task_id.empty()) {
    auto task = task_prompts_.find(request.cache.task_id);
    if (task == task_prompts_.end()) {
      throw Error(fmt::format("unknown task_id '{}'", request.cache.task_id));
    }
    tokens = task->second.tokens;
    // The task prompt already holds BOS: the request's own text follows it as is.
    request.add_special_tokens = false;
  }
  if (!request.prompt_tokens.empty()) {
    tokens.insert(tokens.end(), request.prompt_tokens.begin(), request.prompt_tokens.end());
  } else {
    // Special-token texts are tokens (as HF tokenizers do), and BOS is not doubled when a
    // chat-templated prompt already starts with it.
    auto encoded = request.add_special_tokens ? EncodeChatPrompt(*tokenizer_, request.prompt)
                                              : tokenizer_->Encode(request.prompt, false, true);
    tokens.insert(tokens.end(), encoded.begin(), encoded.end());
  }
  if (tokens.empty()) throw Error("the prompt is empty");
  const int64_t vocab = model_->config().vocab_size;
  for (int32_t token : tokens) {
    if (token < 0 || token >= vocab) {
      throw Error(fmt::format("token id {} is outside the vocabulary of {}", token, vocab));
    }
  }
  if (static_cast<int64_t>(tokens.size()) >= max_context_) {
    throw Error(fmt::format("the prompt has {} tokens, but the context holds {} (prompt plus at "
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
  sequence->detokenizer = std::make_unique<StreamingDetokenizer>(*tokenizer_);
  for (const auto& stop : sampling.stop) {
    sequence->longest_stop = std::max(sequence->longest_stop, stop.size());
  }
  sequence->extras.cache_salt = request.cache.cache_salt;
  sequence->retention.priority = std::clamp(request.cache.priority, 0, 100);
  sequence->retention.ttl_seconds = std::max(0.0, request.cache.ttl_seconds);
  sequence->retention.owner = OwnerTag(request.cache.owner);
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

size_t EngineImpl::ClearCache(const std::optional<std::string>& owner) {
  return RunOnEngineThread<size_t>([this, owner] {
    size_t dropped = owner ? cache_->ClearOwned(OwnerTag(*owner)) : cache_->ClearUnpinned();
    PublishStats();
    return dropped;
  });
}

void EngineImpl::Loop() {
  while (true) {
    std::vector<uint64_t> cancels;
    std::deque<std::function<void()>> tasks;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return stopping_ || !incoming_.empty() || !cancels_.empty() || !tasks_.empty() ||
               scheduler_->HasWork();
      });
      if (stopping_) break;
      while (!incoming_.empty()) {
        scheduler_->Add(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      cancels.swap(cancels_);
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
    for (uint64_t id : cancels) {
      std::unique_ptr<Sequence> sequence =
          TimeInto(scheduling_seconds_, [&] { return scheduler_->Remove(id); });
      if (sequence) {
        Deliver(std::move(sequence), FinishReason::kCancelled, "");
      }
    }
    if (scheduler_->HasWork()) Step();
    PublishStats();
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

  batch_.Clear();
  for (size_t s = 0; s < plan.entries.size(); ++s) {
    const StepEntry& entry = plan.entries[s];
    Sequence& sequence = *entry.sequence;
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
  TimeInto(scheduling_seconds_, [&] { scheduler_->Complete(plan); });
  for (const StepEntry& entry : plan.entries) {
    if (!entry.sequence->first_token_seen) entry.sequence->prefill_compute_seconds += forward_seconds;
  }

  const auto vocab = static_cast<size_t>(model_->config().vocab_size);
  size_t row = 0;
  for (const StepEntry& entry : plan.entries) {
    Sequence& sequence = *entry.sequence;
    if (!entry.wants_logits) continue;
    if (sequence.prefill_only) {
      TimeInto(scheduling_seconds_, [&] { return scheduler_->Finish(&sequence, /*pin=*/true); });
      continue;
    }
    HandleLogits(sequence, logits_.data() + row * vocab);
    ++row;
  }
}

void EngineImpl::HandleLogits(Sequence& sequence, float* logits) {
  const auto vocab = static_cast<size_t>(model_->config().vocab_size);
  std::span<float> row(logits, vocab);
  if (sequence.request.record_logits) sequence.logits.emplace_back(row.begin(), row.end());
  int32_t token = sequence.sampler->Sample(row);
  sequence.sampler->Accept(token);
  sequence.tokens.push_back(token);
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
                                             sequence.cached_tokens});
    }
    FinishSequence(&sequence, FinishReason::kStop);
    return;
  }
  size_t previous = sequence.text.size();
  sequence.text += sequence.detokenizer->Push(token);
  // A stop string may straddle tokens: search from just before the new text.
  const size_t longest_stop = sequence.longest_stop;
  size_t from = previous >= longest_stop ? previous - longest_stop + 1 : 0;
  for (const auto& stop : sampling.stop) {
    if (stop.empty()) continue;
    size_t found = sequence.text.find(stop, from);
    if (found != std::string::npos) {
      sequence.text.resize(found);
      Emit(sequence, /*final=*/true);
      FinishSequence(&sequence, FinishReason::kStop);
      return;
    }
  }
  bool out_of_tokens = static_cast<int>(sequence.generated) >= sampling.max_tokens;
  bool out_of_context = static_cast<int64_t>(sequence.tokens.size()) >= max_context_;
  if (out_of_tokens || out_of_context) {
    sequence.text += sequence.detokenizer->Flush();
    Emit(sequence, /*final=*/true);
    FinishSequence(&sequence, FinishReason::kLength);
    return;
  }
  Emit(sequence, /*final=*/false);
}

void EngineImpl::Emit(Sequence& sequence, bool final) {
  // Hold back what could still become a stop string.
  const size_t longest_stop = sequence.longest_stop;
  size_t safe = sequence.text.size();
  if (!final && longest_stop > 0) safe = safe >= longest_stop - 1 ? safe - (longest_stop - 1) : 0;
  // Never cut a UTF-8 character in two.
  while (safe > sequence.emitted_bytes && safe < sequence.text.size() &&
         (static_cast<unsigned char>(sequence.text[safe]) & 0xC0) == 0x80) {
    --safe;
  }
  std::string delta;
  if (safe > sequence.emitted_bytes) {
    delta = sequence.text.substr(sequence.emitted_bytes, safe - sequence.emitted_bytes);
    sequence.emitted_bytes = safe;
  }
  if (sequence.callbacks.on_token && (!delta.empty() || !final)) {
    sequence.callbacks.on_token(TokenEvent{sequence.id, sequence.tokens.back(), std::move(delta),
                                           sequence.prompt_len, sequence.cached_tokens});
  }
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
  output.text = std::move(sequence->text);
  output.token_ids.assign(sequence->tokens.begin() + static_cast<ptrdiff_t>(sequence->prompt_len),
                          sequence->tokens.end());
  output.prompt_tokens = sequence->prompt_len;
  output.cached_tokens = sequence->cached_tokens;
  output.finish_reason = reason;
  output.error = error;
  output.ttft_seconds = sequence->ttft_seconds;
  output.prefill_compute_seconds = sequence->prefill_compute_seconds;
  output.total_seconds = SecondsSince(sequence->submitted_at);
  output.logits = std::move(sequence->logits);
  {
    std::lock_guard lock(mutex_);
    if (queued_ > 0) --queued_;
  }
  {
    std::lock_guard lock(stats_mutex_);
    ++finished_;
    if (reason == FinishReason::kCancelled) ++cancelled_;
    prompt_tokens_ += output.prompt_tokens;
  }
  if (sequence->callbacks.on_finish) sequence->callbacks.on_finish(output);
}

void EngineImpl::PublishStats() {
  CacheStats cache = cache_->Stats();
  const SchedulerStats& scheduler = scheduler_->stats();
  std::lock_guard lock(stats_mutex_);
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
}

EngineStats EngineImpl::Stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
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
  info.kv_cache_blocks = num_blocks_;
  info.kv_cache_bytes = static_cast<size_t>(num_blocks_) * block_bytes_;
  info.num_threads = pool_->num_threads();
  return info;
}

}  // namespace reprise
