#include "tiers/redis_tier.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace reprise {

using redis::RedisCommand;
using redis::RedisReply;

RedisTier::RedisTier(const TierIdentity& identity, const RedisTierConfig& config,
                     std::shared_ptr<redis::RedisClient> client)
    : identity_(identity),
      config_(config),
      client_(std::move(client)),
      prefix_(config.name_space + ":" + ToHex(identity.root_fingerprint) + ":") {
  stats_.name = "remote";
  stats_.capacity_bytes = config_.capacity_bytes;
}

std::string RedisTier::RedisKey(const Digest& key) const { return prefix_ + ToHex(key); }

bool RedisTier::Run(const std::vector<RedisCommand>& commands, std::vector<RedisReply>& out) {
  try {
    out = client_->Run(commands);
  } catch (const Error& error) {
    std::lock_guard lock(mutex_);
    ++stats_.errors;
    stats_.available = false;
    stats_.last_error = error.what();
    last_failure_ = std::chrono::steady_clock::now();
    if (!down_) {
      down_ = true;
      spdlog::warn("remote KV tier: {}; going on without it and reconnecting", error.what());
    }
    return false;
  }
  std::lock_guard lock(mutex_);
  if (down_) {
    down_ = false;
    spdlog::info("remote KV tier: Redis at {} answers again", client_->endpoint().Describe());
  }
  stats_.available = true;
  return true;
}

size_t RedisTier::ProbablyHeld(std::span<const Digest> keys) const {
  std::lock_guard lock(mutex_);
  auto now = std::chrono::steady_clock::now();
  // Just failed: do not make requests wait on a load. Later ones try again (and so reconnect).
  if (down_ && now - last_failure_ < std::chrono::seconds(1)) return 0;
  // Optimistic: another replica may have stored any block. A key seen missing recently ends the
  // chain, so a prompt nobody computed costs one lookup, not one per step.
  for (size_t i = 0; i < keys.size(); ++i) {
    if (written_.count(keys[i]) != 0) continue;
    auto it = missing_.find(keys[i]);
    if (it != missing_.end()) {
      if (now - it->second < config_.miss_memory) return i;
      missing_.erase(it);
    }
  }
  return keys.size();
}

bool RedisTier::ShouldStore(const Digest& key) const {
  // Offered even while the store is down: the writes run on I/O threads, fail fast during the
  // client's backoff, and are what finds the store back.
  std::lock_guard lock(mutex_);
  return written_.count(key) == 0;
}

void RedisTier::NoteWritten(const TierBlockRef& ref, uint64_t bytes) {
  const Digest& key = ref.key;
  missing_.erase(key);
  auto [it, inserted] = written_.try_emplace(key);
  if (!inserted) {
    stats_.bytes -= it->second.bytes;
    written_order_.erase(it->second.age);
  } else {
    ++stats_.blocks;
  }
  written_order_.push_back(key);
  it->second = {bytes, ref, std::chrono::steady_clock::now() + config_.ttl, !inserted,
                std::prev(written_order_.end())};
  stats_.bytes += bytes;
}

void RedisTier::ForgetWrittenLocked(const Digest& key) {
  auto it = written_.find(key);
  if (it == written_.end()) return;
  if (it->second.confirmed && config_.listener)
    config_.listener->OnTierBlockRemoved(name(), it->second.ref);
  stats_.bytes -= it->second.bytes;
  --stats_.blocks;
  written_order_.erase(it->second.age);
  written_.erase(it);
}

std::vector<RedisCommand> RedisTier::TrimLocked() {
  std::vector<RedisCommand> deletes;
  while (config_.capacity_bytes > 0 && stats_.bytes > config_.capacity_bytes &&
         !written_order_.empty()) {
    const Digest oldest = written_order_.front();
    // Told as gone even if the DEL fails: a reader then errs towards "not held", a miss.
    ForgetWrittenLocked(oldest);
    ++stats_.evictions;
    deletes.push_back({"DEL", RedisKey(oldest)});
  }
  return deletes;
}

bool RedisTier::Store(const BlockMeta& meta, std::span<const uint8_t> payload) {
  std::vector<uint8_t> encoded = EncodeBlock(identity_, meta, payload);
  std::vector<RedisCommand> commands = {{"SET", RedisKey(meta.key),
                                         std::string(encoded.begin(), encoded.end()), "EX",
                                         std::to_string(config_.ttl.count())}};
  {
    std::lock_guard lock(mutex_);
    NoteWritten(RefOf(meta), encoded.size());
    std::vector<RedisCommand> deletes = TrimLocked();
    commands.insert(commands.end(), deletes.begin(), deletes.end());
  }
  std::vector<RedisReply> replies;
  bool ok = Run(commands, replies) && !replies.front().IsError();
  std::lock_guard lock(mutex_);
  if (!ok) {
    ForgetWrittenLocked(meta.key);
    if (!replies.empty()) {
      ++stats_.errors;
      stats_.last_error = replies.front().text;
    }
    return false;
  }
  // Trimmed away by its own write (a block beyond the whole bound): nothing to tell.
  auto written = written_.find(meta.key);
  if (written == written_.end()) return false;
  written->second.confirmed = true;
  // Counted from the store's answer, so that the TTL has passed there when it has here.
  written->second.expires = std::chrono::steady_clock::now() + config_.ttl;
  if (config_.listener) config_.listener->OnTierBlockStored(name(), RefOf(meta));
  ++stats_.blocks_written;
  stats_.bytes_written += encoded.size();
  return true;
}

size_t RedisTier::LoadPrefix(std::span<const BlockMeta> blocks, std::span<uint8_t* const> dests) {
  std::vector<RedisCommand> gets;
  gets.reserve(blocks.size());
  for (const BlockMeta& meta : blocks) gets.push_back({"GET", RedisKey(meta.key)});
  std::vector<RedisReply> replies;
  if (gets.empty() || !Run(gets, replies)) return 0;  // one round trip per node for the chain
  size_t loaded = 0;
  std::vector<RedisCommand> discard;
  for (; loaded < blocks.size(); ++loaded) {
    const RedisReply& reply = replies[loaded];
    if (reply.type != RedisReply::Type::kString) {
      std::lock_guard lock(mutex_);
      missing_[blocks[loaded].key] = std::chrono::steady_clock::now();
      // One this process wrote is gone before its TTL: Redis evicted it (maxmemory), another
      // replica deleted it, or the store restarted empty.
      // (One still being written is left alone: its write may not have landed yet.)
      auto it = written_.find(blocks[loaded].key);
      if (it != written_.end() && it->second.confirmed) ForgetWrittenLocked(blocks[loaded].key);
      break;
    }
    auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(reply.text.data()),
                                          reply.text.size());
    BlockCheck check = DecodeBlock(identity_, bytes, blocks[loaded],
                                   std::span<uint8_t>(dests[loaded], identity_.block_bytes));
    if (check != BlockCheck::kOk) {
      std::lock_guard lock(mutex_);
      ++(IsForeign(check) ? stats_.foreign_blocks : stats_.corrupt_blocks);
      spdlog::warn("remote KV tier: refused block {} ({}); deleted, to be recomputed",
                   ToHex(blocks[loaded].key).substr(0, 16), BlockCheckName(check));
      discard.push_back({"DEL", RedisKey(blocks[loaded].key)});
      ForgetWrittenLocked(blocks[loaded].key);
      break;
    }
    std::lock_guard lock(mutex_);
    ++stats_.blocks_read;
    stats_.bytes_read += bytes.size();
  }
  if (!discard.empty()) {
    std::vector<RedisReply> ignored;
    Run(discard, ignored);
  }
  return loaded;
}

bool RedisTier::Remove(const Digest& key) {
  std::vector<RedisReply> replies;
  if (!Run({{"DEL", RedisKey(key)}}, replies)) return false;
  std::lock_guard lock(mutex_);
  ForgetWrittenLocked(key);
  return replies.front().integer > 0;
}

size_t RedisTier::DeleteWritten(const std::vector<Digest>& keys) {
  std::vector<RedisCommand> deletes;
  deletes.reserve(keys.size());
  for (const Digest& key : keys) deletes.push_back({"DEL", RedisKey(key)});
  std::vector<RedisReply> replies;
  if (deletes.empty() || !Run(deletes, replies)) return 0;
  size_t dropped = 0;
  for (const RedisReply& reply : replies) dropped += reply.integer > 0 ? 1 : 0;
  std::lock_guard lock(mutex_);
  for (const Digest& key : keys) ForgetWrittenLocked(key);
  return dropped;
}

// Both clears cover what this process wrote (the owner index is of its own writes): other
// replicas' blocks are theirs to clear, and expire by TTL.
size_t RedisTier::Clear() {
  std::vector<Digest> keys;
  {
    std::lock_guard lock(mutex_);
    keys.assign(written_order_.begin(), written_order_.end());
  }
  return DeleteWritten(keys);
}

size_t RedisTier::ClearOwned(const Digest& owner) {
  std::vector<Digest> keys;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, written] : written_) {
      if (written.ref.owner == owner) keys.push_back(key);
    }
  }
  return DeleteWritten(keys);
}

std::vector<TierBlockRef> RedisTier::Blocks() const {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  std::vector<TierBlockRef> blocks;
  blocks.reserve(written_.size());
  for (const auto& [key, written] : written_) {
    if (written.confirmed && written.expires > now) blocks.push_back(written.ref);
  }
  return blocks;
}

void RedisTier::Maintain() {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  // One TTL for all: the oldest write expires first.
  while (!written_order_.empty() && written_.at(written_order_.front()).expires <= now) {
    ForgetWrittenLocked(written_order_.front());
  }
}

TierStats RedisTier::Stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace reprise
