// The blocks a cache holds, per tier, named by their keys: what Engine::ListCacheBlocks answers
// and GET /v1/cache/blocks sends, so that a reader of the KV events (the router) can start from
// it when it starts late, sees a replica restart, or loses events.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace reprise {

using BlockDigest = std::array<uint8_t, 32>;

struct CacheBlockRef {
  BlockDigest key{};
  BlockDigest parent{};         // the previous block's key, or the root fingerprint
  BlockDigest salt_digest{};    // of everything mixed into the key besides the tokens
  BlockDigest tenant_digest{};  // the block's owner (TenantSaltDigest; zero: none)
};

struct CacheBlockList {
  std::string replica_id;  // the KV events' replica id (empty: none)
  BlockDigest root{};      // the cache's root fingerprint (model, KV type, block size)
  // With KV events: the publisher's instance and the number of its next event. The lists hold
  // every change told by an event numbered below next_seq; a later event may be in them too, so a
  // reader applies the events from next_seq on (each one sets or clears one block: applying one
  // twice changes nothing).
  bool kv_events = false;
  std::string instance;
  uint64_t next_seq = 0;
  std::vector<CacheBlockRef> memory;  // full blocks in the memory pool's index
  std::vector<CacheBlockRef> disk;    // the disk tier's index
  // The blocks this process wrote to the shared tier and whose TTL has not passed (each replica
  // lists and tells of its own writes only).
  std::vector<CacheBlockRef> remote;
};

}  // namespace reprise
