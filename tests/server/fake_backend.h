// An InferenceBackend with no model, for route tests: bytes are tokens (id = byte + 3, BOS = 1),
// generation emits letters (with made-up logprobs when asked) on its own "engine" thread at a
// fixed pace, and a simulated token-granular prefix cache reports cached_tokens like the real
// engine (longest common prefix with earlier prompts, capped at the prompt length minus one).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "server/inference_backend.h"

namespace reprise::server::testing {

class FakeBackend : public InferenceBackend {
 public:
  static constexpr int32_t kBos = 1;

  struct Options {
    int64_t context_length = 256;
    size_t max_active = 64;  // more: QueueFullError
    std::chrono::microseconds token_interval{500};
    bool has_chat_template = true;
  };

  explicit FakeBackend(Options options) : options_(options), thread_([this] { Loop(); }) {}
  FakeBackend() : FakeBackend(Options{}) {}
  ~FakeBackend() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  uint64_t Submit(GenerationRequest request, StreamCallbacks callbacks) override {
    std::vector<int32_t> tokens = TaskTokens(request);
    std::vector<int32_t> own = OwnTokens(request);
    tokens.insert(tokens.end(), own.begin(), own.end());
    if (static_cast<int64_t>(tokens.size()) >= options_.context_length) {
      throw Error("prompt longer than the context");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (active_.size() >= options_.max_active) throw QueueFullError("queue full");
    Active active;
    active.id = next_id_++;
    active.prompt = std::move(tokens);
    active.max_tokens = request.sampling.max_tokens;
    active.top_logprobs = request.sampling.logprobs;
    active.add_special_tokens = request.add_special_tokens;
    active.cached = CachedPrefix(active.prompt);
    active.callbacks = std::move(callbacks);
    active.start = std::chrono::steady_clock::now();
    last_request_ = request;
    uint64_t id = active.id;
    active_.push_back(std::move(active));
    submitted_++;
    wake_.notify_all();
    return id;
  }

  void Cancel(uint64_t request_id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Active& active : active_) {
      if (active.id == request_id) active.cancelled = true;
    }
  }

  // As the engine's: BOS when asked for, unless the text starts with it ("<s>").
  std::vector<int32_t> Tokenize(const std::string& text, bool add_special) const override {
    std::vector<int32_t> tokens;
    size_t start = 0;
    if (add_special || text.rfind("<s>", 0) == 0) tokens.push_back(kBos);
    if (text.rfind("<s>", 0) == 0) start = 3;
    for (size_t i = start; i < text.size(); ++i) {
      tokens.push_back(static_cast<unsigned char>(text[i]) + 3);
    }
    return tokens;
  }

  size_t EncodePrompt(GenerationRequest& request) const override {
    size_t task_tokens = TaskTokens(request).size();
    if (request.prompt_tokens.empty()) {
      request.prompt_tokens = OwnTokens(request);
      request.prompt.clear();
    }
    ++encoded_;
    return task_tokens + request.prompt_tokens.size();
  }

  std::string Detokenize(const std::vector<int32_t>& tokens) const override {
    std::string text;
    for (int32_t token : tokens) {
      if (token >= 3) text += static_cast<char>(token - 3);
    }
    return text;
  }

  std::string ApplyChatTemplate(const std::vector<Engine::ChatMessage>& messages,
                                const std::string& template_name) const override {
    if (template_name.empty() && !options_.has_chat_template) {
      throw Error("the model has no chat template; pass --chat-template");
    }
    if (!template_name.empty() && template_name != "bos" && template_name != "plain") {
      throw Error("unknown chat template '" + template_name + "'");
    }
    std::string text = template_name == "bos" ? "<s>" : "";
    for (const Engine::ChatMessage& message : messages) {
      text += "<|" + message.role + "|>" + message.content + "\n";
    }
    return text + "<|assistant|>";
  }

  ModelInfo Info() const override {
    ModelInfo info;
    info.name = "fake";
    info.vocab_size = 259;
    info.context_length = options_.context_length;
    info.block_size = 16;
    info.kv_type = "f16";
    info.kv_cache_blocks = 1000;
    return info;
  }

  EngineStats Stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    EngineStats stats;
    stats.blocks_total = 1000;
    for (const Active& active : active_) {
      stats.blocks_in_use += static_cast<int64_t>((active.prompt.size() + 15) / 16);
    }
    stats.blocks_pinned = 1;
    stats.blocks_protected = 1;
    stats.blocks_free = stats.blocks_total - stats.blocks_in_use - stats.blocks_pinned;
    stats.requests_running = active_.size();
    stats.requests_cancelled = cancelled_;
    stats.requests_finished = finished_;
    stats.prefix_cache_queries = queries_;
    stats.prefix_cache_hits = hits_;
    stats.prompt_tokens_cached = Sources(hits_);
    KvTierStats disk;
    disk.name = "disk";
    disk.blocks = 3;
    disk.bytes = 3000;
    disk.corrupt_blocks = 1;
    stats.tiers.push_back(disk);
    stats.tier_load_bounds = {0.01, 0.1};
    stats.tier_load_buckets = {2, 1, 1};
    stats.tier_load_seconds_sum = 0.5;
    return stats;
  }

  std::vector<TaskPromptInfo> TaskPrompts() const override { return {{"1", 8, 1}}; }

  // Forgets every prompt (the fake keeps no owners) and remembers which tiers and whose clear.
  size_t ClearCache(const std::vector<std::string>& tiers,
                    const std::optional<std::string>& owner) override {
    std::lock_guard<std::mutex> lock(mutex_);
    cleared_tiers_ = tiers;
    cleared_owners_.push_back(owner);
    size_t cleared = history_.size();
    history_.clear();
    return cleared;
  }

  // One memory block per prompt it remembers (keys made of their order), no events.
  CacheBlockList ListCacheBlocks() override {
    std::lock_guard<std::mutex> lock(mutex_);
    CacheBlockList list;
    list.replica_id = "fake";
    for (size_t i = 0; i < history_.size(); ++i) {
      CacheBlockRef block;
      block.key.fill(static_cast<uint8_t>(i + 1));
      block.parent.fill(static_cast<uint8_t>(i));
      list.memory.push_back(block);
    }
    return list;
  }

  std::vector<std::string> cleared_tiers() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return cleared_tiers_;
  }

  size_t active() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return active_.size();
  }
  uint64_t cancelled() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return cancelled_;
  }
  uint64_t submitted() const { return submitted_.load(); }
  std::vector<std::optional<std::string>> cleared_owners() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return cleared_owners_;
  }
  uint64_t encoded() const { return encoded_.load(); }  // EncodePrompt calls
  GenerationRequest last_request() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_request_;
  }
  // Waits until no request is running; false on time-out.
  bool WaitIdle(std::chrono::milliseconds timeout) const {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (active() == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return active() == 0;
  }

 private:
  struct Active {
    uint64_t id = 0;
    std::vector<int32_t> prompt;
    std::vector<int32_t> generated;
    std::string text;
    int max_tokens = 0;
    std::optional<int> top_logprobs;
    std::vector<SampledLogprobs> logprobs;
    bool add_special_tokens = true;
    size_t cached = 0;
    bool cancelled = false;
    double ttft = 0;
    StreamCallbacks callbacks;
    std::chrono::steady_clock::time_point start;
  };

  // As the engine does: a task prompt (with BOS) first, then the request without BOS.
  static std::vector<int32_t> TaskTokens(const GenerationRequest& request) {
    if (request.cache.task_id.empty()) return {};
    if (request.cache.task_id != "1") throw Error("unknown task_id");
    std::vector<int32_t> tokens{kBos};
    for (char c : std::string("SYSTEM:")) tokens.push_back(static_cast<unsigned char>(c) + 3);
    return tokens;
  }
  std::vector<int32_t> OwnTokens(const GenerationRequest& request) const {
    if (!request.prompt_tokens.empty()) return request.prompt_tokens;
    return Tokenize(request.prompt, request.add_special_tokens && request.cache.task_id.empty());
  }

  // Made-up log-probabilities: the sampled token at -0.25 and on top, then the following
  // letters at -1, -2, ...
  static SampledLogprobs FakeLogprobs(int32_t token, int top) {
    auto entry = [](int32_t id, float logprob) {
      return TokenLogprob{id, logprob, std::string(1, static_cast<char>(id - 3))};
    };
    SampledLogprobs result{entry(token, -0.25f), {}};
    for (int k = 0; k < top; ++k) {
      result.top.push_back(k == 0 ? result.sampled : entry(token + k, -static_cast<float>(k)));
    }
    return result;
  }

  // The fake's reuse by source: the first block's worth from memory, the rest from "disk".
  static CacheSources Sources(size_t cached) {
    CacheSources sources;
    sources.memory = std::min<size_t>(cached, 16);
    sources.disk = cached - sources.memory;
    return sources;
  }

  // Caller holds mutex_.
  size_t CachedPrefix(const std::vector<int32_t>& prompt) {
    size_t best = 0;
    for (const std::vector<int32_t>& old : history_) {
      size_t n = 0;
      while (n < old.size() && n < prompt.size() && old[n] == prompt[n]) ++n;
      best = std::max(best, n);
    }
    best = std::min(best, prompt.size() - 1);
    queries_ += prompt.size();
    hits_ += best;
    return best;
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (active_.empty()) {
        wake_.wait(lock, [this] { return stop_ || !active_.empty(); });
        continue;
      }
      for (auto it = active_.begin(); it != active_.end();) {
        Active& active = *it;
        bool done =
            active.cancelled || static_cast<int>(active.generated.size()) >= active.max_tokens;
        if (!done) {
          int32_t token = 'a' + 3 + static_cast<int32_t>(active.generated.size() % 26);
          active.generated.push_back(token);
          TokenEvent event{active.id,
                           token,
                           std::string(1, static_cast<char>(token - 3)),
                           active.prompt.size(),
                           active.cached,
                           {},
                           Sources(active.cached)};
          if (active.top_logprobs) {
            event.logprobs.push_back(FakeLogprobs(token, *active.top_logprobs));
            active.logprobs.push_back(event.logprobs.back());
          }
          active.text += event.text;
          if (active.generated.size() == 1) {
            active.ttft =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - active.start)
                    .count();
          }
          if (active.callbacks.on_token) active.callbacks.on_token(event);
          ++it;
          continue;
        }
        GenerationOutput output;
        output.request_id = active.id;
        output.text = active.text;
        output.token_ids = active.generated;
        output.logprobs = active.logprobs;
        output.prompt_tokens = active.prompt.size();
        output.cached_tokens = active.cached;
        output.cache_sources = Sources(active.cached);
        output.finish_reason = active.cancelled ? FinishReason::kCancelled : FinishReason::kLength;
        output.ttft_seconds = active.ttft;
        output.total_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - active.start).count();
        if (active.cancelled) {
          ++cancelled_;
        } else {
          ++finished_;
          history_.push_back(active.prompt);
        }
        StreamCallbacks callbacks = std::move(active.callbacks);
        it = active_.erase(it);
        if (callbacks.on_finish) callbacks.on_finish(output);
      }
      wake_.wait_for(lock, options_.token_interval, [this] { return stop_; });
    }
    // Whatever is left ends as cancelled, as the real engine does on shutdown.
    for (Active& active : active_) {
      GenerationOutput output;
      output.request_id = active.id;
      output.finish_reason = FinishReason::kCancelled;
      if (active.callbacks.on_finish) active.callbacks.on_finish(output);
    }
    active_.clear();
  }

  Options options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::list<Active> active_;
  std::vector<std::vector<int32_t>> history_;
  std::vector<std::string> cleared_tiers_;
  std::vector<std::optional<std::string>> cleared_owners_;
  uint64_t next_id_ = 1;
  uint64_t cancelled_ = 0;
  uint64_t finished_ = 0;
  uint64_t queries_ = 0;
  uint64_t hits_ = 0;
  std::atomic<uint64_t> submitted_{0};
  mutable std::atomic<uint64_t> encoded_{0};
  GenerationRequest last_request_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after everything above is constructed
};

}  // namespace reprise::server::testing
