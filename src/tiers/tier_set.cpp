#include "tiers/tier_set.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <utility>

#include "core/clock.h"
#include "core/error.h"

namespace reprise {

// One load in flight: its blocks are split into parts that the load threads run at once; the
// load finishes when its last part does.
struct TierSet::Load {
  uint64_t ticket = 0;
  std::vector<BlockMeta> blocks;
  std::vector<uint8_t*> dests;
  std::vector<int> sources;  // [blocks]: the tier each block came from, -1: not loaded
  std::atomic<size_t> parts_left{0};
  Clock::time_point started;
};

TierSet::TierSet(const TierIdentity& identity, std::vector<std::unique_ptr<KvTier>> tiers,
                 const TierSetConfig& config)
    : identity_(identity),
      tiers_(std::move(tiers)),
      config_(config),
      load_buckets_(std::size(kLoadSecondsBounds) + 1, 0) {
  REPRISE_CHECK(config_.load_threads >= 1, "a tier set needs a load thread");
  writer_ = std::thread([this] { WriteLoop(); });
  for (int i = 0; i < config_.load_threads; ++i) loaders_.emplace_back([this] { LoadLoop(); });
}

TierSet::~TierSet() {
  {
    std::unique_lock lock(mutex_);
    // Loads in flight write into the engine's blocks: they finish before anything goes away.
    load_finished_.wait(lock, [&] { return loads_running_ == 0; });
    stopping_ = true;
  }
  write_ready_.notify_all();
  load_ready_.notify_all();
  writer_.join();
  for (auto& loader : loaders_) loader.join();
}

void TierSet::Offer(const BlockMeta& meta, std::span<const uint8_t> payload, bool wait_for_room) {
  std::vector<size_t> targets;
  for (size_t i = 0; i < tiers_.size(); ++i) {
    if (tiers_[i]->ShouldStore(meta.key)) targets.push_back(i);
  }
  if (targets.empty()) return;
  std::unique_lock lock(mutex_);
  if (pending_.count(meta.key) != 0) return;
  auto has_room = [&] {
    return staged_bytes_ == 0 || staged_bytes_ + payload.size() <= config_.staging_bytes;
  };
  if (!has_room()) {
    if (!wait_for_room) {
      ++writes_dropped_;
      return;
    }
    write_done_.wait(lock, has_room);
  }
  auto copy = std::make_shared<const std::vector<uint8_t>>(payload.begin(), payload.end());
  pending_[meta.key] = Pending{copy, static_cast<int>(targets.front())};
  staged_bytes_ += payload.size();
  writes_.push_back(Write{meta, std::move(copy), std::move(targets)});
  lock.unlock();
  write_ready_.notify_one();
}

size_t TierSet::ProbablyHeld(std::span<const Digest> keys) const {
  // Block by block: each may be in any tier, or still on its way there.
  size_t held = 0;
  while (held < keys.size()) {
    bool found = false;
    {
      std::lock_guard lock(mutex_);
      found = pending_.count(keys[held]) != 0;
    }
    for (size_t t = 0; t < tiers_.size() && !found; ++t) {
      found = tiers_[t]->ProbablyHeld(keys.subspan(held, 1)) == 1;
    }
    if (!found) break;
    ++held;
  }
  return held;
}

void TierSet::StartLoad(uint64_t ticket, std::vector<BlockMeta> blocks,
                        std::vector<uint8_t*> dests) {
  REPRISE_CHECK(blocks.size() == dests.size(), "a load needs one destination per block");
  auto load = std::make_shared<Load>();
  load->ticket = ticket;
  load->sources.assign(blocks.size(), -1);
  load->blocks = std::move(blocks);
  load->dests = std::move(dests);
  load->started = Clock::now();
  // Parts of at least 8 blocks, one per load thread at most.
  const size_t count = load->blocks.size();
  const size_t threads = static_cast<size_t>(config_.load_threads);
  const size_t part_size =
      std::max<size_t>(8, (count + threads - 1) / std::max<size_t>(threads, 1));
  std::vector<Part> parts;
  for (size_t begin = 0; begin < count; begin += part_size) {
    parts.push_back(Part{load, begin, std::min(count, begin + part_size)});
  }
  if (parts.empty()) parts.push_back(Part{load, 0, 0});
  load->parts_left.store(parts.size());
  {
    std::lock_guard lock(mutex_);
    ++loads_in_flight_;
    ++loads_running_;
    for (auto& part : parts) parts_.push_back(std::move(part));
  }
  load_ready_.notify_all();
}

void TierSet::RunPart(const Part& part) {
  Load& load = *part.load;
  // Nearest tier first; where it stops, the next tier continues.
  size_t position = part.begin;
  while (position < part.end) {
    // A block evicted a moment ago may still wait to be written: its copy is the block.
    Pending pending;
    {
      std::lock_guard lock(mutex_);
      auto found = pending_.find(load.blocks[position].key);
      if (found != pending_.end()) pending = found->second;
    }
    if (pending.payload && pending.payload->size() == identity_.block_bytes) {
      std::copy(pending.payload->begin(), pending.payload->end(), load.dests[position]);
      load.sources[position] = pending.tier;
      ++position;
      continue;
    }
    size_t loaded = 0;
    for (size_t t = 0; t < tiers_.size() && loaded == 0; ++t) {
      loaded = tiers_[t]->LoadPrefix(
          std::span<const BlockMeta>(load.blocks).subspan(position, part.end - position),
          std::span<uint8_t* const>(load.dests).subspan(position, part.end - position));
      for (size_t i = 0; i < loaded; ++i) load.sources[position + i] = static_cast<int>(t);
    }
    if (loaded == 0) break;
    position += loaded;
  }
}

void TierSet::LoadLoop() {
  while (true) {
    Part part;
    {
      std::unique_lock lock(mutex_);
      load_ready_.wait(lock, [&] { return stopping_ || !parts_.empty(); });
      if (parts_.empty()) return;  // stopping
      part = std::move(parts_.front());
      parts_.pop_front();
    }
    RunPart(part);
    if (part.load->parts_left.fetch_sub(1) != 1) continue;
    // The last part: the load is done.
    const Load& load = *part.load;
    TierLoad result;
    result.ticket = load.ticket;
    while (result.loaded < load.sources.size() && load.sources[result.loaded] >= 0) {
      result.sources.push_back(load.sources[result.loaded]);
      ++result.loaded;
    }
    result.bytes = result.loaded * identity_.block_bytes;
    result.seconds = SecondsSince(load.started);
    std::function<void()> wakeup;
    {
      std::lock_guard lock(mutex_);
      size_t bucket = 0;
      while (bucket < std::size(kLoadSecondsBounds) &&
             result.seconds > kLoadSecondsBounds[bucket]) {
        ++bucket;
      }
      ++load_buckets_[bucket];
      load_seconds_sum_ += result.seconds;
      ++loads_done_;
      --loads_running_;
      finished_.push_back(std::move(result));
      wakeup = wakeup_;
    }
    load_finished_.notify_all();
    if (wakeup) wakeup();
  }
}

std::vector<TierLoad> TierSet::TakeFinished() {
  std::vector<TierLoad> finished;
  {
    std::lock_guard lock(mutex_);
    finished.swap(finished_);
    loads_in_flight_ -= finished.size();
  }
  if (!finished.empty()) load_finished_.notify_all();
  return finished;
}

size_t TierSet::LoadsInFlight() const {
  std::lock_guard lock(mutex_);
  return loads_in_flight_;
}

void TierSet::WaitForLoad() {
  std::unique_lock lock(mutex_);
  load_finished_.wait(lock, [&] { return !finished_.empty() || loads_in_flight_ == 0; });
}

void TierSet::SetWakeup(std::function<void()> wakeup) {
  std::lock_guard lock(mutex_);
  wakeup_ = std::move(wakeup);
}

void TierSet::WriteLoop() {
  Clock::time_point maintained = Clock::now();
  while (true) {
    Write write;
    {
      std::unique_lock lock(mutex_);
      write_ready_.wait_until(lock, maintained + config_.maintain_interval,
                              [&] { return stopping_ || !writes_.empty(); });
      if (writes_.empty() && stopping_) return;  // every queued write is done
      if (Clock::now() - maintained >= config_.maintain_interval) {
        lock.unlock();
        for (auto& tier : tiers_) tier->Maintain();
        maintained = Clock::now();
        continue;
      }
      if (writes_.empty()) continue;
      write = std::move(writes_.front());
      writes_.pop_front();
      ++writing_;
    }
    for (size_t target : write.targets) tiers_[target]->Store(write.meta, *write.payload);
    {
      std::lock_guard lock(mutex_);
      --writing_;
      staged_bytes_ -= write.payload->size();
      pending_.erase(write.meta.key);
    }
    write_done_.notify_all();
  }
}

void TierSet::Flush() {
  std::unique_lock lock(mutex_);
  write_done_.wait(lock, [&] { return writes_.empty() && writing_ == 0; });
}

bool TierSet::Clear(const std::string& name, const std::optional<Digest>& owner, size_t* dropped) {
  for (auto& tier : tiers_) {
    if (name != tier->name()) continue;
    Flush();  // a write queued before the clear must not land after it
    const size_t count = owner ? tier->ClearOwned(*owner) : tier->Clear();
    if (dropped) *dropped = count;
    return true;
  }
  return false;
}

TierSetStats TierSet::Stats() const {
  TierSetStats stats;
  for (const auto& tier : tiers_) stats.tiers.push_back(tier->Stats());
  std::lock_guard lock(mutex_);
  stats.writes_dropped = writes_dropped_;
  stats.writes_pending = writes_.size() + writing_;
  stats.loads = loads_done_;
  stats.load_seconds_buckets = load_buckets_;
  stats.load_seconds_sum = load_seconds_sum_;
  return stats;
}

}  // namespace reprise
