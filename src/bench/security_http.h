// The HTTP calls of the security benchmarks: one completion with its wall time and usage, GETs
// of /metrics samples, all with an optional API key.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/options.h"

namespace reprise::bench {

// One request's outcome; status 0 when no answer came (connection failed or was closed).
struct CallResult {
  int status = 0;
  double milliseconds = 0;
  nlohmann::json body;  // parsed JSON answer (null when none)
};

httplib::Headers AuthHeaders(const std::string& api_key);

// A client for `server` with the benchmarks' timeouts.
httplib::Client MakeBenchClient(const HostPort& server, int read_timeout_seconds = 300);

CallResult PostJsonTimed(httplib::Client& client, const std::string& path,
                         const nlohmann::json& body, const std::string& api_key);
CallResult GetTimed(httplib::Client& client, const std::string& path, const std::string& api_key);

// usage.prompt_tokens_details.cached_tokens of a completion answer (0 when absent).
int64_t CachedTokensOf(const nlohmann::json& answer);

// The samples of a Prometheus text by metric name (labels dropped; the last sample of a name
// wins). Used for gauges and counters that have one sample.
std::map<std::string, double> ParseMetrics(const std::string& text);

}  // namespace reprise::bench
