#include "router/replica_set.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace reprise::router {
namespace {

// The value of an unlabelled or labelled sample `name` in Prometheus text; 0 when absent.
double Sample(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(name, 0) != 0) continue;
    char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != ' ' && next != '{') continue;
    size_t space = line.rfind(' ');
    try {
      return std::stod(line.substr(space + 1));
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

}  // namespace

ReplicaAddress ParseReplicaUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    throw Error(fmt::format("a replica URL is http://HOST:PORT (got '{}')", url));
  }
  std::string rest = url.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || rest.find('/') != std::string::npos) {
    throw Error(fmt::format("a replica URL is http://HOST:PORT (got '{}')", url));
  }
  ReplicaAddress address{url, rest.substr(0, colon), 0};
  try {
    address.port = std::stoi(rest.substr(colon + 1));
  } catch (const std::exception&) {
    address.port = 0;
  }
  if (address.host.empty() || address.port < 1 || address.port > 65535) {
    throw Error(fmt::format("bad host or port in replica URL '{}'", url));
  }
  return address;
}

ReplicaSet::ReplicaSet(const std::vector<std::string>& urls) {
  for (const std::string& url : urls) {
    replicas_.push_back(std::make_unique<Replica>());
    replicas_.back()->address = ParseReplicaUrl(url);
  }
  ids_.resize(replicas_.size());
}

std::string ReplicaSet::Id(size_t i) const {
  std::lock_guard lock(ids_mutex_);
  return ids_[i];
}

int ReplicaSet::IndexOfId(const std::string& id) const {
  std::lock_guard lock(ids_mutex_);
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (ids_[i] == id) return static_cast<int>(i);
  }
  return -1;
}

ReplicaSet::~ReplicaSet() { Stop(); }

void ReplicaSet::Start(std::chrono::milliseconds interval,
                       std::function<void(size_t, const ReplicaKvSettings&)> on_up) {
  on_up_ = std::move(on_up);
  CheckAll();
  thread_ = std::thread([this, interval] {
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();
      CheckAll();
      lock.lock();
    }
  });
}

void ReplicaSet::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ReplicaSet::MarkDown(size_t i) {
  if (replicas_[i]->healthy.exchange(false)) {
    spdlog::warn("replica {} is unreachable; skipped until a health check passes",
                 replicas_[i]->address.url);
  }
}

void ReplicaSet::CheckAll() {
  for (size_t i = 0; i < replicas_.size(); ++i) Check(i);
}

void ReplicaSet::Check(size_t i) {
  Replica& replica = *replicas_[i];
  httplib::Client client(replica.address.host, replica.address.port);
  client.set_connection_timeout(0, 500000);
  client.set_read_timeout(2, 0);
  client.set_write_timeout(1, 0);
  auto health = client.Get("/health");
  // A replica that answers nothing in time may only be busy (its cores computing a long
  // prefill): down after two such checks in a row. Refused, or not ready: down at once.
  const bool slow = !health && health.error() == httplib::Error::Read;
  replica.slow_checks = slow ? replica.slow_checks + 1 : 0;
  if (slow && replica.slow_checks < 2 && replica.healthy.load()) return;
  bool up = health && health->status == 200;
  if (!up) {
    if (replica.healthy.exchange(false)) {
      spdlog::warn("replica {} failed its health check", replica.address.url);
    }
    return;
  }
  nlohmann::json health_body = nlohmann::json::parse(health->body, nullptr, false);
  if (health_body.is_object() && health_body.contains("replica_id") &&
      health_body["replica_id"].is_string()) {
    std::lock_guard lock(ids_mutex_);
    ids_[i] = health_body["replica_id"].get<std::string>();
  }
  httplib::Headers headers;
  if (!authorization_.empty()) headers.emplace("Authorization", authorization_);
  const int mine_before = replica.in_flight.load();
  if (auto metrics = client.Get("/metrics", headers); metrics && metrics->status == 200) {
    const int reported = static_cast<int>(Sample(metrics->body, "reprise:num_requests_running") +
                                          Sample(metrics->body, "reprise:num_requests_waiting"));
    replica.reported_load = reported;
    // The replica counted our requests open at some moment of the call: at most the larger.
    const int mine = std::max(mine_before, replica.in_flight.load());
    replica.others_load = std::max(0, reported - mine);
  }
  if (replica.healthy.load()) return;
  ReplicaKvSettings settings;
  if (auto stats = client.Get("/v1/cache/stats", headers); stats && stats->status == 200) {
    nlohmann::json body = nlohmann::json::parse(stats->body, nullptr, false);
    if (body.is_object()) {
      settings.kv_type = body.value("kv_type", "");
      settings.block_size = body.value("block_size", 0);
      settings.numerics = body.value("numerics", "");
    }
  }
  spdlog::info("replica {} is up (block size {}, KV {}, kernels {})", replica.address.url,
               settings.block_size, settings.kv_type, settings.numerics);
  if (on_up_) on_up_(i, settings);
  replica.healthy = true;
}

}  // namespace reprise::router
