// A Redis command (its arguments, binary-safe) and a reply as a plain value, independent of
// hiredis so that callers never touch its objects.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace reprise::redis {

using RedisCommand = std::vector<std::string>;

struct RedisReply {
  enum class Type { kNil, kStatus, kError, kInteger, kString, kArray };
  Type type = Type::kNil;
  std::string text;  // kStatus, kError, kString
  long long integer = 0;
  std::vector<RedisReply> elements;  // kArray

  bool IsError() const { return type == Type::kError; }
  bool IsNil() const { return type == Type::kNil; }
};

// The server could not be reached, timed out or dropped the connection; the client backs off
// and reconnects on a later call. Callers treat it as "the store is not there now".
class RedisUnavailable : public Error {
 public:
  using Error::Error;
};

}  // namespace reprise::redis
