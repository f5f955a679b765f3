// KvEventFeed: the router's reader of the replicas' KV events (kvevents/kv_event.h). On its own
// thread it follows the Redis Stream from its end (XREAD BLOCK from `$`) and applies each batch
// to the PrefixDirectory: stored -> Record, removed -> Remove (each in its tier), all cleared ->
// ClearReplica. Batches of another model (root fingerprint) or of a replica id the router does
// not know are skipped. When it starts, when a replica comes (back) up, restarts (a new
// instance) or lost events (a gap in its sequence numbers), it fetches the replica's snapshot
// (GET /v1/cache/blocks) and then applies only the events numbered from the snapshot's position
// on; when no snapshot can be had, what the router believed the replica held is forgotten and the
// events that follow rebuild it. Until a replica's events flow (and while the stream cannot be
// read) the router falls back to its own record of where it sent which prompt.
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
#include <vector>

#include "kvevents/kv_event.h"
#include "redis/redis_client.h"
#include "reprise/engine.h"
#include "router/prefix_directory.h"

namespace reprise::router {

struct KvEventFeedCounters {
  uint64_t batches = 0;            // stream entries read
  uint64_t events_applied = 0;     // events applied to the directory
  uint64_t events_foreign = 0;     // skipped: another model's root fingerprint
  uint64_t events_unmatched = 0;   // skipped: a replica id none of the --replica URLs reports
  uint64_t gaps = 0;               // a replica's events were lost (sequence gap)
  uint64_t restarts = 0;           // a replica restarted (new instance)
  uint64_t events_stale = 0;       // skipped: already in a snapshot, or of a replaced instance
  uint64_t snapshots = 0;          // replicas' snapshots applied
  uint64_t snapshot_failures = 0;  // snapshots that could not be fetched or read
  uint64_t read_failures = 0;      // reads of the stream that failed
  bool connected = false;          // the last read succeeded
};

class KvEventFeed {
 public:
  // `resolve(id)`: the index of the replica that reports this id (-1: none). `root()`: the
  // root fingerprint the router computes keys under (nullopt until the replicas' KV settings
  // are known; events are skipped until then). `snapshot(i)`: replica i's block list, nullopt
  // when it cannot be had (may be empty: no snapshots).
  KvEventFeed(std::string stream, std::shared_ptr<redis::RedisClient> client,
              PrefixDirectory& directory, std::function<int(const std::string&)> resolve,
              std::function<std::optional<Digest>()> root,
              std::function<std::optional<CacheBlockList>(int)> snapshot = {});
  ~KvEventFeed();  // Stop()
  KvEventFeed(const KvEventFeed&) = delete;
  KvEventFeed& operator=(const KvEventFeed&) = delete;

  void Start();
  void Stop();
  // Applies one batch (the reading thread calls it; tests may too).
  void Apply(const kvevents::KvEventBatch& batch);
  // Replica i's snapshot is wanted (it came up): the reading thread fetches it before its next
  // read.
  void RequestSnapshot(int replica);
  // Fetches and applies replica i's snapshot now (the reading thread calls it; tests may too);
  // false when none could be had.
  bool Resync(int replica);
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
  const std::function<std::optional<CacheBlockList>(int)> snapshot_;

  struct Source {
    std::string instance;
    uint64_t next_seq = 0;
    std::vector<std::string> replaced;  // earlier instances (their late batches are skipped)
    // Follows `new_instance` from event `seq` on.
    void Follow(const std::string& new_instance, uint64_t seq);
  };
  void ApplyEvents(const kvevents::KvEventBatch& batch, int replica, Source& source);
  mutable std::mutex mutex_;  // guards the members below
  std::condition_variable wake_;
  bool stopping_ = false;
  bool down_ = false;  // logged as unreadable, not yet back
  std::string last_id_ = "$";
  std::unordered_map<std::string, Source> sources_;  // by replica id
  std::vector<int> snapshots_wanted_;
  KvEventFeedCounters counters_;
  std::atomic<bool> live_[kMaxReplicas] = {};
  std::thread thread_;
};

}  // namespace reprise::router
