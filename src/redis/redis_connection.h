// One connection to one Redis node through hiredis: connect and log in within timeouts, then
// pipelined commands (all sent, then all replies read: one round trip). Not thread-safe: the
// client (redis_client.h) owns connections and serializes their use.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "redis/redis_reply.h"
#include "redis/redis_url.h"

struct redisContext;

namespace reprise::redis {

struct RedisTimeouts {
  std::chrono::milliseconds connect{500};
  std::chrono::milliseconds io{1000};  // each read or write on the socket
};

class RedisConnection {
 public:
  // Connects to host:port and logs in with `login`'s user/password and db. Throws
  // RedisUnavailable (no server, timeout) or Error (AUTH refused: the message never holds the
  // password).
  RedisConnection(const std::string& host, int port, const RedisEndpoint& login,
                  const RedisTimeouts& timeouts);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends every command, then reads one reply per command. An error reply is a reply; a broken
  // or timed-out socket throws RedisUnavailable and leaves the connection broken().
  std::vector<RedisReply> Pipeline(std::span<const RedisCommand> commands);
  bool broken() const { return broken_; }
  const std::string& address() const { return address_; }

 private:
  redisContext* context_ = nullptr;
  std::string address_;  // host:port, for messages
  bool broken_ = false;
};

}  // namespace reprise::redis
