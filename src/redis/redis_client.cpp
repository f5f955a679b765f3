#include "redis/redis_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace reprise::redis {
namespace {

constexpr int kMaxRedirections = 5;

bool ClusterDisabled(const RedisReply& reply) {
  return reply.IsError() && reply.text.find("cluster support disabled") != std::string::npos;
}

}  // namespace

RedisClient::RedisClient(RedisEndpoint endpoint, RedisClientOptions options)
    : endpoint_(std::move(endpoint)), options_(options) {}

RedisClient::~RedisClient() = default;

RedisClientCounters RedisClient::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

RedisConnection& RedisClient::Connection(const std::string& host, int port) {
  std::string address = fmt::format("{}:{}", host, port);
  auto it = connections_.find(address);
  if (it != connections_.end() && it->second->broken()) {
    connections_.erase(it);
    it = connections_.end();
  }
  if (it == connections_.end()) {
    auto connection = std::make_unique<RedisConnection>(host, port, endpoint_, options_.timeouts);
    ++counters_.connects;
    it = connections_.emplace(address, std::move(connection)).first;
  }
  return *it->second;
}

void RedisClient::Discover() {
  RedisConnection& seed = Connection(endpoint_.host, endpoint_.port);
  RedisCommand probe = {"CLUSTER", "SLOTS"};
  RedisReply reply = seed.Pipeline({&probe, 1}).front();
  if (ClusterDisabled(reply) || (reply.IsError() && reply.text.rfind("ERR unknown", 0) == 0)) {
    cluster_ = false;
  } else if (reply.IsError() && reply.text.rfind("NOAUTH", 0) == 0) {
    throw Error(
        fmt::format("Redis at {} requires a password (set REDIS_PASSWORD or pass a "
                    "password file)",
                    endpoint_.Describe()));
  } else if (!slots_.Load(reply)) {
    throw RedisUnavailable(fmt::format("Redis at {} answered CLUSTER SLOTS with no usable map: {}",
                                       endpoint_.Describe(), reply.text));
  } else {
    cluster_ = true;
    if (endpoint_.db != 0) throw Error("Redis Cluster has only database 0; drop /DB from the URL");
  }
  discovered_ = true;
}

void RedisClient::RefreshSlots() {
  // Ask the masters we know, then the seed, until one answers.
  std::vector<ClusterNode> candidates = slots_.Masters();
  candidates.push_back({endpoint_.host, endpoint_.port});
  RedisCommand probe = {"CLUSTER", "SLOTS"};
  for (const ClusterNode& node : candidates) {
    try {
      RedisReply reply = Connection(node.host, node.port).Pipeline({&probe, 1}).front();
      if (slots_.Load(reply)) {
        slots_stale_ = false;
        return;
      }
    } catch (const RedisUnavailable&) {
      // try the next node
    }
  }
  throw RedisUnavailable(fmt::format("no node of the Redis Cluster at {} answered CLUSTER SLOTS",
                                     endpoint_.Describe()));
}

void RedisClient::NoteFailure() {
  ++counters_.failures;
  ++failures_in_row_;
  auto delay = options_.backoff_min * (1LL << std::min(failures_in_row_ - 1, 16));
  retry_after_ =
      std::chrono::steady_clock::now() +
      std::min<std::chrono::milliseconds>(
          std::chrono::duration_cast<std::chrono::milliseconds>(delay), options_.backoff_max);
  // A restarted server or a resharded cluster is found out again from scratch.
  connections_.clear();
  discovered_ = false;
}

RedisReply RedisClient::Run(const RedisCommand& command) {
  return Run(std::vector<RedisCommand>{command}).front();
}

std::vector<RedisReply> RedisClient::Run(const std::vector<RedisCommand>& commands) {
  std::lock_guard lock(mutex_);
  if (failures_in_row_ > 0 && std::chrono::steady_clock::now() < retry_after_) {
    ++counters_.failures;
    throw RedisUnavailable(
        fmt::format("Redis at {} is unavailable; retrying later", endpoint_.Describe()));
  }
  try {
    if (!discovered_) Discover();
    std::vector<RedisReply> replies;
    if (cluster_) {
      replies = RunCluster(commands);
    } else {
      replies = Connection(endpoint_.host, endpoint_.port).Pipeline(commands);
    }
    failures_in_row_ = 0;
    return replies;
  } catch (const Error&) {
    // Unreachable, timed out, or refused our login: back off either way.
    NoteFailure();
    throw;
  }
}

namespace {

// The key a command's slot is taken from: its second argument, but for XREAD the first stream
// after STREAMS (the first key decides; a reader of several streams keeps them in one slot).
std::string CommandKey(const RedisCommand& command) {
  if (command.empty()) return "";
  if (command[0] == "XREAD" || command[0] == "xread") {
    for (size_t i = 1; i + 1 < command.size(); ++i) {
      if (command[i] == "STREAMS" || command[i] == "streams") return command[i + 1];
    }
  }
  return command.size() > 1 ? command[1] : "";
}

}  // namespace

std::vector<RedisReply> RedisClient::RunCluster(const std::vector<RedisCommand>& commands) {
  if (slots_stale_) RefreshSlots();
  // Group the commands by the master of their key's slot: one pipeline per node.
  std::map<std::string, std::vector<size_t>> by_node;
  std::map<std::string, ClusterNode> nodes;
  for (size_t i = 0; i < commands.size(); ++i) {
    int slot = HashSlot(CommandKey(commands[i]));
    std::optional<ClusterNode> node = slots_.NodeFor(slot);
    if (!node) {
      RefreshSlots();
      node = slots_.NodeFor(slot);
      if (!node) throw RedisUnavailable(fmt::format("no Redis Cluster node serves slot {}", slot));
    }
    by_node[node->Address()].push_back(i);
    nodes[node->Address()] = *node;
  }
  std::vector<RedisReply> replies(commands.size());
  for (const auto& [address, indices] : by_node) {
    std::vector<RedisCommand> batch;
    batch.reserve(indices.size());
    for (size_t i : indices) batch.push_back(commands[i]);
    const ClusterNode& node = nodes[address];
    std::vector<RedisReply> got = Connection(node.host, node.port).Pipeline(batch);
    for (size_t j = 0; j < indices.size(); ++j) replies[indices[j]] = std::move(got[j]);
  }
  for (size_t i = 0; i < commands.size(); ++i) {
    if (replies[i].IsError()) replies[i] = FollowRedirections(commands[i], std::move(replies[i]));
  }
  return replies;
}

RedisReply RedisClient::FollowRedirections(const RedisCommand& command, RedisReply reply) {
  for (int hop = 0; hop < kMaxRedirections && reply.IsError(); ++hop) {
    std::optional<Redirection> redirection = ParseRedirection(reply.text);
    if (!redirection) return reply;
    ++counters_.redirections;
    RedisConnection& target = Connection(redirection->node.host, redirection->node.port);
    if (redirection->ask) {
      // The slot is migrating: this one command goes to the importing node after ASKING.
      std::vector<RedisCommand> asking = {{"ASKING"}, command};
      reply = std::move(target.Pipeline(asking)[1]);
    } else {
      slots_.Move(redirection->slot, redirection->node);
      slots_stale_ = true;  // more slots have likely moved: reload the whole map next call
      reply = std::move(target.Pipeline({&command, 1}).front());
    }
  }
  return reply;
}

}  // namespace reprise::redis
