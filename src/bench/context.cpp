#include "bench/context.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "bench/engine_target.h"
#include "bench/http_target.h"
#include "bench/texts.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "hf/model_source.h"
#include "model/model_config.h"

namespace reprise::bench {

BenchContext::BenchContext(BenchOptions options, std::string model_path, BenchProgress& progress)
    : options_(std::move(options)), model_path_(std::move(model_path)), progress_(progress) {}

std::unique_ptr<BenchTarget> BenchContext::MakeTarget(bool prefix_caching, size_t kv_cache_bytes,
                                                      const std::string& kv_disk_path) const {
  if (remote()) {
    return std::make_unique<BenchHttpTarget>(options_.url, options_.served_model, model_path_);
  }
  return std::make_unique<BenchEngineTarget>(
      EngineConfigFor(prefix_caching, kv_cache_bytes, kv_disk_path));
}

EngineConfig BenchContext::EngineConfigFor(bool prefix_caching, size_t kv_cache_bytes,
                                           const std::string& kv_disk_path) const {
  EngineConfig config;
  config.model_path = model_path_;
  config.enable_prefix_caching = prefix_caching;
  config.block_size = options_.block_size;
  config.kv_type = options_.kv_type;
  config.mmap_weights = options_.mmap_weights;
  config.schedule_policy = options_.schedule_policy;
  config.eviction_policy = options_.eviction_policy;
  config.max_batch_tokens = options_.max_batch_tokens;
  config.max_running_requests = options_.max_running_requests;
  config.num_threads = options_.threads;
  config.kv_disk_path = kv_disk_path.empty() ? options_.kv_disk_path : kv_disk_path;
  if (!options_.kv_disk_size.empty()) {
    config.kv_disk_size_bytes = ParseByteSize(options_.kv_disk_size);
  }
  if (kv_cache_bytes > 0) {
    config.kv_cache_memory_bytes = kv_cache_bytes;
  } else if (!options_.kv_cache_memory.empty()) {
    config.kv_cache_memory_bytes = ParseByteSize(options_.kv_cache_memory);
  } else {
    config.kv_cache_memory_bytes = size_t{1} << 30;
  }
  return config;
}

size_t BenchContext::KvBytesPerToken() const {
  if (model_path_.empty()) return 0;
  gguf::GgufFile file = OpenModelFile(model_path_);
  ModelConfig config = ModelConfig::FromGguf(file);
  size_t element = options_.kv_type == "f32" ? 4 : 2;
  return static_cast<size_t>(config.n_layer) * 2 * static_cast<size_t>(config.n_kv_head) *
         static_cast<size_t>(config.head_dim) * element;
}

int64_t BenchContext::ContextLength() const {
  if (model_path_.empty()) return 0;
  return ModelConfig::FromGguf(OpenModelFile(model_path_)).context_length;
}

size_t BenchContext::FitToContext(const std::string& workload, size_t wanted, size_t reserve,
                                  size_t minimum) const {
  const int64_t context = ContextLength();
  if (context <= 0) return wanted;
  const auto room = static_cast<size_t>(context);
  if (room < reserve + minimum) {
    throw ContextTooSmall(fmt::format(
        "bench {}: the model's context of {} tokens is too small: the workload needs at least {} "
        "tokens ({} for its prompts' fixed part and answers, {} for the sized part)",
        workload, context, reserve + minimum, reserve, minimum));
  }
  const size_t fitted = std::min(wanted, room - reserve);
  if (fitted < wanted) {
    spdlog::warn("bench {}: {} tokens instead of {}, to fit the model's context of {} tokens",
                 workload, fitted, wanted, context);
  }
  return fitted;
}

int BenchContext::threads() const {
  if (options_.threads > 0) return options_.threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void WarmUp(BenchTarget& target) {
  BenchRequest request;
  request.prompt = Prose(999'999, 48);
  request.max_tokens = 4;
  target.Run(request);
  target.ClearCache(/*every_tier=*/false);
}

}  // namespace reprise::bench

namespace reprise::bench {

std::string FitProse(BenchTarget& target, uint64_t seed, size_t tokens) {
  return FitToTokens([seed](size_t words) { return Prose(seed, words); }, tokens,
                     [&target](const std::string& text) { return target.CountTokens(text); },
                     tokens * 2)
      .text;
}

}  // namespace reprise::bench
