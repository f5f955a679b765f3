#include "redis/cluster_slots.h"

#include <fmt/format.h>

#include <charconv>

namespace reprise::redis {

uint16_t Crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc = static_cast<uint16_t>(crc ^ (static_cast<uint16_t>(byte) << 8));
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

int HashSlot(std::string_view key) {
  size_t open = key.find('{');
  if (open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) % kClusterSlots;
}

std::string ClusterNode::Address() const { return fmt::format("{}:{}", host, port); }

int16_t SlotMap::IndexOf(const ClusterNode& node) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].host == node.host && nodes_[i].port == node.port) return static_cast<int16_t>(i);
  }
  nodes_.push_back(node);
  return static_cast<int16_t>(nodes_.size() - 1);
}

bool SlotMap::Load(const RedisReply& reply) {
  if (reply.type != RedisReply::Type::kArray || reply.elements.empty()) return false;
  SlotMap fresh;
  for (const RedisReply& range : reply.elements) {
    // [start, end, [host, port, id...], replicas...]
    if (range.type != RedisReply::Type::kArray || range.elements.size() < 3) return false;
    const RedisReply& master = range.elements[2];
    if (master.type != RedisReply::Type::kArray || master.elements.size() < 2) return false;
    long long start = range.elements[0].integer;
    long long end = range.elements[1].integer;
    if (start < 0 || end >= kClusterSlots || start > end) return false;
    int16_t index =
        fresh.IndexOf({master.elements[0].text, static_cast<int>(master.elements[1].integer)});
    for (long long slot = start; slot <= end; ++slot)
      fresh.owner_[static_cast<size_t>(slot)] = index;
  }
  *this = std::move(fresh);
  return true;
}

void SlotMap::Move(int slot, ClusterNode node) {
  if (slot < 0 || slot >= kClusterSlots) return;
  owner_[static_cast<size_t>(slot)] = IndexOf(node);
}

std::optional<ClusterNode> SlotMap::NodeFor(int slot) const {
  if (slot < 0 || slot >= kClusterSlots) return std::nullopt;
  int16_t index = owner_[static_cast<size_t>(slot)];
  if (index < 0) return std::nullopt;
  return nodes_[static_cast<size_t>(index)];
}

std::vector<ClusterNode> SlotMap::Masters() const { return nodes_; }

std::optional<Redirection> ParseRedirection(const std::string& text) {
  Redirection out;
  std::string_view rest = text;
  if (rest.rfind("MOVED ", 0) == 0) {
    rest.remove_prefix(6);
  } else if (rest.rfind("ASK ", 0) == 0) {
    out.ask = true;
    rest.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  size_t space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + space, out.slot);
  if (ec != std::errc() || end != rest.data() + space) return std::nullopt;
  std::string_view address = rest.substr(space + 1);
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  out.node.host = std::string(address.substr(0, colon));
  std::string_view port = address.substr(colon + 1);
  auto [port_end, port_ec] = std::from_chars(port.data(), port.data() + port.size(), out.node.port);
  if (port_ec != std::errc() || port_end != port.data() + port.size()) return std::nullopt;
  return out;
}

}  // namespace reprise::redis
