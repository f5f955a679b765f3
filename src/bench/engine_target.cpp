#include "bench/engine_target.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <future>
#include <limits>
#include <thread>

#include "core/error.h"

namespace reprise::bench {

double BenchResult::PrefillTokensPerSecond() const {
  if (ttft_seconds <= 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(prompt_tokens) / ttft_seconds;
}

double BenchResult::DecodeTokensPerSecond() const {
  double seconds = total_seconds - ttft_seconds;
  if (completion_tokens < 2 || seconds <= 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(completion_tokens - 1) / seconds;
}

namespace {

double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace

BenchEngineTarget::BenchEngineTarget(const EngineConfig& config)
    : config_(config), engine_(std::make_unique<Engine>(config)) {}

BenchResult BenchEngineTarget::Run(const BenchRequest& request) {
  GenerationRequest generation;
  generation.prompt = request.prompt;
  generation.prompt_tokens = request.prompt_tokens;
  generation.cache.cache_salt = request.cache_salt;
  generation.sampling.temperature = 0.0f;
  generation.sampling.max_tokens = request.max_tokens;
  generation.sampling.ignore_eos = request.ignore_eos;
  std::promise<GenerationOutput> done;
  std::future<GenerationOutput> finished = done.get_future();
  StreamCallbacks callbacks;
  callbacks.on_finish = [&done](const GenerationOutput& output) { done.set_value(output); };
  const double cpu_before = ProcessCpuSeconds();
  engine_->Submit(std::move(generation), std::move(callbacks));
  GenerationOutput output = finished.get();
  const double cpu_after = ProcessCpuSeconds();
  runs_finished_.fetch_add(1);
  if (output.finish_reason == FinishReason::kError) throw Error(output.error);
  BenchResult result;
  result.ttft_seconds = output.ttft_seconds;
  result.prefill_compute_seconds = output.prefill_compute_seconds;
  result.total_seconds = output.total_seconds;
  result.cpu_seconds = cpu_after - cpu_before;
  result.prompt_tokens = output.prompt_tokens;
  result.cached_tokens = output.cached_tokens;
  result.completion_tokens = output.token_ids.size();
  result.text = std::move(output.text);
  return result;
}

size_t BenchEngineTarget::CountTokens(const std::string& text) {
  return engine_->Tokenize(text, true).size();
}

std::vector<int32_t> BenchEngineTarget::Tokenize(const std::string& text) {
  return engine_->Tokenize(text, true);
}

std::optional<EngineTimes> BenchEngineTarget::Times() {
  // The engine publishes its stats after the step that finished a request, a moment after the
  // request's caller is woken: wait for that step to be counted.
  const uint64_t expected = runs_finished_.load();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  EngineStats stats = engine_->Stats();
  while (stats.requests_finished < expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    stats = engine_->Stats();
  }
  EngineTimes times{stats.scheduling_seconds_total, stats.forward_seconds_total};
  times.tier_load_seconds = stats.tier_load_seconds_sum;
  for (const KvTierStats& tier : stats.tiers) times.tier_bytes_read += tier.bytes_read;
  return times;
}

bool BenchEngineTarget::ClearCache(bool every_tier) {
  if (every_tier) {
    engine_->ClearCache(std::vector<std::string>{"memory", "disk", "remote"});
  } else {
    engine_->ClearCache();
  }
  return true;
}

std::string BenchEngineTarget::Describe() const {
  ModelInfo info = engine_->Info();
  return fmt::format("engine (reuse {}, {} threads, {:.0f} MiB KV, block {})",
                     config_.enable_prefix_caching ? "on" : "off", info.num_threads,
                     static_cast<double>(info.kv_cache_bytes) / (1 << 20), info.block_size);
}

}  // namespace reprise::bench
