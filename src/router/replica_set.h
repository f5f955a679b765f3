// The replicas behind `reprise route`: their addresses, health (checked every interval on the
// router's own thread), load (the router's own requests in flight to them, plus what their
// /metrics report beyond those: other clients' running and waiting requests) and counters.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace reprise::router {

struct ReplicaAddress {
  std::string url;  // as given: http://HOST:PORT
  std::string host;
  int port = 0;
};
// Throws reprise::Error for anything but http://HOST:PORT (https is not supported).
ReplicaAddress ParseReplicaUrl(const std::string& url);

struct Replica {
  ReplicaAddress address;
  std::atomic<bool> healthy{false};
  std::atomic<int> in_flight{0};      // requests the router has open to it
  std::atomic<int> reported_load{0};  // running + waiting, from its /metrics
  // Of reported_load, the requests that were not the router's own when it was read: other
  // clients' load. The router's own it counts exactly (in_flight); a reported figure that is
  // up to a health interval old would keep counting requests long finished.
  std::atomic<int> others_load{0};
  std::atomic<uint64_t> requests{0};  // sent to it (retries included)
  std::atomic<uint64_t> failures{0};  // transport failures
  int slow_checks = 0;                // health checks in a row that got no answer in time
  int Load() const { return in_flight.load() + others_load.load(); }
};

// KV settings a replica reported (/v1/cache/stats): they decide the block keys.
struct ReplicaKvSettings {
  std::string kv_type;
  int block_size = 0;
  std::string numerics;  // the kernels' arithmetic (kernels::KernelNumerics)
};

class ReplicaSet {
 public:
  explicit ReplicaSet(const std::vector<std::string>& urls);
  ~ReplicaSet();  // Stop()
  ReplicaSet(const ReplicaSet&) = delete;
  ReplicaSet& operator=(const ReplicaSet&) = delete;

  size_t size() const { return replicas_.size(); }
  Replica& at(size_t i) { return *replicas_[i]; }
  const Replica& at(size_t i) const { return *replicas_[i]; }

  // Checks every replica now, then every `interval` on a thread. `on_up(i, settings)` runs when
  // replica i turns healthy (first time or after being down): it may have restarted empty.
  void Start(std::chrono::milliseconds interval,
             std::function<void(size_t, const ReplicaKvSettings&)> on_up);
  void Stop();
  // The id replica i reports in /health (empty until known), and the replica reporting `id`
  // (-1: none).
  std::string Id(size_t i) const;
  int IndexOfId(const std::string& id) const;
  // "Bearer KEY" sent with the checks' /metrics and /v1/cache/stats, for replicas with API keys
  // (before Start).
  void SetAuthorization(std::string authorization) { authorization_ = std::move(authorization); }
  // A request found replica i unreachable: skip it until a health check passes again.
  void MarkDown(size_t i);
  void CheckAll();

 private:
  void Check(size_t i);

  std::vector<std::unique_ptr<Replica>> replicas_;
  std::function<void(size_t, const ReplicaKvSettings&)> on_up_;
  std::string authorization_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
  mutable std::mutex ids_mutex_;
  std::vector<std::string> ids_;  // [size()]: reported in /health
};

}  // namespace reprise::router
