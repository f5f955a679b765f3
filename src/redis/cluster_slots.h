// Redis Cluster's key placement: a key's hash slot (CRC16 of the key, or of its {hash tag},
// modulo 16384) and the map from slot ranges to master nodes that CLUSTER SLOTS reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/redis_reply.h"

namespace reprise::redis {

inline constexpr int kClusterSlots = 16384;

// CRC16/XMODEM, the checksum Redis Cluster hashes keys with.
uint16_t Crc16(std::string_view data);
// The slot of `key`: only the part inside the first non-empty {...} is hashed when there is one.
int HashSlot(std::string_view key);

struct ClusterNode {
  std::string host;
  int port = 0;
  std::string Address() const;
};

class SlotMap {
 public:
  // Replaces the map with a CLUSTER SLOTS reply; returns false (map unchanged) when the reply is
  // not one.
  bool Load(const RedisReply& cluster_slots);
  // Points one slot at another node (after a MOVED redirection).
  void Move(int slot, ClusterNode node);
  // The master serving `slot`; std::nullopt when no node covers it.
  std::optional<ClusterNode> NodeFor(int slot) const;
  // Every master, once each.
  std::vector<ClusterNode> Masters() const;
  bool empty() const { return nodes_.empty(); }

 private:
  std::vector<ClusterNode> nodes_;
  std::vector<int16_t> owner_ = std::vector<int16_t>(kClusterSlots, -1);  // index into nodes_
  int16_t IndexOf(const ClusterNode& node);
};

// Parses "MOVED 3999 127.0.0.1:6381" or "ASK ..." into the slot and node; std::nullopt for any
// other error text.
struct Redirection {
  bool ask = false;
  int slot = 0;
  ClusterNode node;
};
std::optional<Redirection> ParseRedirection(const std::string& error_text);

}  // namespace reprise::redis
