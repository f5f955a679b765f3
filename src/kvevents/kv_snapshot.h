// The JSON form of a CacheBlockList (include/reprise/engine.h), as GET /v1/cache/blocks
// answers it and the router reads it: one place for the format, so both sides agree.
//
//   {"object": "cache.blocks", "replica_id": ID, "root": HEX,
//    "kv_events": {"instance": ID, "next_seq": N} | null,
//    "digests": [[SALT_HEX, TENANT_HEX], ...],
//    "tiers": {"memory": [[KEY_HEX, PARENT_HEX, DIGESTS_INDEX], ...], "disk": [...],
//              "remote": [...]}}
//
// A block's salt and tenant digests are few distinct pairs, so each block names its pair by
// index: about 140 bytes a block.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "reprise/engine.h"

namespace reprise::kvevents {

// Writes the JSON text through `write`, in pieces of about `piece_blocks` blocks, so that a large
// list is sent as it is written rather than held whole a second time.
void WriteCacheBlocksJson(const CacheBlockList& list,
                          const std::function<void(std::string_view)>& write,
                          size_t piece_blocks = 4096);
std::string CacheBlocksJson(const CacheBlockList& list);
// nullopt (and `why`) when the text is not such a list.
std::optional<CacheBlockList> ParseCacheBlocksJson(std::string_view text, std::string* why);

}  // namespace reprise::kvevents
