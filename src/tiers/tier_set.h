// TierSet: the KV tiers beyond memory, nearest first (disk, then a shared store), and the I/O
// threads that run them so the engine thread never waits on a tier. The engine offers blocks to
// write (copied at once: their memory is reused right after), asks what the tiers probably hold,
// and starts loads into blocks it has set aside; finished loads are collected on its own thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tiers/block_format.h"
#include "tiers/kv_tier.h"

namespace reprise {

struct TierSetConfig {
  // Copies of blocks waiting to be written, at most; beyond it a write-back is dropped (counted)
  // rather than holding the engine.
  size_t staging_bytes = size_t{256} << 20;
  int load_threads = 2;  // a load's blocks are split over these
  // How often the writing thread runs each tier's upkeep (KvTier::Maintain).
  std::chrono::milliseconds maintain_interval{1000};
};

// A finished load.
struct TierLoad {
  uint64_t ticket = 0;
  size_t loaded = 0;         // leading blocks loaded and verified
  std::vector<int> sources;  // [loaded]: index of the tier each came from
  uint64_t bytes = 0;
  double seconds = 0;
};

// Upper bounds (seconds) of the load-latency histogram's buckets; a last bucket takes the rest.
inline constexpr double kLoadSecondsBounds[] = {0.001, 0.005, 0.01, 0.025, 0.05,
                                                0.1,   0.25,  0.5,  1,     2.5};

struct TierSetStats {
  std::vector<TierStats> tiers;  // nearest first
  uint64_t writes_dropped = 0;   // write-backs refused because staging was full
  size_t writes_pending = 0;
  uint64_t loads = 0;  // loads finished
  // Load latency: counts per bucket of kLoadSecondsBounds (not cumulative), plus one beyond.
  std::vector<uint64_t> load_seconds_buckets;
  double load_seconds_sum = 0;
};

class TierSet {
 public:
  TierSet(const TierIdentity& identity, std::vector<std::unique_ptr<KvTier>> tiers,
          const TierSetConfig& config = {});
  // Finishes the writes already queued (so a clean stop keeps them) and any load in flight.
  ~TierSet();
  TierSet(const TierSet&) = delete;
  TierSet& operator=(const TierSet&) = delete;

  const TierIdentity& identity() const { return identity_; }
  size_t size() const { return tiers_.size(); }
  const char* TierName(size_t index) const { return tiers_[index]->name(); }
  // What tier `index` holds as far as this process knows (KvTier::Blocks).
  std::vector<TierBlockRef> Blocks(size_t index) const { return tiers_[index]->Blocks(); }

  // Engine thread. Copies `payload` and queues it for every tier that does not hold the block;
  // with `wait_for_room` false a full staging area drops it (counted) instead of waiting.
  void Offer(const BlockMeta& meta, std::span<const uint8_t> payload, bool wait_for_room);
  // How many leading `keys` some tier probably holds (non-blocking).
  size_t ProbablyHeld(std::span<const Digest> keys) const;
  // Loads blocks[i] into dests[i] (which the caller keeps untouched until the load is taken),
  // each from the nearest tier that has it. `ticket` names the load in TakeFinished.
  void StartLoad(uint64_t ticket, std::vector<BlockMeta> blocks, std::vector<uint8_t*> dests);
  std::vector<TierLoad> TakeFinished();
  size_t LoadsInFlight() const;
  // Blocks until a load has finished (or none is in flight).
  void WaitForLoad();
  // Called on an I/O thread whenever a load finishes (the engine wakes its loop with it).
  void SetWakeup(std::function<void()> wakeup);

  // Waits until every queued write is done.
  void Flush();
  // Drops every block of the tier named `name` ("disk", "remote"), or with `owner` only the blocks
  // whose header names it; false when there is no such tier.
  bool Clear(const std::string& name, const std::optional<Digest>& owner = std::nullopt,
             size_t* dropped = nullptr);
  TierSetStats Stats() const;

 private:
  struct Write {
    BlockMeta meta;
    std::shared_ptr<const std::vector<uint8_t>> payload;  // shared with loads that need it
    std::vector<size_t> targets;                          // tier indexes
  };
  // A block queued or being written: loads (and lookups) find it here until a tier has it.
  struct Pending {
    std::shared_ptr<const std::vector<uint8_t>> payload;
    int tier = 0;  // the nearest tier it goes to
  };
  struct Load;
  struct Part {
    std::shared_ptr<Load> load;
    size_t begin = 0;
    size_t end = 0;
  };

  void WriteLoop();
  void LoadLoop();
  void RunPart(const Part& part);

  TierIdentity identity_;
  std::vector<std::unique_ptr<KvTier>> tiers_;
  TierSetConfig config_;

  mutable std::mutex mutex_;  // guards the members below
  std::condition_variable write_ready_;
  std::condition_variable write_done_;  // room freed or queue drained
  std::condition_variable load_ready_;
  std::condition_variable load_finished_;
  std::deque<Write> writes_;
  std::unordered_map<Digest, Pending, DigestHash> pending_;  // queued or being written
  size_t staged_bytes_ = 0;
  size_t writing_ = 0;  // writes taken off the queue and not finished
  std::deque<Part> parts_;
  size_t loads_in_flight_ = 0;  // started and not yet taken
  size_t loads_running_ = 0;    // started and not yet finished
  std::vector<TierLoad> finished_;
  std::function<void()> wakeup_;
  bool stopping_ = false;
  uint64_t writes_dropped_ = 0;
  uint64_t loads_done_ = 0;
  std::vector<uint64_t> load_buckets_;
  double load_seconds_sum_ = 0;

  std::thread writer_;
  std::vector<std::thread> loaders_;
};

}  // namespace reprise
