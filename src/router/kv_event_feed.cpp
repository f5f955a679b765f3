#include "router/kv_event_feed.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"

namespace reprise::router {
namespace {

constexpr const char* kBlockMilliseconds = "500";  // below the client's socket timeout
constexpr const char* kReadCount = "256";
constexpr auto kRetryPause = std::chrono::milliseconds(500);

std::vector<std::string> Strings(const redis::RedisReply& array) {
  std::vector<std::string> out;
  out.reserve(array.elements.size());
  for (const redis::RedisReply& element : array.elements) out.push_back(element.text);
  return out;
}

}  // namespace

KvEventFeed::KvEventFeed(std::string stream, std::shared_ptr<redis::RedisClient> client,
                         PrefixDirectory& directory, std::function<int(const std::string&)> resolve,
                         std::function<std::optional<Digest>()> root,
                         std::function<std::optional<CacheBlockList>(int)> snapshot)
    : stream_(std::move(stream)),
      client_(std::move(client)),
      directory_(directory),
      resolve_(std::move(resolve)),
      root_(std::move(root)),
      snapshot_(std::move(snapshot)) {}

KvEventFeed::~KvEventFeed() { Stop(); }

void KvEventFeed::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void KvEventFeed::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool KvEventFeed::Live(int replica) const {
  return replica >= 0 && replica < kMaxReplicas && live_[replica].load();
}

KvEventFeedCounters KvEventFeed::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void KvEventFeed::Source::Follow(const std::string& new_instance, uint64_t seq) {
  if (!instance.empty() && instance != new_instance) {
    replaced.push_back(instance);
    // Instance ids are random per start: a few are enough to skip the late batches of the last
    // ones.
    if (replaced.size() > 8) replaced.erase(replaced.begin());
  }
  instance = new_instance;
  next_seq = seq;
}

void KvEventFeed::SetAllLive(bool live) {
  for (std::atomic<bool>& flag : live_) flag = live;
}

void KvEventFeed::Apply(const kvevents::KvEventBatch& batch) {
  std::unique_lock lock(mutex_);
  ++counters_.batches;
  const std::optional<Digest> root = root_();
  if (!root || *root != batch.root) {
    counters_.events_foreign += batch.events.size();
    return;
  }
  const int replica = resolve_(batch.replica);
  if (replica < 0 || replica >= kMaxReplicas) {
    counters_.events_unmatched += batch.events.size();
    return;
  }
  Source* source = &sources_[batch.replica];
  auto replaced = [&] {
    return std::find(source->replaced.begin(), source->replaced.end(), batch.instance) !=
           source->replaced.end();
  };
  if (replaced()) {  // a late batch of an instance a snapshot already replaced
    counters_.events_stale += batch.events.size();
    return;
  }
  const bool seen = !source->instance.empty();
  bool resync = false;
  if (!seen || source->instance != batch.instance) {
    // First sight (the router started after it), or it restarted: its memory started empty (its
    // all-cleared event may be trimmed) and its disk holds what it held.
    if (seen) ++counters_.restarts;
    resync = true;
  } else if (batch.first_seq > source->next_seq) {
    // Lost events (dropped by the replica, or trimmed before we read them): what we believe it
    // holds may be wrong either way.
    ++counters_.gaps;
    spdlog::debug("KV events of {}: expected event {}, got {}", batch.replica, source->next_seq,
                  batch.first_seq);
    resync = true;
  }
  if (resync) {
    lock.unlock();
    const bool synced = Resync(replica);
    lock.lock();
    source = &sources_[batch.replica];
    if (!synced) {
      // No snapshot: start again from what comes now (keeping, at first sight, the router's own
      // record of what it sent there).
      if (seen) directory_.ClearReplica(replica);
      source->Follow(batch.instance, batch.first_seq);
    } else if (replaced() || source->instance != batch.instance ||
               batch.first_seq > source->next_seq) {
      // The snapshot is of a later instance, or was taken before this batch's events (which
      // cannot be: they were written before it was asked for): nothing of this batch applies.
      counters_.events_stale += batch.events.size();
      return;
    }
  }
  ApplyEvents(batch, replica, *source);
}

void KvEventFeed::ApplyEvents(const kvevents::KvEventBatch& batch, int replica, Source& source) {
  for (size_t i = 0; i < batch.events.size(); ++i) {
    if (batch.first_seq + i < source.next_seq) {  // already in the snapshot
      ++counters_.events_stale;
      continue;
    }
    const kvevents::KvEvent& event = batch.events[i];
    switch (event.type) {
      case kvevents::KvEventType::kCleared:
        directory_.ClearReplica(replica);
        break;
      case kvevents::KvEventType::kStored:
        directory_.Record({event.key}, replica, event.tier);
        break;
      case kvevents::KvEventType::kRemoved:
        directory_.Remove(event.key, replica, event.tier);
        break;
    }
    ++counters_.events_applied;
  }
  source.next_seq = std::max(source.next_seq, batch.first_seq + batch.events.size());
  live_[replica] = true;
}

void KvEventFeed::RequestSnapshot(int replica) {
  std::lock_guard lock(mutex_);
  if (std::find(snapshots_wanted_.begin(), snapshots_wanted_.end(), replica) ==
      snapshots_wanted_.end()) {
    snapshots_wanted_.push_back(replica);
  }
}

bool KvEventFeed::Resync(int replica) {
  if (!snapshot_) return false;
  std::optional<CacheBlockList> list = snapshot_(replica);  // HTTP: no lock held
  const std::optional<Digest> root = root_();
  std::lock_guard lock(mutex_);
  if (!list || !list->kv_events || !root || list->root != *root ||
      resolve_(list->replica_id) != replica) {
    ++counters_.snapshot_failures;
    return false;
  }
  std::vector<Digest> held[kTierCount];
  auto keys = [](const std::vector<CacheBlockRef>& blocks, std::vector<Digest>& out) {
    out.reserve(blocks.size());
    for (const CacheBlockRef& block : blocks) out.push_back(block.key);
  };
  keys(list->memory, held[static_cast<size_t>(KvEventTier::kMemory)]);
  keys(list->disk, held[static_cast<size_t>(KvEventTier::kDisk)]);
  keys(list->remote, held[static_cast<size_t>(KvEventTier::kRemote)]);
  directory_.ReplaceReplica(replica, held);
  sources_[list->replica_id].Follow(list->instance, list->next_seq);
  ++counters_.snapshots;
  live_[replica] = true;
  spdlog::debug(
      "KV events: snapshot of {} applied ({} memory, {} disk, {} remote blocks; events "
      "from {} on)",
      list->replica_id, list->memory.size(), list->disk.size(), list->remote.size(),
      list->next_seq);
  return true;
}

void KvEventFeed::Loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (last_id_ == "$") {
      // Start after the stream's last entry, by its id: a read from `$` that returned nothing
      // would miss whatever came before the next one.
      lock.unlock();
      std::string id;
      try {
        redis::RedisReply last = client_->Run({"XREVRANGE", stream_, "+", "-", "COUNT", "1"});
        if (last.type == redis::RedisReply::Type::kArray) {
          id = last.elements.empty() || last.elements[0].elements.empty()
                   ? "0-0"
                   : last.elements[0].elements[0].text;
        }
      } catch (const Error&) {
        // Counted and logged by the read below, which fails the same way.
      }
      lock.lock();
      if (!id.empty()) last_id_ = id;
    }
    // Snapshots after the stream's position is fixed: the events after them are all read.
    while (!snapshots_wanted_.empty() && last_id_ != "$" && !stopping_) {
      const int replica = snapshots_wanted_.front();
      snapshots_wanted_.erase(snapshots_wanted_.begin());
      lock.unlock();
      Resync(replica);
      lock.lock();
    }
    const redis::RedisCommand command = {
        "XREAD", "COUNT", kReadCount, "BLOCK", kBlockMilliseconds, "STREAMS", stream_, last_id_};
    lock.unlock();
    std::optional<redis::RedisReply> reply;
    std::string error;
    try {
      reply = client_->Run(command);
      if (reply->IsError()) error = reply->text;
    } catch (const Error& failure) {
      error = failure.what();
    }
    if (!error.empty()) {
      SetAllLive(false);  // the router records placements itself until the stream is back
      lock.lock();
      ++counters_.read_failures;
      counters_.connected = false;
      if (!down_) {
        down_ = true;
        spdlog::warn("KV events: cannot read stream '{}' ({}); routing on the router's own record",
                     stream_, error);
      }
      wake_.wait_for(lock, kRetryPause, [this] { return stopping_; });
      continue;
    }
    // Nil: nothing new within the block time. Else [[stream, [[id, [field, value, ...]], ...]]].
    std::string last_id;
    if (reply->type == redis::RedisReply::Type::kArray) {
      for (const redis::RedisReply& stream : reply->elements) {
        if (stream.elements.size() < 2) continue;
        for (const redis::RedisReply& entry : stream.elements[1].elements) {
          if (entry.elements.size() < 2) continue;
          last_id = entry.elements[0].text;
          if (auto batch = kvevents::DecodeBatch(Strings(entry.elements[1]))) Apply(*batch);
        }
      }
    }
    lock.lock();
    counters_.connected = true;
    if (down_) {
      down_ = false;
      spdlog::info("KV events: reading stream '{}' again", stream_);
    }
    if (!last_id.empty()) last_id_ = last_id;
  }
}

}  // namespace reprise::router
