#include "kvevents/kv_event.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace reprise::kvevents {
namespace {

constexpr const char* kVersion = "1";

std::optional<KvEventType> TypeNamed(const std::string& name) {
  for (KvEventType type : {KvEventType::kStored, KvEventType::kRemoved, KvEventType::kCleared}) {
    if (name == EventTypeName(type)) return type;
  }
  return std::nullopt;
}

bool DigestField(const nlohmann::json& event, const char* name, Digest& out) {
  auto it = event.find(name);
  return it != event.end() && it->is_string() && ParseHexDigest(it->get<std::string>(), out);
}

}  // namespace

const char* EventTypeName(KvEventType type) {
  switch (type) {
    case KvEventType::kStored:
      return "stored";
    case KvEventType::kRemoved:
      return "removed";
    case KvEventType::kCleared:
      return "cleared";
  }
  return "?";
}

const char* EventTierName(KvEventTier tier) {
  switch (tier) {
    case KvEventTier::kMemory:
      return "memory";
    case KvEventTier::kDisk:
      return "disk";
    case KvEventTier::kRemote:
      return "remote";
  }
  return "?";
}

std::optional<KvEventTier> EventTierNamed(std::string_view name) {
  for (KvEventTier tier : {KvEventTier::kMemory, KvEventTier::kDisk, KvEventTier::kRemote}) {
    if (name == EventTierName(tier)) return tier;
  }
  return std::nullopt;
}

std::vector<std::string> EncodeBatch(const KvEventBatch& batch) {
  nlohmann::json events = nlohmann::json::array();
  for (const KvEvent& event : batch.events) {
    nlohmann::json item = {{"type", EventTypeName(event.type)}};
    if (event.type != KvEventType::kCleared) {
      item["tier"] = EventTierName(event.tier);
      item["key"] = ToHex(event.key);
      item["parent"] = ToHex(event.parent);
      item["salt_digest"] = ToHex(event.salt_digest);
      item["tenant_digest"] = ToHex(event.tenant_digest);
    }
    events.push_back(std::move(item));
  }
  return {"v",        kVersion,
          "replica",  batch.replica,
          "instance", batch.instance,
          "root",     ToHex(batch.root),
          "seq",      std::to_string(batch.first_seq),
          "events",   events.dump()};
}

std::optional<KvEventBatch> DecodeBatch(const std::vector<std::string>& fields) {
  KvEventBatch batch;
  bool version = false, replica = false, instance = false, root = false, seq = false;
  std::string events_text;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& name = fields[i];
    const std::string& value = fields[i + 1];
    if (name == "v") {
      version = value == kVersion;
    } else if (name == "replica") {
      batch.replica = value;
      replica = !value.empty();
    } else if (name == "instance") {
      batch.instance = value;
      instance = !value.empty();
    } else if (name == "root") {
      root = ParseHexDigest(value, batch.root);
    } else if (name == "seq") {
      auto [end, error] =
          std::from_chars(value.data(), value.data() + value.size(), batch.first_seq);
      seq = error == std::errc() && end == value.data() + value.size();
    } else if (name == "events") {
      events_text = value;
    }
  }
  if (!version || !replica || !instance || !root || !seq) return std::nullopt;
  nlohmann::json events = nlohmann::json::parse(events_text, nullptr, false);
  if (!events.is_array()) return std::nullopt;
  for (const nlohmann::json& item : events) {
    if (!item.is_object() || !item.contains("type") || !item["type"].is_string()) {
      return std::nullopt;
    }
    std::optional<KvEventType> type = TypeNamed(item["type"].get<std::string>());
    if (!type) return std::nullopt;
    KvEvent event;
    event.type = *type;
    if (event.type != KvEventType::kCleared) {
      auto tier_it = item.find("tier");
      std::optional<KvEventTier> tier;
      if (tier_it != item.end() && tier_it->is_string())
        tier = EventTierNamed(tier_it->get<std::string>());
      if (!tier || !DigestField(item, "key", event.key) ||
          !DigestField(item, "parent", event.parent) ||
          !DigestField(item, "salt_digest", event.salt_digest) ||
          !DigestField(item, "tenant_digest", event.tenant_digest)) {
        return std::nullopt;
      }
      event.tier = *tier;
    }
    batch.events.push_back(event);
  }
  return batch;
}

}  // namespace reprise::kvevents
