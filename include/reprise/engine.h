// The public C++ API of Reprise: load a GGUF model and generate text with automatic prefix
// caching. The counterpart of vLLM's `LLM(model, enable_prefix_caching=True).generate(...)`.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace reprise {

struct GenerationRequest;

// Where in an engine step a fault hook runs (see EngineConfig::fault_hook).
enum class EngineFaultSite {
  kForward,  // before the step's forward pass, once per request in the batch
  kSample,   // before a request's next token is sampled
  kLoad,     // when a request's blocks loaded from a KV tier are handed back, before their use
};

struct EngineConfig {
  std::string model_path;
  bool enable_prefix_caching = true;  // --no-enable-prefix-caching, REUSE_CACHE=0, ...
  int block_size = 16;                // positions per KV block: a power of two in 1..256
  size_t kv_cache_memory_bytes = 0;   // 0: a share of free memory (see Engine::Engine)
  std::string kv_type = "f16";        // "f16" or "f32"
  int max_batch_tokens = 512;         // tokens computed per engine step (decode + prefill)
  int max_running_requests = 64;      // requests in flight at once; more wait in the queue
  // The order of prefill chunks: "cache-aware" (least uncached prompt first, so requests that
  // reuse a cached prefix are not queued behind cold prompts; "lpm", SGLang's name, is the same)
  // or "fcfs" (arrival order).
  std::string schedule_policy = "cache-aware";
  // Which cached blocks go first when memory runs short: "scan-resistant" (blocks that proved
  // their reuse are kept over blocks used once, so documents visited in a cycle larger than the
  // cache, or a burst of one-time prompts, do not flush everything) or "lru" (least recently
  // used first). Priority and TTL come before either.
  std::string eviction_policy = "scan-resistant";
  size_t max_queued_requests = 1024;  // Submit refuses beyond this (the server answers 503)
  int num_threads = 0;                // kernel threads; 0: every core
  // Where the weights are held: false (the default) reads them into private memory backed by
  // 2 MiB pages where the kernel allows (decode streams every weight each token, and from the
  // file's 4 KiB-page map it was 6-9% slower); true (--mmap) keeps the file's memory map, which
  // processes on one machine share and which reads nothing until used. Weights larger than nine
  // tenths of available memory are mapped whatever this says (a copy would not fit).
  bool mmap_weights = false;
  int64_t max_context = 0;  // 0: the model's context length
  // The disk tier: KV blocks evicted from memory are written under this folder (created when
  // missing) and loaded back on a later miss, after a restart too. Empty: no disk tier.
  std::string kv_disk_path;
  size_t kv_disk_size_bytes = 0;  // the disk tier's size cap; 0: none
  // The shared (remote) tier: KV blocks in Redis or a Redis Cluster at redis://HOST:PORT[/DB],
  // shared by every replica using it. Empty: none. The password comes from the first line of
  // kv_redis_password_file, else kv_redis_password (`serve` fills it from REDIS_PASSWORD), else
  // the URL; it is never logged.
  std::string kv_redis_url;
  std::string kv_redis_password_file;
  std::string kv_redis_password;
  int64_t kv_redis_ttl_seconds = 24 * 3600;
  size_t kv_redis_size_bytes = 0;  // bound on what this process keeps there; 0: none
  // KV events: every block this engine's memory stores or drops is told, in batches, to a Redis
  // Stream (XADD ... MAXLEN ~ kv_events_max_len) at redis://HOST:PORT[/DB], so that a router
  // knows who holds what. Empty: none. The password is found as for kv_redis_url. kv_replica_id
  // names this engine in the events (required with them).
  std::string kv_events_redis_url;
  std::string kv_events_stream = "reprise:kv-events";
  size_t kv_events_max_len = 10000;  // stream entries (batches of events) kept, about
  std::string kv_replica_id;
  // Blocks committed with at least this cache priority (and pinned task prompts) are written to
  // the tiers at once rather than when memory evicts them.
  int kv_write_through_priority = 70;
  // Static task prompts: a JSON list of {"task_id": ..., "prompt": "..."}, computed and pinned
  // at start-up. The text itself, or empty.
  std::string task_prompts_json;
  // For tests of the fault boundary: called on the step thread at each site of each step, for
  // every request there. An exception it throws is handled as any fault in a step is: the
  // requests it touches finish with FinishReason::kError and the engine goes on. Unset: none.
  std::function<void(EngineFaultSite site, const GenerationRequest& request)> fault_hook;
  // The chat template chat prompts are rendered with: empty for the model's own (a model without
  // one gets the generic chatml template, with a warning at start-up), else a built-in name
  // (chatml, llama2, llama3, mistral), a Jinja file's path or Jinja text. It is checked at
  // start-up by rendering a probe conversation; a bad one makes the constructor throw.
  std::string chat_template;
};

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  int top_k = 0;             // 0: no limit
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int max_tokens = 16;
  std::optional<uint64_t> seed;  // unset: a fresh random seed per request
  std::vector<std::string> stop;
  bool ignore_eos = false;
  // Report each generated token's log-probability and this many of the most likely tokens at
  // its position (0..kMaxTopLogprobs); unset: none, and nothing is computed.
  std::optional<int> logprobs;
};

inline constexpr int kMaxTopLogprobs = 20;

// One token's log-probability: the log-softmax of the model's raw logits at that position
// (before penalties, temperature and truncation, like vLLM's default "raw_logprobs").
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::string bytes;  // the token's bytes (may be part of a UTF-8 character)
};

// A generated token's log-probability and the most likely tokens at its position.
struct SampledLogprobs {
  TokenLogprob sampled;
  std::vector<TokenLogprob> top;  // most likely first (ties: lower id first)
};

// How a request's blocks are shared and kept.
struct CacheOptions {
  std::string cache_salt;  // requests with different salts never share blocks
  std::string task_id;     // a static task prompt to prepend (empty: none)
  int priority = 35;       // 0..100: higher-priority blocks are evicted after lower ones
  double ttl_seconds = 0;  // keep this prefix at least this long when memory allows
  // Who the blocks this request adds to the cache belong to (the server passes its tenant's
  // salt), for ClearCache(tiers, owner). Only a digest of it is kept, in memory and in the
  // header of each block written to a tier. Not part of the key: isolation comes from cache_salt.
  std::string owner;
};

struct GenerationRequest {
  std::string prompt;                  // text, tokenized with the model's BOS rule...
  std::vector<int32_t> prompt_tokens;  // ...unless these are given
  bool add_special_tokens = true;      // add BOS as the model asks (false for chat-templated text
                                       // that already holds it)
  SamplingParams sampling;
  CacheOptions cache;
  bool record_logits = false;  // keep each sampled position's logits (for exactness tests)
};

enum class FinishReason { kLength, kStop, kCancelled, kError };
const char* FinishReasonName(FinishReason reason);  // "length", "stop", "cancelled", "error"

// Whether `name` is an EngineConfig::schedule_policy the engine accepts (cache-aware, lpm, fcfs),
// so front ends can refuse a bad flag before loading a model.
bool IsSchedulePolicy(const std::string& name);
inline constexpr const char* kSchedulePolicyNames = "cache-aware, lpm or fcfs";  // for messages
// Likewise for EngineConfig::eviction_policy.
bool IsEvictionPolicy(const std::string& name);
inline constexpr const char* kEvictionPolicyNames = "scan-resistant or lru";  // for messages

// Prompt tokens whose KV was reused, by where it came from.
struct CacheSources {
  size_t memory = 0;  // the prefix cache in RAM
  size_t disk = 0;    // the disk tier
  size_t remote = 0;  // a store shared by replicas
};

struct GenerationOutput {
  uint64_t request_id = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  size_t prompt_tokens = 0;    // including any task prompt
  size_t cached_tokens = 0;    // prompt tokens whose KV came from cache
  CacheSources cache_sources;  // cached_tokens by source
  FinishReason finish_reason = FinishReason::kLength;
  std::string error;        // set when finish_reason is kError
  double ttft_seconds = 0;  // submission to first token
  // Forward-pass time of the engine steps that computed this request's prompt (until its first
  // token): TTFT minus queueing, matching, scheduling and sampling.
  double prefill_compute_seconds = 0;
  double total_seconds = 0;
  std::vector<std::vector<float>> logits;  // [generated][vocab] when record_logits
  // One per token_ids entry when sampling.logprobs is set.
  std::vector<SampledLogprobs> logprobs;
};

// One streamed token: its text delta (never half a UTF-8 character; may be empty while a stop
// string is still possible).
struct TokenEvent {
  uint64_t request_id = 0;
  int32_t token = 0;
  std::string text;
  size_t prompt_tokens = 0;
  size_t cached_tokens = 0;
  // The log-probabilities of the tokens sampled since the previous event (usually `token`
  // alone) when sampling.logprobs is set.
  std::vector<SampledLogprobs> logprobs;
  CacheSources cache_sources;
};

struct StreamCallbacks {
  std::function<void(const TokenEvent&)> on_token;         // called on the engine thread
  std::function<void(const GenerationOutput&)> on_finish;  // called once, on the engine thread
};

// One KV tier beyond memory (disk, remote): occupancy now and counters since start.
struct KvTierStats {
  std::string name;
  bool available = true;
  std::string last_error;
  int64_t blocks = 0;
  uint64_t bytes = 0;
  uint64_t capacity_bytes = 0;  // 0: no cap
  uint64_t blocks_written = 0;
  uint64_t bytes_written = 0;
  uint64_t blocks_read = 0;
  uint64_t bytes_read = 0;
  uint64_t evictions = 0;
  uint64_t corrupt_blocks = 0;  // refused at load or start-up, and deleted
  uint64_t foreign_blocks = 0;  // another model or KV layout: ignored
  uint64_t errors = 0;          // I/O errors
};

struct EngineStats {
  uint64_t prefix_cache_queries = 0;  // prompt tokens looked up
  uint64_t prefix_cache_hits = 0;     // prompt tokens found in cache
  uint64_t evictions = 0;
  int64_t blocks_total = 0;
  int64_t blocks_in_use = 0;
  int64_t blocks_cached = 0;
  int64_t blocks_free = 0;
  int64_t blocks_pinned = 0;
  int64_t blocks_protected = 0;  // cached or in use, kept over blocks used once (scan-resistant)
  uint64_t requests_finished = 0;
  uint64_t requests_cancelled = 0;
  uint64_t preemptions = 0;
  size_t requests_running = 0;
  size_t requests_waiting = 0;
  uint64_t prompt_tokens_total = 0;
  uint64_t generation_tokens_total = 0;
  CacheSources prompt_tokens_cached;  // of prompt_tokens_total, reused from each source
  // The tiers beyond memory, nearest first, and their loads: counts per latency bucket (upper
  // bounds in seconds in tier_load_bounds, then one bucket beyond), and the sum of latencies.
  std::vector<KvTierStats> tiers;
  std::vector<double> tier_load_bounds;
  std::vector<uint64_t> tier_load_buckets;
  double tier_load_seconds_sum = 0;
  uint64_t tier_writes_dropped = 0;  // write-backs dropped because the write queue was full
  // KV events (when kv_events_redis_url is set): events written to the stream, dropped (queue
  // full or Redis unreachable), failed writes, and whether the last write succeeded.
  bool kv_events = false;
  uint64_t kv_events_published = 0;
  uint64_t kv_events_dropped = 0;
  uint64_t kv_events_write_failures = 0;
  bool kv_events_connected = false;
  // Where the engine's step thread spends its time. Scheduling covers admission, prefix
  // matching and hashing, block allocation and eviction, committing blocks to the index and
  // releasing them: with prefix caching off it is the bookkeeping that is left, so the difference
  // between the two is what the cache itself costs.
  double scheduling_seconds_total = 0;
  double forward_seconds_total = 0;  // model forward passes
  uint64_t steps_total = 0;          // engine steps that ran a forward pass
};

struct ModelInfo {
  std::string name;
  std::string architecture;
  int64_t vocab_size = 0;
  int64_t context_length = 0;  // effective (max_context when set)
  int block_size = 0;
  bool prefix_caching = true;
  std::string kv_type;
  std::string numerics;  // the kernels' arithmetic, e.g. "avx512.1": part of every block key
  int64_t kv_cache_blocks = 0;
  size_t kv_cache_bytes = 0;
  int num_threads = 0;
  size_t decode_weight_bytes = 0;  // weight bytes one decoded token reads (all but the embedding)
};

struct TaskPromptInfo {
  std::string task_id;
  size_t tokens = 0;
  size_t blocks = 0;
};

// The blocks a cache holds, per tier, named by their keys: what Engine::ListCacheBlocks answers
// and GET /v1/cache/blocks sends, so that a reader of the KV events (the router) can start from
// it when it starts late, sees a replica restart, or loses events.
using BlockDigest = std::array<uint8_t, 32>;

struct CacheBlockRef {
  BlockDigest key{};
  BlockDigest parent{};         // the previous block's key, or the root fingerprint
  BlockDigest salt_digest{};    // of everything mixed into the key besides the tokens
  BlockDigest tenant_digest{};  // the block's owner (TenantSaltDigest; zero: none)
};

struct CacheBlockList {
  std::string replica_id;  // the KV events' replica id (empty: none)
  BlockDigest root{};      // the cache's root fingerprint (model, KV type, block size)
  // With KV events: the publisher's instance and the number of its next event. The lists hold
  // every change told by an event numbered below next_seq; a later event may be in them too, so a
  // reader applies the events from next_seq on (each one sets or clears one block: applying one
  // twice changes nothing).
  bool kv_events = false;
  std::string instance;
  uint64_t next_seq = 0;
  std::vector<CacheBlockRef> memory;  // full blocks in the memory pool's index
  std::vector<CacheBlockRef> disk;    // the disk tier's index
  // The blocks this process wrote to the shared tier and whose TTL has not passed (each replica
  // lists and tells of its own writes only).
  std::vector<CacheBlockRef> remote;
};

class EngineImpl;

class Engine {
 public:
  // Loads the model, sizes the KV cache, computes and pins task prompts, starts the step thread.
  // Throws reprise::Error (a std::runtime_error) with a message for the user on bad config/files.
  explicit Engine(const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Blocking batch generation; outputs in the order of the inputs.
  std::vector<GenerationOutput> Generate(const std::vector<std::string>& prompts,
                                         const SamplingParams& params);
  std::vector<GenerationOutput> Generate(std::vector<GenerationRequest> requests);

  // Streaming: returns the request id at once. Throws reprise::Error for a request that can never
  // run (prompt beyond the context, unknown task_id) and QueueFullError when the queue is full.
  uint64_t Submit(GenerationRequest request, StreamCallbacks callbacks);
  // Stops a request and frees its blocks; its on_finish reports kCancelled. Unknown ids are
  // ignored.
  void Cancel(uint64_t request_id);

  // Special-token texts become tokens; with add_special_tokens BOS is added as the model asks,
  // unless the text already starts with it.
  std::vector<int32_t> Tokenize(const std::string& text, bool add_special_tokens) const;
  // Tokenizes `request.prompt` into `request.prompt_tokens` (clearing the text) as Submit would,
  // so that a caller that needs the length tokenizes once: BOS is left out when a task prompt
  // (which holds it) comes first. Returns the length of the whole prompt the engine will see,
  // task prompt included. Given prompt_tokens are kept. Throws Error for an unknown task_id.
  size_t EncodePrompt(GenerationRequest& request) const;
  std::string Detokenize(const std::vector<int32_t>& tokens) const;
  // Renders chat messages with the configured template (or `template_name` when given, as
  // EngineConfig::chat_template), with the generation prompt. Throws reprise::Error when the
  // template fails or refuses the conversation (e.g. roles that do not alternate).
  struct ChatMessage {
    std::string role;
    std::string content;
  };
  std::string ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                const std::string& template_name = "") const;

  ModelInfo Info() const;
  EngineStats Stats() const;
  std::vector<TaskPromptInfo> TaskPrompts() const;
  // Drops every cached block not in use and not pinned; returns how many. They are written to
  // the tiers first (so a later request loads them instead of computing them).
  size_t ClearCache();
  // Clears the named tiers ("memory", "disk", "remote"), memory first; returns the blocks
  // dropped. A tier that is not configured drops nothing; another name throws reprise::Error.
  size_t ClearCache(const std::vector<std::string>& tiers);
  // Drops, from each named tier, the blocks that requests with CacheOptions::owner == `owner`
  // added (in the disk and remote tiers, those whose header names that owner).
  size_t ClearCache(const std::vector<std::string>& tiers, const std::string& owner);
  // The blocks the cache holds now, per tier, with the KV events' position they match (see
  // CacheBlockList).
  CacheBlockList ListCacheBlocks();

 private:
  std::unique_ptr<EngineImpl> impl_;
};

// Thrown by Submit when the queue is full.
class QueueFullError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace reprise
