// KvEventPublisher: the prefix cache's listener that tells a Redis Stream which blocks this
// replica holds. Events are queued (bounded) on the engine thread and written in batches
// (XADD ... MAXLEN ~ N) by the publisher's own thread; when Redis is slow or down the queue
// fills and further events are dropped and counted: the engine thread never waits on Redis and
// no request fails because of it. Readers see dropped events as a gap in the sequence numbers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "kvcache/prefix_cache_listener.h"
#include "kvevents/kv_event.h"
#include "redis/redis_client.h"

namespace reprise::kvevents {

struct KvEventPublisherConfig {
  std::string replica_id;               // required: how readers tell replicas apart
  std::string stream = kDefaultStream;  // the stream's key
  size_t max_stream_entries = 10000;    // XADD MAXLEN ~ (entries, i.e. batches)
  size_t max_queued_events = 100000;    // beyond it events are dropped (counted)
  size_t max_batch_events = 512;        // per stream entry
  std::chrono::milliseconds flush_interval{10};
  std::chrono::milliseconds retry_pause{250};  // after a failed write
};

struct KvEventPublisherStats {
  uint64_t published = 0;  // events written to the stream
  uint64_t dropped = 0;    // events lost: queue full, or Redis unreachable
  uint64_t batches = 0;    // stream entries written
  uint64_t failures = 0;   // writes that failed
  size_t queued = 0;
  bool connected = false;  // the last write succeeded
};

class KvEventPublisher : public PrefixCacheListener {
 public:
  // Starts the writing thread and queues an all-cleared event (a replica starts empty).
  KvEventPublisher(const Digest& root_fingerprint, KvEventPublisherConfig config,
                   std::shared_ptr<redis::RedisClient> client);
  // Writes what is queued (one try) and stops.
  ~KvEventPublisher() override;
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  void OnBlockStored(const CachedBlockInfo& block) override;
  void OnBlockRemoved(const CachedBlockInfo& block, BlockRemoval reason) override;
  // Queues one event; never waits on Redis. Any thread.
  void Publish(const KvEvent& event);
  // Waits until every event queued so far is written or dropped, at most `timeout`; true when
  // done in time.
  bool Flush(std::chrono::milliseconds timeout);

  KvEventPublisherStats stats() const;
  const std::string& instance() const { return instance_; }
  // The number the next event will get.
  uint64_t next_seq() const;
  const KvEventPublisherConfig& config() const { return config_; }

 private:
  void Loop();
  // Writes one batch (the lock is released meanwhile); false when it failed.
  bool Write(std::unique_lock<std::mutex>& lock);

  const Digest root_;
  const KvEventPublisherConfig config_;
  const std::shared_ptr<redis::RedisClient> client_;
  const std::string instance_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::pair<uint64_t, KvEvent>> queue_;  // (sequence number, event)
  uint64_t next_seq_ = 0;
  bool writing_ = false;
  bool stopping_ = false;
  bool down_ = false;  // logged as unreachable, not yet back
  KvEventPublisherStats stats_;
  std::thread thread_;
};

}  // namespace reprise::kvevents
