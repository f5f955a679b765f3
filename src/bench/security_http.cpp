#include "bench/security_http.h"

#include <chrono>
#include <sstream>

namespace reprise::bench {

httplib::Headers AuthHeaders(const std::string& api_key) {
  if (api_key.empty()) return {};
  return {{"Authorization", "Bearer " + api_key}};
}

httplib::Client MakeBenchClient(const HostPort& server, int read_timeout_seconds) {
  httplib::Client client(server.host, server.port);
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(read_timeout_seconds, 0);
  client.set_write_timeout(30, 0);
  return client;
}

namespace {

CallResult Finish(const httplib::Result& result, std::chrono::steady_clock::time_point start) {
  CallResult out;
  out.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!result) return out;
  out.status = result->status;
  out.body = nlohmann::json::parse(result->body, nullptr, /*allow_exceptions=*/false);
  if (out.body.is_discarded()) out.body = nullptr;
  return out;
}

}  // namespace

CallResult PostJsonTimed(httplib::Client& client, const std::string& path,
                         const nlohmann::json& body, const std::string& api_key) {
  auto start = std::chrono::steady_clock::now();
  return Finish(client.Post(path.c_str(), AuthHeaders(api_key), body.dump(), "application/json"),
                start);
}

CallResult GetTimed(httplib::Client& client, const std::string& path, const std::string& api_key) {
  auto start = std::chrono::steady_clock::now();
  CallResult out = Finish(client.Get(path.c_str(), AuthHeaders(api_key)), start);
  return out;
}

int64_t CachedTokensOf(const nlohmann::json& answer) {
  if (!answer.is_object()) return 0;
  auto usage = answer.find("usage");
  if (usage == answer.end() || !usage->is_object()) return 0;
  auto details = usage->find("prompt_tokens_details");
  if (details == usage->end() || !details->is_object()) return 0;
  auto cached = details->find("cached_tokens");
  return cached != details->end() && cached->is_number_integer() ? cached->get<int64_t>() : 0;
}

std::map<std::string, double> ParseMetrics(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t name_end = line.find_first_of("{ ");
    size_t value_at = line.rfind(' ');
    if (name_end == std::string::npos || value_at == std::string::npos) continue;
    try {
      samples[line.substr(0, name_end)] = std::stod(line.substr(value_at + 1));
    } catch (const std::exception&) {
      // not a number (NaN text, a malformed line): skipped
    }
  }
  return samples;
}

}  // namespace reprise::bench
