#include "server/metrics.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "server/response_builder.h"

namespace reprise::server {
namespace {

// vLLM's buckets, so that existing dashboards read the same.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kLatencyBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                             5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                             60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

// Appends "# HELP", "# TYPE" and one sample line.
class Exposition {
 public:
  explicit Exposition(const std::string& model_name)
      : label_(fmt::format("model_name=\"{}\"", EscapeLabelValue(model_name))) {}

  void Header(const std::string& name, const char* type, const char* help) {
    text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }

  template <typename T>
  void Sample(const std::string& name, T value, const std::string& extra_labels = "") {
    text_ += fmt::format("{}{{{}{}}} {}\n", name, label_,
                         extra_labels.empty() ? "" : "," + extra_labels, value);
  }

  template <typename T>
  void Metric(const std::string& name, const char* type, const char* help, T value) {
    Header(name, type, help);
    Sample(name, value);
  }

  void HistogramMetric(const std::string& name, const char* help, const Histogram& histogram) {
    Header(name, "histogram", help);
    for (size_t i = 0; i < histogram.upper_bounds().size(); ++i) {
      Sample(name + "_bucket", histogram.counts()[i],
             fmt::format("le=\"{}\"", histogram.upper_bounds()[i]));
    }
    Sample(name + "_bucket", histogram.count(), "le=\"+Inf\"");
    Sample(name + "_sum", histogram.sum());
    Sample(name + "_count", histogram.count());
  }

  // One sample per tier, labelled tier="<name>".
  template <typename Field>
  void TierMetric(const std::string& name, const char* type, const char* help,
                  const std::vector<KvTierStats>& tiers, Field field) {
    if (tiers.empty()) return;
    Header(name, type, help);
    for (const KvTierStats& tier : tiers) {
      Sample(name, field(tier), fmt::format("tier=\"{}\"", EscapeLabelValue(tier.name)));
    }
  }

  std::string Take() { return std::move(text_); }

 private:
  std::string label_;
  std::string text_;
};

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size(), 0) {
  std::sort(upper_bounds_.begin(), upper_bounds_.end());
}

void Histogram::Observe(double value) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    if (value <= upper_bounds_[i]) ++counts_[i];
  }
  ++count_;
  sum_ += value;
}

void Histogram::Set(std::vector<uint64_t> cumulative_counts, uint64_t count, double sum) {
  counts_ = std::move(cumulative_counts);
  counts_.resize(upper_bounds_.size(), count);
  count_ = count;
  sum_ = sum;
}

ServerMetrics::ServerMetrics() : ttft_(kTtftBuckets), e2e_latency_(kLatencyBuckets) {}

void ServerMetrics::RecordFinished(FinishReason reason, double ttft_seconds, double total_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++finished_by_reason_[FinishReasonText(reason)];
  ttft_.Observe(ttft_seconds);
  e2e_latency_.Observe(total_seconds);
}

void ServerMetrics::RecordError(int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++errors_by_status_[status];
}

uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t total_pages = 0;
  uint64_t resident_pages = 0;
  if (!(statm >> total_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::string EscapeLabelValue(const std::string& value) {
  std::string escaped;
  escaped.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '"') {
      escaped += "\\\"";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

namespace {

// Where prompt tokens came from, and the tiers beyond memory.
void RenderTiers(Exposition& out, const EngineStats& stats) {
  const CacheSources& cached = stats.prompt_tokens_cached;
  const uint64_t reused = cached.memory + cached.disk + cached.remote;
  out.Header("reprise:prompt_tokens_by_source_total", "counter",
             "Prompt tokens of finished requests by where their KV came from: computed, or reused "
             "from memory, the disk tier or a remote tier.");
  out.Sample("reprise:prompt_tokens_by_source_total",
             stats.prompt_tokens_total > reused ? stats.prompt_tokens_total - reused : 0,
             "source=\"compute\"");
  out.Sample("reprise:prompt_tokens_by_source_total", cached.memory, "source=\"memory\"");
  out.Sample("reprise:prompt_tokens_by_source_total", cached.disk, "source=\"disk\"");
  out.Sample("reprise:prompt_tokens_by_source_total", cached.remote, "source=\"remote\"");
  const auto& tiers = stats.tiers;
  out.TierMetric("reprise:kv_tier_available", "gauge",
                 "1 while the tier is usable, 0 after it failed (see the server log).", tiers,
                 [](const KvTierStats& t) { return t.available ? 1 : 0; });
  out.TierMetric("reprise:kv_tier_blocks", "gauge", "KV blocks the tier holds.", tiers,
                 [](const KvTierStats& t) { return t.blocks; });
  out.TierMetric("reprise:kv_tier_bytes", "gauge", "Bytes the tier holds.", tiers,
                 [](const KvTierStats& t) { return t.bytes; });
  out.TierMetric("reprise:kv_tier_capacity_bytes", "gauge", "The tier's size cap (0: none).", tiers,
                 [](const KvTierStats& t) { return t.capacity_bytes; });
  out.TierMetric("reprise:kv_tier_read_bytes_total", "counter",
                 "Bytes of KV blocks loaded from the tier and verified.", tiers,
                 [](const KvTierStats& t) { return t.bytes_read; });
  out.TierMetric("reprise:kv_tier_written_bytes_total", "counter",
                 "Bytes of KV blocks written to the tier.", tiers,
                 [](const KvTierStats& t) { return t.bytes_written; });
  out.TierMetric("reprise:kv_tier_evictions_total", "counter",
                 "Blocks the tier dropped to stay under its size cap.", tiers,
                 [](const KvTierStats& t) { return t.evictions; });
  out.TierMetric("reprise:kv_tier_corrupt_blocks_total", "counter",
                 "Blocks refused (bad checksum, truncated, wrong key) and deleted.", tiers,
                 [](const KvTierStats& t) { return t.corrupt_blocks; });
  out.TierMetric("reprise:kv_tier_foreign_blocks_total", "counter",
                 "Blocks of another model or KV layout, ignored.", tiers,
                 [](const KvTierStats& t) { return t.foreign_blocks; });
  out.TierMetric("reprise:kv_tier_errors_total", "counter",
                 "I/O errors of the tier (disk full, unwritable folder, ...).", tiers,
                 [](const KvTierStats& t) { return t.errors; });
  if (tiers.empty()) return;
  out.Metric("reprise:kv_tier_writes_dropped_total", "counter",
             "Blocks evicted from memory not written to the tiers because the write queue was "
             "full.",
             stats.tier_writes_dropped);
  // The engine counts loads per bucket; Prometheus buckets are cumulative.
  Histogram loads(stats.tier_load_bounds);
  std::vector<uint64_t> cumulative(stats.tier_load_bounds.size(), 0);
  uint64_t running = 0;
  for (size_t i = 0; i < cumulative.size() && i < stats.tier_load_buckets.size(); ++i) {
    running += stats.tier_load_buckets[i];
    cumulative[i] = running;
  }
  uint64_t total = running;
  if (stats.tier_load_buckets.size() > cumulative.size()) total += stats.tier_load_buckets.back();
  loads.Set(cumulative, total, stats.tier_load_seconds_sum);
  out.HistogramMetric("reprise:kv_tier_load_seconds",
                      "Time to load a request's blocks from the tiers, verification included.",
                      loads);
}

void RenderKvEvents(Exposition& out, const EngineStats& stats) {
  if (!stats.kv_events) return;
  out.Metric("reprise:kv_events_published_total", "counter",
             "KV events (block stored, removed, all cleared) written to the Redis stream.",
             stats.kv_events_published);
  out.Metric("reprise:kv_events_dropped_total", "counter",
             "KV events lost because the queue was full or Redis could not be reached.",
             stats.kv_events_dropped);
  out.Metric("reprise:kv_events_write_failures_total", "counter",
             "Writes of KV events to Redis that failed.", stats.kv_events_write_failures);
  out.Metric("reprise:kv_events_connected", "gauge",
             "1 when the last write of KV events to Redis succeeded.",
             stats.kv_events_connected ? 1 : 0);
}

}  // namespace

std::string ServerMetrics::Render(const EngineStats& stats, const HttpCounters& http,
                                  const std::string& model_name) const {
  Exposition out(model_name);
  out.Metric("reprise:http_connections_open", "gauge", "HTTP connections open (not this one).",
             http.open_connections);
  out.Metric("reprise:http_requests_in_flight", "gauge",
             "HTTP requests read and not yet fully answered (streams included; not this one).",
             http.requests_in_flight);
  out.Metric("reprise:http_connections_refused_total", "counter",
             "HTTP connections refused at a connection bound (answered 503).",
             http.connections_refused);
  out.Metric("reprise:process_resident_memory_bytes", "gauge",
             "Resident memory of the server process (RSS).", http.resident_bytes);
  out.Metric("reprise:prefix_cache_queries_total", "counter",
             "Prompt tokens looked up in the prefix cache.", stats.prefix_cache_queries);
  out.Metric("reprise:prefix_cache_hits_total", "counter",
             "Prompt tokens found in the prefix cache.", stats.prefix_cache_hits);
  out.Metric("reprise:prefix_cache_evictions_total", "counter",
             "Cached KV blocks evicted to make room.", stats.evictions);
  out.Metric("reprise:prompt_tokens_total", "counter", "Prompt tokens processed.",
             stats.prompt_tokens_total);
  out.Metric("reprise:generation_tokens_total", "counter", "Tokens generated.",
             stats.generation_tokens_total);
  out.Metric("reprise:scheduling_seconds_total", "counter",
             "Engine time spent scheduling: admission, prefix matching and hashing, KV block "
             "allocation, eviction and commits.",
             stats.scheduling_seconds_total);
  out.Metric("reprise:forward_seconds_total", "counter", "Engine time spent in forward passes.",
             stats.forward_seconds_total);
  out.Metric("reprise:num_requests_running", "gauge", "Requests being computed.",
             stats.requests_running);
  out.Metric("reprise:num_requests_waiting", "gauge", "Requests waiting in the queue.",
             stats.requests_waiting);
  out.Metric("reprise:num_preemptions_total", "counter",
             "Requests preempted for lack of KV cache memory.", stats.preemptions);
  out.Metric("reprise:request_cancelled_total", "counter",
             "Requests cancelled (client disconnects included).", stats.requests_cancelled);
  out.Metric("reprise:kv_cache_blocks_total", "gauge", "KV cache blocks in the pool.",
             stats.blocks_total);
  out.Metric("reprise:kv_cache_blocks_in_use", "gauge",
             "KV cache blocks held by running requests (pinned blocks not included).",
             stats.blocks_in_use);
  out.Metric("reprise:kv_cache_blocks_cached", "gauge",
             "KV cache blocks kept as reusable cache, evictable.", stats.blocks_cached);
  out.Metric("reprise:kv_cache_blocks_free", "gauge", "KV cache blocks holding nothing.",
             stats.blocks_free);
  out.Metric("reprise:kv_cache_blocks_pinned", "gauge",
             "KV cache blocks pinned by static task prompts.", stats.blocks_pinned);
  out.Metric("reprise:kv_cache_blocks_protected", "gauge",
             "KV cache blocks in the protected tier: reused, so evicted after blocks used once.",
             stats.blocks_protected);
  double usage = stats.blocks_total > 0
                     ? static_cast<double>(stats.blocks_in_use + stats.blocks_pinned) /
                           static_cast<double>(stats.blocks_total)
                     : 0.0;
  out.Metric("reprise:kv_cache_usage_perc", "gauge",
             "Fraction of KV cache blocks in use or pinned (1 = full).", usage);

  RenderTiers(out, stats);
  RenderKvEvents(out, stats);

  std::lock_guard<std::mutex> lock(mutex_);
  out.Header("reprise:request_success_total", "counter", "Requests finished, by finish reason.");
  for (const char* reason : {"stop", "length"}) {
    auto it = finished_by_reason_.find(reason);
    out.Sample("reprise:request_success_total", it == finished_by_reason_.end() ? 0 : it->second,
               fmt::format("finished_reason=\"{}\"", reason));
  }
  out.Header("reprise:http_errors_total", "counter", "HTTP error answers, by status.");
  for (const auto& [status, count] : errors_by_status_) {
    out.Sample("reprise:http_errors_total", count, fmt::format("status=\"{}\"", status));
  }
  out.HistogramMetric("reprise:time_to_first_token_seconds",
                      "Time from submission to the first generated token.", ttft_);
  out.HistogramMetric("reprise:e2e_request_latency_seconds",
                      "Time from submission to the last generated token.", e2e_latency_);
  return out.Take();
}

}  // namespace reprise::server
