#include "kvevents/kv_event_publisher.h"

#include <fmt/format.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include "core/error.h"

namespace reprise::kvevents {
namespace {

std::string RandomInstance() {
  unsigned char bytes[8];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) throw Error("no random bytes for the KV events");
  return fmt::format("{:02x}", fmt::join(bytes, bytes + sizeof(bytes), ""));
}

KvEvent Describe(KvEventType type, const CachedBlockInfo& block) {
  KvEvent event;
  event.type = type;
  event.tier = KvEventTier::kMemory;
  event.key = *block.key;
  event.parent = *block.parent_key;
  event.salt_digest = *block.extras_digest;
  if (block.owner != nullptr) event.tenant_digest = *block.owner;
  return event;
}

}  // namespace

KvEventPublisher::KvEventPublisher(const Digest& root_fingerprint, KvEventPublisherConfig config,
                                   std::shared_ptr<redis::RedisClient> client)
    : root_(root_fingerprint),
      config_(std::move(config)),
      client_(std::move(client)),
      instance_(RandomInstance()) {
  if (config_.replica_id.empty()) throw Error("KV events need a replica id");
  if (config_.stream.empty()) throw Error("KV events need a stream name");
  if (config_.max_batch_events == 0 || config_.max_queued_events == 0) {
    throw Error("KV events need room for at least one event");
  }
  KvEvent cleared;
  cleared.type = KvEventType::kCleared;
  Publish(cleared);
  thread_ = std::thread([this] { Loop(); });
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KvEventPublisher::OnBlockStored(const CachedBlockInfo& block) {
  // Only full blocks: a tail's tokens change as a conversation goes on, and routing matches
  // full blocks alone.
  if (block.full) Publish(Describe(KvEventType::kStored, block));
}

void KvEventPublisher::OnBlockRemoved(const CachedBlockInfo& block, BlockRemoval) {
  if (block.full) Publish(Describe(KvEventType::kRemoved, block));
}

void KvEventPublisher::Publish(const KvEvent& event) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    const uint64_t seq = next_seq_++;
    if (queue_.size() >= config_.max_queued_events) {
      ++stats_.dropped;  // the gap in sequence numbers tells readers
      return;
    }
    queue_.emplace_back(seq, event);
    wake = queue_.size() == config_.max_batch_events;
  }
  if (wake) wake_.notify_one();
}

bool KvEventPublisher::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  wake_.notify_one();
  return idle_.wait_for(lock, timeout, [this] { return queue_.empty() && !writing_; });
}

uint64_t KvEventPublisher::next_seq() const {
  std::lock_guard lock(mutex_);
  return next_seq_;
}

KvEventPublisherStats KvEventPublisher::stats() const {
  std::lock_guard lock(mutex_);
  KvEventPublisherStats stats = stats_;
  stats.queued = queue_.size();
  return stats;
}

void KvEventPublisher::Loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait_for(lock, config_.flush_interval,
                   [this] { return stopping_ || queue_.size() >= config_.max_batch_events; });
    if (queue_.empty()) {
      idle_.notify_all();
      if (stopping_) return;
      continue;
    }
    if (!Write(lock)) {
      if (stopping_) {
        // One try on the way out: what is left is lost, not waited for.
        stats_.dropped += queue_.size();
        queue_.clear();
        idle_.notify_all();
        return;
      }
      // Redis is down or slow: pause (the queue fills and then drops) rather than spin.
      wake_.wait_for(lock, config_.retry_pause, [this] { return stopping_; });
    }
  }
}

bool KvEventPublisher::Write(std::unique_lock<std::mutex>& lock) {
  KvEventBatch batch;
  batch.replica = config_.replica_id;
  batch.instance = instance_;
  batch.root = root_;
  batch.first_seq = queue_.front().first;
  // Consecutive events only: a drop between two starts a new entry, so the gap shows.
  while (!queue_.empty() && batch.events.size() < config_.max_batch_events &&
         queue_.front().first == batch.first_seq + batch.events.size()) {
    batch.events.push_back(queue_.front().second);
    queue_.pop_front();
  }
  writing_ = true;
  lock.unlock();
  redis::RedisCommand command = {
      "XADD", config_.stream, "MAXLEN", "~", std::to_string(config_.max_stream_entries), "*"};
  for (std::string& field : EncodeBatch(batch)) command.push_back(std::move(field));
  std::string error;
  try {
    redis::RedisReply reply = client_->Run(command);
    if (reply.IsError()) error = reply.text;
  } catch (const Error& failure) {
    error = failure.what();
  }
  lock.lock();
  writing_ = false;
  if (error.empty()) {
    stats_.published += batch.events.size();
    ++stats_.batches;
    stats_.connected = true;
    if (down_) {
      down_ = false;
      spdlog::info("KV events: writing to stream '{}' again", config_.stream);
    }
    return true;
  }
  stats_.dropped += batch.events.size();
  ++stats_.failures;
  stats_.connected = false;
  if (!down_) {
    down_ = true;  // logged once until it is back
    spdlog::warn("KV events: cannot write to stream '{}' ({}); dropping events until Redis is back",
                 config_.stream, error);
  }
  return false;
}

}  // namespace reprise::kvevents
