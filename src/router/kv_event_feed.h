// KvEventFeed: the router's reader of the replicas' KV events (kvevents/kv_event.h). On its own
// thread it follows the Redis Stream from its end (XREAD BLOCK from `$`) and applies each batch
// to the PrefixDirectory: stored -> Record, removed -> Remove, all cleared -> ClearReplica.
// Batches of another model (root fingerprint) or of a replica id the router does not know are
// skipped. A replica's restart (a new instance) or lost events (a gap in its sequence numbers)
// clear what the router believed it held. Until a replica's events flow (and while the stream
// cannot be read) the router falls back to its own record of where it sent which prompt.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "kvevents/kv_event.h"
#include "redis/redis_client.h"
#include "router/prefix_directory.h"

namespace reprise::router {

struct KvEventFeedCounters {
  uint64_t batches = 0;           // stream entries read
  uint64_t events_applied = 0;    // events applied to the directory
  uint64_t events_foreign = 0;    // skipped: another model's root fingerprint
  uint64_t events_unmatched = 0;  // skipped: a replica id none of the --replica URLs reports
  uint64_t gaps = 0;              // a replica's events were lost (sequence gap)
  uint64_t restarts = 0;          // a replica restarted (new instance)
  uint64_t read_failures = 0;     // reads of the stream that failed
  bool connected = false;         // the last read succeeded
};

class KvEventFeed {
 public:
  // `resolve(id)`: the index of the replica that reports this id (-1: none). `root()`: the
  // root fingerprint the router computes keys under (nullopt until the replicas' KV settings
  // are known; events are skipped until then).
  KvEventFeed(std::string stream, std::shared_ptr<redis::RedisClient> client,
              PrefixDirectory& directory, std::function<int(const std::string&)> resolve,
              std::function<std::optional<Digest>()> root);
  ~KvEventFeed();  // Stop()
  KvEventFeed(const KvEventFeed&) = delete;
  KvEventFeed& operator=(const KvEventFeed&) = delete;

  void Start();
  void Stop();
  // Applies one batch (the reading thread calls it; tests may too).
  void Apply(const kvevents::KvEventBatch& batch);
  // Whether the directory follows replica i's events now (else the router records itself).
  bool Live(int replica) const;
  KvEventFeedCounters counters() const;

 private:
  void Loop();
  void SetAllLive(bool live);

  const std::string stream_;
  const std::shared_ptr<redis::RedisClient> client_;
  PrefixDirectory& directory_;
  const std::function<int(const std::string&)> resolve_;
  const std::function<std::optional<Digest>()> root_;

  struct Source {
    std::string instance;
    uint64_t next_seq = 0;
  };
  mutable std::mutex mutex_;  // guards the members below
  std::condition_variable wake_;
  bool stopping_ = false;
  bool down_ = false;  // logged as unreadable, not yet back
  std::string last_id_ = "$";
  std::unordered_map<std::string, Source> sources_;  // by replica id
  KvEventFeedCounters counters_;
  std::atomic<bool> live_[kMaxReplicas] = {};
  std::thread thread_;
};

}  // namespace reprise::router
