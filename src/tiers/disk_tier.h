// DiskTier: KV blocks as content-addressed files under one directory, so that the cache survives
// a restart and holds more than memory. DIR/<fingerprint>/<first key byte>/<key>.kvb, each file
// one block in the shared block format. An index in memory (rebuilt at start-up from the headers
// alone) answers lookups without touching the disk, and knows each block's owner (from its header)
// so one tenant's blocks can be cleared; a size cap evicts least recently used files.
//
// Durability: a file is written under a temporary name and renamed into place, so a crash never
// leaves a half-written file under a block's name. It is not fsynced by default (fsync = false):
// this is a cache, and after a power loss a torn or empty file fails its checksum at load and is
// deleted and recomputed. Set fsync to make each block durable before it is indexed.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>

#include "tiers/block_format.h"
#include "tiers/kv_tier.h"

namespace reprise {

struct DiskTierConfig {
  std::string path;                  // DIR; created when missing
  uint64_t capacity_bytes = 0;       // 0: no cap
  bool fsync = false;                // fdatasync each file before renaming it into place
  TierListener* listener = nullptr;  // told of blocks indexed and dropped (may be null)
};

// What the start-up scan found.
struct DiskRebuild {
  int64_t blocks = 0;   // indexed
  int64_t foreign = 0;  // files of another fingerprint (left alone) or foreign files in ours
  int64_t corrupt = 0;  // unreadable or inconsistent headers (deleted)
  double seconds = 0;
};

class DiskTier : public KvTier {
 public:
  // Scans DIR and rebuilds the index. Never throws for an unusable DIR: the tier then holds
  // nothing and stores nothing, and Stats() says why.
  DiskTier(const TierIdentity& identity, const DiskTierConfig& config);

  const char* name() const override { return "disk"; }
  size_t ProbablyHeld(std::span<const Digest> keys) const override;
  bool ShouldStore(const Digest& key) const override;
  bool Store(const BlockMeta& meta, std::span<const uint8_t> payload) override;
  size_t LoadPrefix(std::span<const BlockMeta> blocks, std::span<uint8_t* const> dests) override;
  bool Remove(const Digest& key) override;
  size_t Clear() override;
  size_t ClearOwned(const Digest& owner) override;
  TierStats Stats() const override;
  std::vector<TierBlockRef> Blocks() const override;

  const DiskRebuild& rebuild() const { return rebuild_; }
  // The file that holds (or would hold) the block keyed `key`.
  std::string BlockPath(const Digest& key) const;

 private:
  struct Entry {
    uint64_t bytes = 0;
    TierBlockRef ref;                 // from the block's header
    std::list<Digest>::iterator lru;  // position in lru_
  };

  void Rebuild();
  bool LoadOne(const BlockMeta& expected, uint8_t* dest);
  // Index bookkeeping; the caller holds mutex_.
  void IndexLocked(const TierBlockRef& ref, uint64_t bytes);
  // Unindexes the block (its file is gone or going) and tells the listener.
  void ForgetLocked(const Digest& key);
  // Deletes least recently used files until `incoming` more bytes fit under the cap.
  void MakeRoomLocked(uint64_t incoming);
  // Counts an error and logs its reason the first time this kind of error happens.
  void NoteError(const std::string& what, int error_number);
  // A bad file: counted (as foreign or corrupt), logged once per kind, deleted, unindexed.
  void Discard(const Digest& key, const std::string& path, BlockCheck check);

  TierIdentity identity_;
  DiskTierConfig config_;
  std::string root_;  // DIR/<fingerprint>
  DiskRebuild rebuild_;

  mutable std::mutex mutex_;  // guards everything below
  std::unordered_map<Digest, Entry, DigestHash> index_;
  std::list<Digest> lru_;  // most recently used first
  uint64_t bytes_ = 0;
  bool readable_ = false;
  bool writable_ = false;
  std::vector<bool> made_dirs_;  // [256] the key-prefix folders known to exist
  std::vector<int> logged_errors_;
  std::vector<BlockCheck> logged_checks_;
  TierStats stats_;
};

}  // namespace reprise
