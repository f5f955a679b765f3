#include "kvevents/kv_snapshot.h"

#include <map>
#include <nlohmann/json.hpp>

#include "core/sha256.h"

namespace reprise::kvevents {
namespace {

using Tier = std::vector<CacheBlockRef> CacheBlockList::*;
constexpr std::pair<const char*, Tier> kTiers[] = {{"memory", &CacheBlockList::memory},
                                                   {"disk", &CacheBlockList::disk},
                                                   {"remote", &CacheBlockList::remote}};

void AppendQuoted(std::string& text, const BlockDigest& digest) {
  text += '"';
  text += ToHex(digest);
  text += '"';
}

}  // namespace

void WriteCacheBlocksJson(const CacheBlockList& list,
                          const std::function<void(std::string_view)>& write, size_t piece_blocks) {
  // The distinct (salt, tenant) pairs, numbered in order of first use.
  std::map<std::pair<BlockDigest, BlockDigest>, size_t> pairs;
  std::vector<const std::pair<const std::pair<BlockDigest, BlockDigest>, size_t>*> order;
  for (const auto& [name, tier] : kTiers) {
    for (const CacheBlockRef& block : list.*tier) {
      auto [it, added] = pairs.try_emplace({block.salt_digest, block.tenant_digest}, pairs.size());
      if (added) order.push_back(&*it);
    }
  }
  nlohmann::json head = {{"object", "cache.blocks"},
                         {"replica_id", list.replica_id},
                         {"root", ToHex(list.root)},
                         {"kv_events", nullptr}};
  if (list.kv_events) {
    head["kv_events"] = {{"instance", list.instance}, {"next_seq", list.next_seq}};
  }
  std::string text = head.dump();
  text.pop_back();  // the closing brace: the lists follow
  text += ",\"digests\":[";
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0) text += ',';
    text += '[';
    AppendQuoted(text, order[i]->first.first);
    text += ',';
    AppendQuoted(text, order[i]->first.second);
    text += ']';
  }
  text += "],\"tiers\":{";
  bool first_tier = true;
  for (const auto& [name, tier] : kTiers) {
    if (!first_tier) text += ',';
    text += '"';
    text += name;
    text += "\":[";
    first_tier = false;
    size_t in_piece = 0;
    bool first = true;
    for (const CacheBlockRef& block : list.*tier) {
      if (!first) text += ',';
      first = false;
      text += '[';
      AppendQuoted(text, block.key);
      text += ',';
      AppendQuoted(text, block.parent);
      text += ',';
      text += std::to_string(pairs.at({block.salt_digest, block.tenant_digest}));
      text += ']';
      if (++in_piece == piece_blocks) {
        write(text);
        text.clear();
        in_piece = 0;
      }
    }
    text += "]";
  }
  text += "}}";
  write(text);
}

std::string CacheBlocksJson(const CacheBlockList& list) {
  std::string text;
  WriteCacheBlocksJson(list, [&](std::string_view piece) { text += piece; });
  return text;
}

std::optional<CacheBlockList> ParseCacheBlocksJson(std::string_view text, std::string* why) {
  auto fail = [&](const std::string& reason) -> std::optional<CacheBlockList> {
    if (why) *why = reason;
    return std::nullopt;
  };
  nlohmann::json body = nlohmann::json::parse(text, nullptr, false);
  if (!body.is_object() || body.value("object", "") != "cache.blocks") {
    return fail("not a cache.blocks object");
  }
  CacheBlockList list;
  const nlohmann::json& replica = body["replica_id"];
  if (!replica.is_string()) return fail("no replica_id");
  list.replica_id = replica.get<std::string>();
  const nlohmann::json& root = body["root"];
  if (!root.is_string() || !ParseHexDigest(root.get<std::string>(), list.root)) {
    return fail("no root fingerprint");
  }
  const nlohmann::json& events = body["kv_events"];
  if (events.is_object()) {
    const nlohmann::json& instance = events["instance"];
    const nlohmann::json& next = events["next_seq"];
    if (!instance.is_string() || !next.is_number_unsigned()) return fail("bad kv_events");
    list.kv_events = true;
    list.instance = instance.get<std::string>();
    list.next_seq = next.get<uint64_t>();
  } else if (!events.is_null()) {
    return fail("bad kv_events");
  }
  std::vector<std::pair<BlockDigest, BlockDigest>> digests;
  const nlohmann::json& pairs = body["digests"];
  if (!pairs.is_array()) return fail("no digests");
  for (const nlohmann::json& pair : pairs) {
    std::pair<BlockDigest, BlockDigest> parsed;
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string() ||
        !ParseHexDigest(pair[0].get<std::string>(), parsed.first) ||
        !ParseHexDigest(pair[1].get<std::string>(), parsed.second)) {
      return fail("bad digests");
    }
    digests.push_back(parsed);
  }
  const nlohmann::json& tiers = body["tiers"];
  if (!tiers.is_object()) return fail("no tiers");
  for (const auto& [name, tier] : kTiers) {
    const nlohmann::json& blocks = tiers[name];
    if (!blocks.is_array()) return fail(std::string("no ") + name + " tier");
    (list.*tier).reserve(blocks.size());
    for (const nlohmann::json& item : blocks) {
      CacheBlockRef block;
      if (!item.is_array() || item.size() != 3 || !item[0].is_string() || !item[1].is_string() ||
          !item[2].is_number_unsigned() || item[2].get<uint64_t>() >= digests.size() ||
          !ParseHexDigest(item[0].get<std::string>(), block.key) ||
          !ParseHexDigest(item[1].get<std::string>(), block.parent)) {
        return fail(std::string("bad block in the ") + name + " tier");
      }
      std::tie(block.salt_digest, block.tenant_digest) = digests[item[2].get<size_t>()];
      (list.*tier).push_back(block);
    }
  }
  return list;
}

}  // namespace reprise::kvevents
