// A thread-safe Redis client for one standalone server or one Redis Cluster, found out on the
// first connection (CLUSTER SLOTS). Commands run pipelined: one round trip per node that holds
// their keys. In a cluster each command goes to its key's master; MOVED and ASK redirections are
// followed and the slot map refreshed. When the store cannot be reached, calls throw
// RedisUnavailable at once and the client reconnects with exponential backoff. Calls are
// synchronous with socket timeouts: the tier and the event streams call it from their own
// threads, never from the engine's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "redis/cluster_slots.h"
#include "redis/redis_connection.h"
#include "redis/redis_reply.h"
#include "redis/redis_url.h"

namespace reprise::redis {

struct RedisClientOptions {
  RedisTimeouts timeouts;
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{5000};
};

struct RedisClientCounters {
  uint64_t failures = 0;      // calls that found the store unreachable (or in backoff)
  uint64_t connects = 0;      // connections opened (the first one included)
  uint64_t redirections = 0;  // MOVED and ASK followed
};

class RedisClient {
 public:
  explicit RedisClient(RedisEndpoint endpoint, RedisClientOptions options = {});
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // One reply per command, in order (a Redis error reply is a reply). The key of a command is
  // its second argument (XREAD: the first stream after STREAMS; commands without one, like PING,
  // go to any node). Throws
  // RedisUnavailable when a node cannot be reached, or while backing off after a failure, and
  // Error when the server refuses our login.
  std::vector<RedisReply> Run(const std::vector<RedisCommand>& commands);
  RedisReply Run(const RedisCommand& command);

  // Whether the store is a Redis Cluster (known after the first successful call).
  bool cluster() const { return cluster_.load(); }
  RedisClientCounters counters() const;
  const RedisEndpoint& endpoint() const { return endpoint_; }

 private:
  RedisConnection& Connection(const std::string& host, int port);
  void Discover();  // connects to the seed, learns standalone or cluster (and the slot map)
  void RefreshSlots();
  void NoteFailure();
  std::vector<RedisReply> RunCluster(const std::vector<RedisCommand>& commands);
  RedisReply FollowRedirections(const RedisCommand& command, RedisReply reply);

  const RedisEndpoint endpoint_;
  const RedisClientOptions options_;
  mutable std::mutex mutex_;
  bool discovered_ = false;
  std::atomic<bool> cluster_{false};
  bool slots_stale_ = false;
  SlotMap slots_;
  std::map<std::string, std::unique_ptr<RedisConnection>> connections_;  // by host:port
  int failures_in_row_ = 0;
  std::chrono::steady_clock::time_point retry_after_{};
  RedisClientCounters counters_;
};

}  // namespace reprise::redis
