// `reprise bench soak`: --clients threads send a random mix for --duration seconds: plain and
// streamed completions over shared and unique prefixes, streams dropped part-way and waits given
// up (half of those closed with a reset: SO_LINGER 0), cache clears and stats reads. A monitor
// reads /metrics every 2 s. At the end, once the server is idle, it checks: no 5xx answer, no KV
// block in use, the request and HTTP gauges at 0, and resident memory after warm-up flat.
#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/options.h"
#include "bench/security.h"
#include "bench/security_http.h"
#include "bench/texts.h"
#include "core/error.h"

namespace reprise::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSharedDocuments = 4;
constexpr double kMiB = 1024.0 * 1024.0;
// How long a client waits for a completion's next bytes; a slower server counts as unanswered.
constexpr int kReadTimeoutSeconds = 120;

// Why a request that was due an answer got none, and after how long (a read timeout says the
// server was slower than the client's patience, not silent).
std::string Unanswered(const std::string& what, Clock::time_point start) {
  return fmt::format("no answer ({}) after {:.1f} s", what,
                     std::chrono::duration<double>(Clock::now() - start).count());
}

struct Tally {
  std::mutex mutex;
  std::map<std::string, uint64_t> actions;      // by action name
  std::map<int, uint64_t> statuses;             // by HTTP status (0: no answer, as intended)
  uint64_t server_errors = 0;                   // 5xx
  std::vector<std::string> error_samples;       // the first few 5xx bodies
  std::vector<std::string> unanswered_samples;  // the first few requests left unanswered: why

  // `body`: the answer, or for status -1 (no answer where one was due) what happened.
  void Record(const std::string& action, int status, const std::string& body) {
    std::lock_guard lock(mutex);
    ++actions[action];
    ++statuses[status];
    if (status >= 500) {
      ++server_errors;
      if (error_samples.size() < 5) error_samples.push_back(action + ": " + body.substr(0, 300));
    }
    if (status < 0 && unanswered_samples.size() < 5) {
      unanswered_samples.push_back(action + ": " + body.substr(0, 300));
    }
  }
};

struct RssSample {
  double seconds;  // since the start
  double bytes;
};

class SoakRun {
 public:
  explicit SoakRun(const SoakOptions& options)
      : options_(options), server_(ParseHttpUrl(options.url)) {
    for (int k = 0; k < kSharedDocuments; ++k) {
      shared_.push_back(Prose(options.seed * 7919u + 50000 + static_cast<uint64_t>(k), 120));
    }
  }

  int Run();

 private:
  void Client(int id, Clock::time_point deadline);
  nlohmann::json Body(std::mt19937_64& random, uint64_t unique, bool stream, int max_tokens);
  // A streamed completion; `drop_after` > 0 hangs up after that many chunks (with a reset when
  // `reset`). Returns the status (0 when the client hung up itself).
  int Stream(const nlohmann::json& body, int drop_after, bool reset, std::string& error_body);
  std::map<std::string, double> Metrics();
  void Monitor(Clock::time_point start, Clock::time_point deadline);

  const SoakOptions& options_;
  HostPort server_;
  std::vector<std::string> shared_;
  Tally tally_;
  std::mutex rss_mutex_;
  std::vector<RssSample> rss_;
  std::atomic<bool> done_{false};
};

nlohmann::json SoakRun::Body(std::mt19937_64& random, uint64_t unique, bool stream,
                             int max_tokens) {
  std::string prompt;
  if (random() % 2 == 0) prompt = shared_[random() % shared_.size()];
  prompt += Prose(unique, 8 + random() % 40);
  nlohmann::json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"stream", stream}};
  if (!options_.served_model.empty()) body["model"] = options_.served_model;
  return body;
}

int SoakRun::Stream(const nlohmann::json& body, int drop_after, bool reset,
                    std::string& error_body) {
  httplib::Client client = MakeBenchClient(server_, kReadTimeoutSeconds);
  if (reset) {
    client.set_socket_options([](socket_t sock) {
      linger hard{1, 0};  // close() sends RST
      ::setsockopt(sock, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
    });
  }
  httplib::Request http;
  http.method = "POST";
  http.path = "/v1/completions";
  http.body = body.dump();
  http.headers = AuthHeaders(options_.api_key);
  http.set_header("Content-Type", "application/json");
  int chunks = 0;
  http.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    if (error_body.size() < 300) error_body.append(data, std::min<size_t>(length, 300));
    return drop_after <= 0 || ++chunks < drop_after;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const Clock::time_point start = Clock::now();
  bool sent = client.send(http, response, error);
  if (!sent && drop_after <= 0) {
    error_body = Unanswered(httplib::to_string(error), start);
    return -1;
  }
  return sent ? response.status : 0;
}

void SoakRun::Client(int id, Clock::time_point deadline) {
  std::mt19937_64 random(options_.seed * 1000u + static_cast<uint64_t>(id) + 1);
  uint64_t unique = options_.seed * 100000000u + static_cast<uint64_t>(id) * 1000000u + 1000000;
  while (Clock::now() < deadline) {
    int roll = static_cast<int>(random() % 100);
    int max_tokens = 1 + static_cast<int>(random() % 12);
    std::string error_body;
    if (roll < 30) {
      httplib::Client client = MakeBenchClient(server_, kReadTimeoutSeconds);
      const Clock::time_point start = Clock::now();
      CallResult result = PostJsonTimed(
          client, "/v1/completions", Body(random, ++unique, false, max_tokens), options_.api_key);
      tally_.Record(
          "plain", result.status == 0 ? -1 : result.status,
          result.status == 0 ? Unanswered("closed or timed out", start) : result.body.dump());
    } else if (roll < 60) {
      int status = Stream(Body(random, ++unique, true, max_tokens), 0, false, error_body);
      tally_.Record("streamed", status, error_body);
    } else if (roll < 75) {
      bool reset = random() % 2 == 0;
      int status = Stream(Body(random, ++unique, true, 32), 1 + static_cast<int>(random() % 3),
                          reset, error_body);
      tally_.Record(reset ? "stream dropped (RST)" : "stream dropped (FIN)", status, error_body);
    } else if (roll < 88) {
      // Gives up waiting for a plain answer: the server must cancel it.
      bool reset = random() % 2 == 0;
      httplib::Client client(server_.host, server_.port);
      client.set_read_timeout(0, 50000 + static_cast<long>(random() % 100000));
      if (reset) {
        client.set_socket_options([](socket_t sock) {
          linger hard{1, 0};
          ::setsockopt(sock, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
        });
      }
      CallResult result = PostJsonTimed(client, "/v1/completions",
                                        Body(random, ++unique, false, 48), options_.api_key);
      tally_.Record(reset ? "wait given up (RST)" : "wait given up (FIN)", result.status,
                    result.body.dump());
    } else if (roll < 93) {
      httplib::Client client = MakeBenchClient(server_, 60);
      const Clock::time_point start = Clock::now();
      CallResult result =
          PostJsonTimed(client, "/v1/cache/clear", nlohmann::json::object(), options_.api_key);
      tally_.Record(
          "cache clear", result.status == 0 ? -1 : result.status,
          result.status == 0 ? Unanswered("closed or timed out", start) : result.body.dump());
    } else {
      httplib::Client client = MakeBenchClient(server_, 60);
      const char* path = roll % 2 == 0 ? "/v1/cache/stats" : "/metrics";
      const Clock::time_point start = Clock::now();
      CallResult result = GetTimed(client, path, options_.api_key);
      tally_.Record(std::string("GET ") + path, result.status == 0 ? -1 : result.status,
                    result.status == 0 ? Unanswered("closed or timed out", start) : "");
    }
  }
}

std::map<std::string, double> SoakRun::Metrics() {
  httplib::Client client = MakeBenchClient(server_, 30);
  httplib::Result result = client.Get("/metrics", AuthHeaders(options_.api_key));
  if (!result || result->status != 200) return {};
  return ParseMetrics(result->body);
}

void SoakRun::Monitor(Clock::time_point start, Clock::time_point deadline) {
  while (!done_.load() && Clock::now() < deadline + std::chrono::seconds(5)) {
    std::map<std::string, double> metrics = Metrics();
    auto rss = metrics.find("reprise:process_resident_memory_bytes");
    if (rss != metrics.end()) {
      std::lock_guard lock(rss_mutex_);
      rss_.push_back({std::chrono::duration<double>(Clock::now() - start).count(), rss->second});
    }
    for (int i = 0; i < 20 && !done_.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

int SoakRun::Run() {
  std::map<std::string, double> before = Metrics();
  if (before.empty()) {
    throw Error(
        fmt::format("{} answered no /metrics (is it a Reprise server, and the key "
                    "accepted?)",
                    options_.url));
  }
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::milliseconds(static_cast<int64_t>(options_.duration_seconds * 1000));
  std::thread monitor([&] { Monitor(start, deadline); });
  std::vector<std::thread> clients;
  for (int i = 0; i < options_.clients; ++i) {
    clients.emplace_back([this, i, deadline] { Client(i, deadline); });
  }
  for (std::thread& client : clients) client.join();
  const double ran = std::chrono::duration<double>(Clock::now() - start).count();

  // Idle: cancelled requests and dropped connections may take a moment to be noticed.
  std::map<std::string, double> after;
  const char* kGauges[] = {"reprise:num_requests_running", "reprise:num_requests_waiting",
                           "reprise:kv_cache_blocks_in_use", "reprise:http_requests_in_flight",
                           "reprise:http_connections_open"};
  Clock::time_point idle_deadline = Clock::now() + std::chrono::seconds(30);
  while (true) {
    after = Metrics();
    bool idle = !after.empty();
    for (const char* gauge : kGauges) idle = idle && after[gauge] == 0;
    if (idle || Clock::now() > idle_deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  {
    std::lock_guard lock(rss_mutex_);
    if (auto rss = after.find("reprise:process_resident_memory_bytes"); rss != after.end()) {
      rss_.push_back({std::chrono::duration<double>(Clock::now() - start).count(), rss->second});
    }
  }
  done_.store(true);
  monitor.join();

  bool ok = true;
  std::printf("soak: %d clients for %.0f s against %s\n", options_.clients, ran,
              options_.url.c_str());
  uint64_t total = 0;
  for (const auto& [action, count] : tally_.actions) {
    std::printf("  %-24s %8llu\n", action.c_str(), static_cast<unsigned long long>(count));
    total += count;
  }
  std::printf("  %-24s %8llu (%.1f/s)\n", "requests", static_cast<unsigned long long>(total),
              static_cast<double>(total) / ran);
  std::string statuses;
  for (const auto& [status, count] : tally_.statuses) {
    statuses += fmt::format(" {}:{}", status <= 0 ? "none" : std::to_string(status), count);
  }
  std::printf("  statuses (none: the client hung up or failed):%s\n", statuses.c_str());
  auto check = [&ok](bool held, const std::string& what) {
    std::printf("  [%s] %s\n", held ? "ok" : "FAIL", what.c_str());
    ok = ok && held;
  };
  check(tally_.server_errors == 0, fmt::format("5xx answers: {}", tally_.server_errors));
  for (const std::string& sample : tally_.error_samples) std::printf("      %s\n", sample.c_str());
  uint64_t failed = tally_.statuses.count(-1) ? tally_.statuses[-1] : 0;
  check(failed == 0,
        fmt::format("requests that should have been answered and were not: {}", failed));
  for (const std::string& sample : tally_.unanswered_samples) {
    std::printf("      %s\n", sample.c_str());
  }
  for (const char* gauge : kGauges) {
    check(after.count(gauge) && after[gauge] == 0, fmt::format("{} = {}", gauge, after[gauge]));
  }
  std::printf(
      "  cancelled requests: %.0f, prefix cache hit tokens: %.0f of %.0f queried\n",
      after["reprise:request_cancelled_total"] - before["reprise:request_cancelled_total"],
      after["reprise:prefix_cache_hits_total"] - before["reprise:prefix_cache_hits_total"],
      after["reprise:prefix_cache_queries_total"] - before["reprise:prefix_cache_queries_total"]);

  // Resident memory: the first sample after warm-up against the peak after it and the last.
  const double warm = options_.duration_seconds * options_.warmup_share;
  std::vector<RssSample> later;
  for (const RssSample& sample : rss_) {
    if (sample.seconds >= warm) later.push_back(sample);
  }
  if (later.size() < 2) {
    check(false, "resident memory: fewer than two samples after warm-up");
  } else {
    double baseline = later.front().bytes;
    double peak = 0;
    for (const RssSample& sample : later) peak = std::max(peak, sample.bytes);
    double last = later.back().bytes;
    double allowed = baseline * 1.05 + 32 * kMiB;
    std::printf(
        "  RSS: %.1f MiB at %.0f s (after warm-up), peak %.1f MiB, end %.1f MiB "
        "(%zu samples)\n",
        baseline / kMiB, later.front().seconds, peak / kMiB, last / kMiB, later.size());
    check(last <= allowed, fmt::format("RSS flat after warm-up: end - start = {:+.1f} MiB "
                                       "(allowed +5% +32 MiB)",
                                       (last - baseline) / kMiB));
  }
  std::fflush(stdout);
  return ok ? 0 : 1;
}

}  // namespace

int RunSoakBench(const SoakOptions& options) {
  if (options.clients < 1) throw Error("--clients must be at least 1");
  if (!(options.duration_seconds > 0)) throw Error("--duration must be positive");
  SoakRun run(options);
  return run.Run();
}

}  // namespace reprise::bench
