#include "router/kv_event_feed.h"

#include <spdlog/spdlog.h>

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
                         std::function<std::optional<Digest>()> root)
    : stream_(std::move(stream)),
      client_(std::move(client)),
      directory_(directory),
      resolve_(std::move(resolve)),
      root_(std::move(root)) {}

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

void KvEventFeed::SetAllLive(bool live) {
  for (std::atomic<bool>& flag : live_) flag = live;
}

void KvEventFeed::Apply(const kvevents::KvEventBatch& batch) {
  std::lock_guard lock(mutex_);
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
  auto [source, first] = sources_.try_emplace(batch.replica);
  if (!first) {
    if (source->second.instance != batch.instance) {
      ++counters_.restarts;  // its memory started empty (its all-cleared event may be trimmed)
      directory_.ClearReplica(replica);
    } else if (source->second.next_seq != batch.first_seq) {
      // Lost events (dropped by the replica, or trimmed before we read them): what we believe
      // it holds may be wrong either way; start again from what comes now.
      ++counters_.gaps;
      spdlog::debug("KV events of {}: expected event {}, got {}", batch.replica,
                    source->second.next_seq, batch.first_seq);
      directory_.ClearReplica(replica);
    }
  }
  source->second.instance = batch.instance;
  source->second.next_seq = batch.first_seq + batch.events.size();
  for (const kvevents::KvEvent& event : batch.events) {
    switch (event.type) {
      case kvevents::KvEventType::kCleared:
        directory_.ClearReplica(replica);
        break;
      case kvevents::KvEventType::kStored:
        // Only memory counts as the replica's cache for routing; other tiers are shared or slow.
        if (event.tier == kvevents::KvEventTier::kMemory) directory_.Record({event.key}, replica);
        break;
      case kvevents::KvEventType::kRemoved:
        if (event.tier == kvevents::KvEventTier::kMemory) directory_.Remove(event.key, replica);
        break;
    }
  }
  counters_.events_applied += batch.events.size();
  live_[replica] = true;
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
