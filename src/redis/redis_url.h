// Where a Redis server is and how to log in: parsed from redis://[[USER]:PASSWORD@]HOST:PORT[/DB].
#pragma once

#include <string>

namespace reprise::redis {

struct RedisEndpoint {
  std::string host;
  int port = 6379;
  int db = 0;            // SELECT after connecting (Redis Cluster has only db 0)
  std::string user;      // AUTH user password (Redis 6 ACL); empty: AUTH password
  std::string password;  // empty: no AUTH. Never logged.

  // "HOST:PORT[/DB]", without the password: safe to log.
  std::string Describe() const;
};

// Throws reprise::Error naming what is wrong (scheme, port, db). A password in the URL is taken,
// but one from a file or the environment (see ResolvePassword) is preferred by callers.
RedisEndpoint ParseRedisUrl(const std::string& url);

// The password to use: the first line of `password_file` when given (Error if unreadable), else
// `password` when not empty (the server reads it from REDIS_PASSWORD), else the one in the URL.
void ResolvePassword(RedisEndpoint& endpoint, const std::string& password_file,
                     const std::string& password);

}  // namespace reprise::redis
