#include "redis/redis_url.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>

#include "core/error.h"

namespace reprise::redis {
namespace {

int ParseNumber(const std::string& text, int low, int high, const std::string& what,
                const std::string& url_for_message) {
  size_t used = 0;
  int value = -1;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || value < low || value > high) {
    throw Error(fmt::format("bad {} '{}' in Redis URL '{}' (expected {} to {})", what, text,
                            url_for_message, low, high));
  }
  return value;
}

}  // namespace

std::string RedisEndpoint::Describe() const {
  return db == 0 ? fmt::format("{}:{}", host, port) : fmt::format("{}:{}/{}", host, port, db);
}

RedisEndpoint ParseRedisUrl(const std::string& url) {
  const std::string scheme = "redis://";
  if (url.rfind(scheme, 0) != 0) {
    throw Error(
        fmt::format("a Redis URL starts with redis:// (got '{}'); rediss:// (TLS) is not "
                    "supported",
                    url.rfind("rediss://", 0) == 0 ? std::string("rediss://...") : url));
  }
  std::string rest = url.substr(scheme.size());
  RedisEndpoint endpoint;
  std::string shown = scheme;  // the URL without its password, for messages
  if (size_t at = rest.rfind('@'); at != std::string::npos) {
    std::string credentials = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = credentials.find(':');
    if (colon == std::string::npos) {
      endpoint.password = credentials;
    } else {
      endpoint.user = credentials.substr(0, colon);
      endpoint.password = credentials.substr(colon + 1);
    }
    shown += "***@";
  }
  shown += rest;
  std::string hostport = rest;
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    hostport = rest.substr(0, slash);
    std::string db = rest.substr(slash + 1);
    if (!db.empty()) endpoint.db = ParseNumber(db, 0, 1 << 20, "database number", shown);
  }
  size_t colon = hostport.rfind(':');
  if (colon == std::string::npos) {
    endpoint.host = hostport;
  } else {
    endpoint.host = hostport.substr(0, colon);
    endpoint.port = ParseNumber(hostport.substr(colon + 1), 1, 65535, "port", shown);
  }
  if (endpoint.host.size() > 2 && endpoint.host.front() == '[' && endpoint.host.back() == ']') {
    endpoint.host = endpoint.host.substr(1, endpoint.host.size() - 2);  // [::1]
  }
  if (endpoint.host.empty()) throw Error(fmt::format("no host in Redis URL '{}'", shown));
  return endpoint;
}

void ResolvePassword(RedisEndpoint& endpoint, const std::string& password_file,
                     const std::string& password) {
  if (!password_file.empty()) {
    std::ifstream file(password_file);
    std::string line;
    if (!file || !std::getline(file, line)) {
      throw Error(fmt::format("cannot read the Redis password file '{}'", password_file));
    }
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    endpoint.password = line;
    return;
  }
  if (!password.empty()) endpoint.password = password;
}

}  // namespace reprise::redis
