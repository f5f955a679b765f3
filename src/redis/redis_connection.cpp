#include "redis/redis_connection.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <sys/time.h>

namespace reprise::redis {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

RedisReply Convert(const redisReply* reply) {
  RedisReply out;
  switch (reply->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.text.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.text.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.text.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = reply->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(reply->elements);
      for (size_t i = 0; i < reply->elements; ++i)
        out.elements.push_back(Convert(reply->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

}  // namespace

RedisConnection::RedisConnection(const std::string& host, int port, const RedisEndpoint& login,
                                 const RedisTimeouts& timeouts)
    : address_(fmt::format("{}:{}", host, port)) {
  context_ = redisConnectWithTimeout(host.c_str(), port, ToTimeval(timeouts.connect));
  if (context_ == nullptr || context_->err != 0) {
    std::string reason = context_ != nullptr ? context_->errstr : "out of memory";
    if (context_ != nullptr) redisFree(context_);
    context_ = nullptr;
    throw RedisUnavailable(fmt::format("cannot connect to Redis at {}: {}", address_, reason));
  }
  redisSetTimeout(context_, ToTimeval(timeouts.io));
  std::vector<RedisCommand> login_commands;
  if (!login.password.empty()) {
    login_commands.push_back(login.user.empty() ? RedisCommand{"AUTH", login.password}
                                                : RedisCommand{"AUTH", login.user, login.password});
  }
  if (login.db != 0) login_commands.push_back({"SELECT", std::to_string(login.db)});
  if (login_commands.empty()) return;
  std::vector<RedisReply> replies;
  try {
    replies = Pipeline(login_commands);
  } catch (...) {
    redisFree(context_);
    context_ = nullptr;
    throw;
  }
  for (size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].IsError()) {
      redisFree(context_);
      context_ = nullptr;
      // The reply names the problem (WRONGPASS, NOAUTH, DB index out of range); never the
      // password itself.
      throw Error(fmt::format("Redis at {} refused {}: {}", address_, login_commands[i][0],
                              replies[i].text));
    }
  }
}

RedisConnection::~RedisConnection() {
  if (context_ != nullptr) redisFree(context_);
}

std::vector<RedisReply> RedisConnection::Pipeline(std::span<const RedisCommand> commands) {
  if (broken_) throw RedisUnavailable(fmt::format("the connection to {} is broken", address_));
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const RedisCommand& command : commands) {
    argv.clear();
    lengths.clear();
    for (const std::string& arg : command) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(),
                               lengths.data()) != REDIS_OK) {
      broken_ = true;
      throw RedisUnavailable(fmt::format("Redis at {}: {}", address_, context_->errstr));
    }
  }
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
      broken_ = true;
      throw RedisUnavailable(fmt::format("Redis at {}: {}", address_,
                                         context_->err != 0 ? context_->errstr : "no reply"));
    }
    replies.push_back(Convert(static_cast<redisReply*>(raw)));
    freeReplyObject(raw);
  }
  return replies;
}

}  // namespace reprise::redis
