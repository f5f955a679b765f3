// KvTier: a store of KV blocks beyond the memory pool (local disk, a shared store), in the block
// format of block_format.h. A tier's blocking calls run only on the tier set's own I/O threads,
// never on the engine thread; ProbablyHeld is the one call the engine thread makes, and it must
// not block on I/O. A tier never fails a request: errors are counted, logged once, and the call
// answers "not stored" or "not held".
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "tiers/block_format.h"

namespace reprise {

// Counters since start and the tier's occupancy now.
struct TierStats {
  std::string name;             // "disk", "remote"
  bool available = true;        // false: unusable (see last_error); the server runs without it
  std::string last_error;       // the latest error's reason, empty when none
  int64_t blocks = 0;           // blocks held now
  uint64_t bytes = 0;           // bytes held now (headers included)
  uint64_t capacity_bytes = 0;  // the size cap; 0: none
  uint64_t blocks_written = 0;
  uint64_t bytes_written = 0;
  uint64_t blocks_read = 0;  // loaded and verified
  uint64_t bytes_read = 0;
  uint64_t evictions = 0;       // blocks the tier dropped to stay under its cap
  uint64_t corrupt_blocks = 0;  // refused (bad checksum, truncated, wrong key...) and deleted
  uint64_t foreign_blocks = 0;  // another model, KV layout or block size: ignored
  uint64_t errors = 0;          // I/O errors (disk full, unwritable, connection lost...)
};

// A block a tier holds, named without its tokens and bytes: what a listing or an event carries.
struct TierBlockRef {
  Digest key{};
  Digest parent_key{};  // the root fingerprint for a first block
  Digest extras_digest{};
  Digest owner{};  // BlockMeta::owner
};

inline TierBlockRef RefOf(const BlockMeta& meta) {
  return {meta.key, meta.parent_key, meta.extras_digest, meta.owner};
}

// Told of each block a tier gains (stored) or loses (evicted under its cap, deleted as bad,
// cleared, found gone, its TTL passed), so that whoever tells other processes what this one
// holds can. The tier calls it on the thread that made the change and under its own lock, so the
// changes of one block arrive in the order they happened; it must not block or call the tier.
class TierListener {
 public:
  virtual ~TierListener() = default;
  virtual void OnTierBlockStored(const char* tier, const TierBlockRef& block) = 0;
  virtual void OnTierBlockRemoved(const char* tier, const TierBlockRef& block) = 0;
};

class KvTier {
 public:
  virtual ~KvTier() = default;

  // "disk" or "remote": the source name reported to clients and in metrics.
  virtual const char* name() const = 0;

  // How many leading `keys` the tier probably holds, without waiting on I/O (called on the
  // engine thread, before it sets blocks aside for a load). Erring high costs a wasted load
  // attempt; erring low loses hits.
  virtual size_t ProbablyHeld(std::span<const Digest> keys) const = 0;

  // Whether a Store of this block would add anything (false when the tier already holds it).
  // Non-blocking, like ProbablyHeld: called on the engine thread to skip copying the block.
  virtual bool ShouldStore(const Digest& key) const = 0;

  // Stores one block (payload: identity.block_bytes bytes). Blocking. False when it was not
  // stored (an error, counted; or the tier refuses it).
  virtual bool Store(const BlockMeta& meta, std::span<const uint8_t> payload) = 0;

  // Loads blocks[i] into dests[i] (identity.block_bytes each) in order, verifying each (see
  // VerifyBlock); stops at the first block it does not hold or that fails verification (a bad
  // block is deleted and counted). Returns how many leading blocks were loaded. Blocking; may be
  // called from several I/O threads at once with different blocks.
  virtual size_t LoadPrefix(std::span<const BlockMeta> blocks, std::span<uint8_t* const> dests) = 0;

  // Drops one block / every block of this cache's identity / every such block whose header names
  // `owner` (BlockMeta::owner); returns how many were dropped.
  virtual bool Remove(const Digest& key) = 0;
  virtual size_t Clear() = 0;
  virtual size_t ClearOwned(const Digest& owner) = 0;

  virtual TierStats Stats() const = 0;

  // The blocks the tier holds as far as this process knows, without I/O: what its listener has
  // been told (the disk tier: its index; the remote tier: the blocks this process wrote whose TTL
  // has not passed).
  virtual std::vector<TierBlockRef> Blocks() const = 0;

  // Upkeep the tier set's writing thread runs about once a second (the remote tier tells of
  // blocks whose TTL passed).
  virtual void Maintain() {}
};

}  // namespace reprise
