// KV events: what a replica tells others about the blocks its cache holds (stored, removed, all
// cleared), and their form on a Redis Stream. One stream entry is one batch of one replica's
// events; the publisher (kv_event_publisher.h) writes them, the router reads them. One place for
// the wire format, so both sides agree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sha256.h"

namespace reprise::kvevents {

inline constexpr const char* kDefaultStream = "reprise:kv-events";

enum class KvEventType { kStored, kRemoved, kCleared };
// Where the block is (or was) held: the replica's memory, its disk tier, or the shared tier.
enum class KvEventTier { kMemory, kDisk, kRemote };

const char* EventTypeName(KvEventType type);                       // "stored", "removed", "cleared"
const char* EventTierName(KvEventTier tier);                       // "memory", "disk", "remote"
std::optional<KvEventTier> EventTierNamed(std::string_view name);  // nullopt: none of those

struct KvEvent {
  KvEventType type = KvEventType::kStored;
  KvEventTier tier = KvEventTier::kMemory;
  Digest key{};     // the block's key (zero for kCleared)
  Digest parent{};  // the previous block's key, or the root fingerprint for a first block
  // Digest of everything mixed into the key besides the tokens: the tenant's salt and the
  // client's cache_salt, hashed (the salt itself never leaves the replica).
  Digest salt_digest{};
  // The block's owner, TenantSaltDigest of its tenant's salt (zero: none), as the tiers' block
  // headers record it for per-tenant clears.
  Digest tenant_digest{};
};

// One stream entry: consecutive events of one replica's one run.
struct KvEventBatch {
  std::string replica;  // the publisher's replica id
  // Random per publisher start: a new instance means the replica restarted (its memory is empty).
  std::string instance;
  Digest root{};  // the cache's root fingerprint (model, KV type, block size)
  // Sequence number of the first event; events are numbered consecutively per instance, dropped
  // ones included, so a reader sees a gap when some were lost.
  uint64_t first_seq = 0;
  std::vector<KvEvent> events;
};

// The XADD fields (name, value, name, value, ...) of a batch.
std::vector<std::string> EncodeBatch(const KvEventBatch& batch);
// The batch in an entry's fields; nullopt when they are not a batch of this format (a reader
// skips those, so other writers on the stream do no harm).
std::optional<KvEventBatch> DecodeBatch(const std::vector<std::string>& fields);

}  // namespace reprise::kvevents
