// Prometheus text exposition for GET /metrics: the engine's counters and gauges (EngineStats)
// plus what the server observes itself (finished requests by reason, TTFT and latency
// histograms, error statuses). Names follow vLLM's with the prefix `reprise:`.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "reprise/engine.h"

namespace reprise::server {

// A cumulative Prometheus histogram with fixed upper bounds. Not thread-safe by itself.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // Replaces the state with counts taken elsewhere (cumulative, one per upper bound).
  void Set(std::vector<uint64_t> cumulative_counts, uint64_t count, double sum);
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }
  // counts()[i]: observations <= upper_bounds()[i] (cumulative); the +Inf bucket is count().
  const std::vector<uint64_t>& counts() const { return counts_; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> upper_bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

// The HTTP layer's gauges and counters at one moment.
// Counted without the request that reads them (so all read 0 on an idle server).
struct HttpCounters {
  size_t open_connections = 0;
  size_t requests_in_flight = 0;  // parsed and not yet fully answered
  uint64_t connections_refused = 0;
  uint64_t resident_bytes = 0;  // the process's resident memory (RSS)
};

// The process's resident set size from /proc/self/statm; 0 where it cannot be read.
uint64_t ResidentBytes();

class ServerMetrics {
 public:
  ServerMetrics();

  // A request choice that ran to its end (stop or length): its engine-measured times.
  void RecordFinished(FinishReason reason, double ttft_seconds, double total_seconds);
  // An HTTP error answer (4xx/5xx).
  void RecordError(int status);

  // The whole exposition text; every sample carries model_name="<model_name>".
  std::string Render(const EngineStats& stats, const HttpCounters& http,
                     const std::string& model_name) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t> finished_by_reason_;
  std::map<int, uint64_t> errors_by_status_;
  Histogram ttft_;
  Histogram e2e_latency_;
};

// Escapes a Prometheus label value (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& value);

}  // namespace reprise::server
