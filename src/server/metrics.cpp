#include "server/metrics.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "server/response_builder.h"

namespace reprise::server {
namespace {

// vLLM's buckets, so that existing dashboards read the same.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kLatencyBuckets = {0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,
                                             5.0,  10.0, 15.0, 20.0,  30.0,  40.0,  50.0,
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

ServerMetrics::ServerMetrics() : ttft_(kTtftBuckets), e2e_latency_(kLatencyBuckets) {}

void ServerMetrics::RecordFinished(FinishReason reason, double ttft_seconds,
                                   double total_seconds) {
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
  double usage = stats.blocks_total > 0 ? static_cast<double>(stats.blocks_in_use +
                                                              stats.blocks_pinned) /
                                              static_cast<double>(stats.blocks_total)
                                        : 0.0;
  out.Metric("reprise:kv_cache_usage_perc", "gauge",
             "Fraction of KV cache blocks in use or pinned (1 = full).", usage);

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
