// EngineImpl's start-up: the configuration checked, the model and the KV pool sized and
// opened, the tiers beyond memory and the KV event publisher attached, static task prompts
// computed (or loaded). The step loop and request handling are in engine_impl.cpp.
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <random>
#include <string_view>
#include <type_traits>

#include "core/byte_size.h"
#include "core/error.h"
#include "core/log.h"
#include "core/text.h"
#include "engine/engine_impl.h"
#include "engine/prompt_keys.h"
#include "engine/task_prompts.h"
#include "kernels/cpu_target.h"
#include "model/kv_layout.h"
#include "sampling/logprobs.h"
#include "tiers/disk_tier.h"
#include "tiers/redis_tier.h"
#include "tokenizer/chat_template.h"

namespace reprise {

namespace {

// MemAvailable in bytes; 0 where /proc/meminfo does not say.
size_t AvailableMemory() {
  size_t available_kib = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t value = 0;
  std::string unit;
  while (meminfo >> key >> value >> unit) {
    if (key == "MemAvailable:") available_kib = value;
  }
  return available_kib * 1024;
}

// The default KV budget: 30% of available memory, at most 4 GiB.
size_t DefaultKvBudget() {
  const size_t available = AvailableMemory();
  size_t budget = available == 0 ? (size_t{1} << 30) : available / 10 * 3;
  return std::min(budget, size_t{4} << 30);
}

// The bytes of a model path: the GGUF file, or a folder's safetensors files.
size_t ModelFileBytes(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(path, error)) {
    const auto size = fs::file_size(path, error);
    return error ? 0 : static_cast<size_t>(size);
  }
  size_t total = 0;
  for (const auto& entry : fs::directory_iterator(path, error)) {
    if (entry.path().extension() == ".safetensors" && entry.is_regular_file(error)) {
      total += static_cast<size_t>(entry.file_size(error));
    }
  }
  return total;
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

  // A private copy must fit in memory (the kernel would kill the process, not fail a call):
  // weights larger than nine tenths of what is available stay in the file's map, which pages.
  bool mapped = config_.mmap_weights;
  const size_t file_bytes = ModelFileBytes(config_.model_path);
  const size_t available = AvailableMemory();
  if (!mapped && available > 0 && file_bytes > available / 10 * 9) {
    spdlog::warn("weights ({}) exceed nine tenths of available memory ({}): mapped from the file",
                 FormatByteSize(file_bytes), FormatByteSize(available));
    mapped = true;
  }
  const auto load_start = std::chrono::steady_clock::now();
  model_ = Model::Load(config_.model_path,
                       mapped ? FileResidence::kMapped : FileResidence::kPrivateCopy);
  spdlog::info(
      "model files: {} {} in {:.2f} s", FormatByteSize(file_bytes),
      mapped ? "mapped from the file" : "read into huge-page memory",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
  tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::FromGguf(model_->file()));
  chat_template_.emplace(ChatTemplate::Resolve(config_.chat_template, *tokenizer_));
  spdlog::info("chat prompts use {}", chat_template_->description());
  const ModelConfig& model_config = model_->config();
  // Every id the model can produce must be a token the tokenizer can turn into text, and every
  // token it can encode must have an embedding row.
  if (tokenizer_->vocab_size() != model_config.vocab_size) {
    throw Error(EscapeBytes(
        fmt::format("{}: token_embd.weight has {} rows but the tokenizer has {} tokens",
                    config_.model_path, model_config.vocab_size, tokenizer_->vocab_size()),
        kMaxMessageBytes));
  }
  max_context_ = model_config.context_length;
  if (config_.max_context > 0) max_context_ = std::min(max_context_, config_.max_context);
  pool_ = std::make_unique<ThreadPool>(config_.num_threads);

  paged_kv_ = KvLayout(model_config, ParseKvType(config_.kv_type), block_size);
  block_bytes_ = paged_kv_.BlockBytes();
  size_t budget = config_.kv_cache_memory_bytes;
  if (budget == 0) {
    // No more than every running request at full context could use, plus as much again as
    // cache for later requests.
    size_t blocks_per_context = static_cast<size_t>(max_context_ + block_size - 1) / block_size + 1;
    size_t useful =
        2 * static_cast<size_t>(config_.max_running_requests) * blocks_per_context * block_bytes_;
    budget = std::min(DefaultKvBudget(), useful);
  }
  num_blocks_ = static_cast<int64_t>(budget / block_bytes_);
  if (num_blocks_ < 2) {
    throw Error(fmt::format("a KV cache of {} bytes holds fewer than 2 blocks of {} bytes", budget,
                            block_bytes_));
  }

  // The root of every block key: blocks of another model, KV setting or arithmetic can never
  // match.

  PrefixCacheConfig cache_config;
  cache_config.num_blocks = num_blocks_;
  cache_config.block_size = block_size;
  cache_config.block_bytes = block_bytes_;
  numerics_ = kernels::KernelNumerics(kernels::BestCpuTarget());
  cache_config.root_fingerprint =
      KvRootFingerprint(model_->WeightsFingerprint(), paged_kv_.type, block_size, numerics_);
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
  OpenKvEvents();  // first: the tiers tell it what they store
  OpenTiers(model_config);
  if (!cache_listeners_.empty()) cache_->SetListener(&cache_listeners_);

  size_t max_logit_rows =
      static_cast<size_t>(std::min(config_.max_batch_tokens, config_.max_running_requests));
  logits_.Resize(max_logit_rows * static_cast<size_t>(model_config.vocab_size));
  model_->Reserve(static_cast<size_t>(config_.max_batch_tokens), max_logit_rows);
  model_->TouchWeights(*pool_);

  spdlog::info("model {} ({}): {} layers, {} heads ({} KV), vocab {}, context {}",
               model_config.name, model_config.architecture, model_config.n_layer,
               model_config.n_head, model_config.n_kv_head, model_config.vocab_size, max_context_);
  spdlog::info(
      "reuse_cache: {}, block_size: {}, kv_cache: {} blocks of {} bytes ({:.1f} MiB, {}), "
      "max_batch_tokens: {}, threads: {}, kernels: {}",
      config_.enable_prefix_caching, block_size, num_blocks_, block_bytes_,
      static_cast<double>(num_blocks_) * static_cast<double>(block_bytes_) / (1 << 20),
      config_.kv_type, config_.max_batch_tokens, pool_->num_threads(), numerics_);
  if (paged_kv_.type == kernels::KvType::kQ8 &&
      kernels::BestCpuTarget() == kernels::CpuTarget::kScalar) {
    // Its integer sums have AVX2 and AVX-512 kernels; the portable one is several times slower.
    spdlog::warn(
        "the q8 KV cache is attended by the portable kernel on this CPU (no AVX2), "
        "slower than f16's; q8 still holds 1.85x the tokens");
  }

  if (!config_.task_prompts_json.empty()) ComputeTaskPrompts(config_.task_prompts_json);
  PublishStats();
  thread_ = std::thread([this] { Loop(); });
}

void EngineImpl::OpenTiers(const ModelConfig& model_config) {
  if (config_.kv_disk_path.empty() && config_.kv_redis_url.empty()) return;
  if (!config_.enable_prefix_caching) {
    throw Error("KV tiers (--kv-disk-path, --kv-redis-url) need prefix caching; it is off");
  }
  TierIdentity identity;
  identity.root_fingerprint = cache_->root_fingerprint();
  Sha256 layout;  // how a block's bytes are laid out: see kernels::PagedKv
  layout.Update("reprise-kv-layout-v1");
  layout.UpdateValue(static_cast<uint32_t>(paged_kv_.type));
  layout.UpdateValue(static_cast<uint64_t>(model_config.n_layer));
  layout.UpdateValue(static_cast<uint64_t>(model_config.n_kv_head));
  layout.UpdateValue(static_cast<uint64_t>(model_config.head_dim));
  layout.UpdateValue(static_cast<uint64_t>(config_.block_size));
  layout.UpdateValue(static_cast<uint64_t>(block_bytes_));
  identity.layout_digest = layout.Finish();
  identity.block_size = static_cast<uint32_t>(config_.block_size);
  identity.block_bytes = block_bytes_;
  // Whatever the tiers gain or lose is told on the KV event stream, when there is one.
  if (kv_events_) tier_events_ = std::make_unique<TierEvents>(*kv_events_);
  std::vector<std::unique_ptr<KvTier>> tiers;  // nearest first
  if (!config_.kv_disk_path.empty()) {
    tiers.push_back(std::make_unique<DiskTier>(
        identity, DiskTierConfig{config_.kv_disk_path, config_.kv_disk_size_bytes, false,
                                 tier_events_.get()}));
  }
  if (!config_.kv_redis_url.empty()) {
    redis::RedisEndpoint endpoint = redis::ParseRedisUrl(config_.kv_redis_url);
    redis::ResolvePassword(endpoint, config_.kv_redis_password_file, config_.kv_redis_password);
    RedisTierConfig redis_config;
    redis_config.ttl = std::chrono::seconds(config_.kv_redis_ttl_seconds);
    redis_config.capacity_bytes = config_.kv_redis_size_bytes;
    redis_config.listener = tier_events_.get();
    spdlog::info("remote KV tier: Redis at {}", endpoint.Describe());
    tiers.push_back(std::make_unique<RedisTier>(
        identity, redis_config, std::make_shared<redis::RedisClient>(std::move(endpoint))));
  }
  tier_link_ = std::make_unique<TierLink>(
      std::make_unique<TierSet>(identity, std::move(tiers), TierSetConfig{}), *cache_,
      config_.kv_write_through_priority);
  tier_link_->tiers().SetWakeup([this] {
    {
      std::lock_guard lock(mutex_);
      loads_ready_ = true;
    }
    wake_.notify_one();
  });
  cache_listeners_.Add(tier_link_.get());
  scheduler_->SetLoader(tier_link_.get());
}

void EngineImpl::OpenKvEvents() {
  if (config_.kv_events_redis_url.empty()) return;
  if (!config_.enable_prefix_caching) {
    throw Error("KV events (--kv-events-redis-url) need prefix caching; it is off");
  }
  redis::RedisEndpoint endpoint = redis::ParseRedisUrl(config_.kv_events_redis_url);
  redis::ResolvePassword(endpoint, config_.kv_redis_password_file, config_.kv_redis_password);
  kvevents::KvEventPublisherConfig events;
  events.replica_id = config_.kv_replica_id;
  events.stream = config_.kv_events_stream;
  events.max_stream_entries = config_.kv_events_max_len;
  spdlog::info("KV events: stream '{}' at {}, replica id '{}'", events.stream, endpoint.Describe(),
               events.replica_id);
  kv_events_ = std::make_unique<kvevents::KvEventPublisher>(
      cache_->root_fingerprint(), std::move(events),
      std::make_shared<redis::RedisClient>(std::move(endpoint)));
  cache_listeners_.Add(kv_events_.get());
}

void EngineImpl::ComputeTaskPrompts(const std::string& json_text) {
  std::vector<TaskPromptSpec> specs = ParseTaskPrompts(json_text);
  const auto block_size = static_cast<size_t>(config_.block_size);
  size_t blocks_needed = 0;
  std::vector<std::vector<int32_t>> token_lists;
  for (const auto& spec : specs) {
    token_lists.push_back(tokenizer_->EncodePrompt(spec.prompt, /*add_bos=*/true));
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
  // A task prompt only finishes through on_finish when it failed (a fault in its step).
  std::string failure;
  for (size_t i = 0; i < specs.size(); ++i) {
    GenerationRequest request;
    request.prompt_tokens = token_lists[i];
    StreamCallbacks callbacks;
    callbacks.on_finish = [&failure, task_id = specs[i].task_id](const GenerationOutput& output) {
      if (failure.empty()) failure = fmt::format("task prompt {}: {}", task_id, output.error);
    };
    auto sequence = MakeSequence(std::move(request), std::move(callbacks));
    sequence->prefill_only = true;
    sequence->retention.pinned = true;
    scheduler_->Add(std::move(sequence));
    task_prompts_[specs[i].task_id] = TaskPrompt{token_lists[i]};
    task_infos_.push_back({specs[i].task_id, token_lists[i].size(),
                           (token_lists[i].size() + block_size - 1) / block_size});
  }
  RunUntilIdle();
  if (!failure.empty()) throw Error(failure);
  for (const auto& info : task_infos_) {
    spdlog::info("task prompt {}: {} tokens in {} pinned blocks", info.task_id, info.tokens,
                 info.blocks);
  }
}

}  // namespace reprise
