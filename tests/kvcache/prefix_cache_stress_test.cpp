// Randomized traffic (deterministic seeds) against a small PrefixCache: interleaved chunked
// prefills that race to commit the same blocks, cancellations, chat continuations, pins, TTLs,
// clears and allocation pressure. After every operation all bookkeeping is checked, and every
// position a request reuses or computes must hold exactly the KV its prefix implies.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kv_test_util.h"
#include "kvcache/prefix_cache.h"

namespace reprise {
namespace {

using testing::ExpectNoLeak;
using testing::PositionValue;
using testing::ReadSlot;
using testing::WriteSlot;

struct Sequence {
  std::vector<int32_t> tokens;
  CacheKeyExtras extras;
  RetentionPolicy policy;
  std::vector<BlockId> table;        // held
  size_t computed = 0;               // positions [0, computed) hold valid KV
  std::optional<Digest> parent_key;  // for the next Commit
  bool commit_tail = true;
};

PrefixCacheConfig WithShare(PrefixCacheConfig config, double protected_share) {
  config.protected_share = protected_share;
  return config;
}

class Traffic {
 public:
  Traffic(uint32_t seed, int64_t num_blocks, int block_size, double protected_share = 0)
      : rng_(seed),
        cache_(WithShare(testing::SmallConfig(num_blocks, block_size), protected_share),
               [this] { return now_; }) {}

  void Run(int steps) {
    for (int step = 0; step < steps; ++step) {
      const int op = Uniform(0, 99);
      if (op < 25) {
        Start();
      } else if (op < 60) {
        Advance();
      } else if (op < 72) {
        Finish(/*cancel=*/Uniform(0, 4) == 0);
      } else if (op < 82) {
        Probe();
      } else if (op < 87) {
        now_ += Uniform(0, 20);
      } else if (op < 89) {
        cache_.ClearUnpinned();
      } else if (op < 91) {
        UnpinAll();
      } else if (op < 94) {
        PinSome();
      } else if (op < 99) {
        Pressure();
      } else {
        DrainAll();
      }
      ASSERT_NO_THROW(cache_.CheckInvariants()) << "after step " << step;
      most_protected_ = std::max(most_protected_, cache_.Stats().blocks_protected);
      if (::testing::Test::HasFailure()) return;
    }
    while (!running_.empty()) Finish(false);
    ExpectNoLeak(cache_);
    UnpinAll();
    cache_.ClearUnpinned();
    EXPECT_EQ(cache_.Stats().blocks_free, cache_.num_blocks());
  }

  const PrefixCache& cache() const { return cache_; }
  int64_t most_protected() const { return most_protected_; }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::vector<int32_t> RandomTokens(int length) {
    std::vector<int32_t> tokens(static_cast<size_t>(length));
    for (int32_t& t : tokens) t = Uniform(0, 3);  // a tiny vocabulary: lots of shared prefixes
    return tokens;
  }

  CacheKeyExtras RandomExtras() {
    static const char* kSalts[] = {"", "", "", "tenant"};
    return {kSalts[Uniform(0, 3)], Uniform(0, 7) == 0 ? "lora" : ""};
  }

  void VerifyPositions(const std::vector<BlockId>& table, const std::vector<int32_t>& tokens,
                       size_t count, const CacheKeyExtras& extras) {
    const size_t bs = static_cast<size_t>(cache_.block_size());
    for (size_t pos = 0; pos < count; ++pos) {
      ASSERT_EQ(ReadSlot(cache_, table[pos / bs], pos % bs), PositionValue(tokens, pos, extras))
          << "position " << pos << " of a " << tokens.size() << "-token sequence";
    }
  }

  void Start() {
    Sequence seq;
    const int kind = Uniform(0, 3);
    if (kind == 0 && !history_.empty()) {  // next chat turn
      const auto& [old_tokens, old_extras] =
          history_[static_cast<size_t>(Uniform(0, static_cast<int>(history_.size()) - 1))];
      seq.tokens = testing::Concat(old_tokens, RandomTokens(Uniform(1, 8)));
      seq.extras = old_extras;
    } else if (kind == 1) {  // a shared system prompt, then the user's part
      static const std::vector<int32_t> kSystem[] = {{1, 2, 3, 0, 1, 2, 3, 0, 2},
                                                     {3, 3, 2, 2, 1, 1}};
      seq.tokens = testing::Concat(kSystem[Uniform(0, 1)], RandomTokens(Uniform(0, 10)));
      seq.extras = RandomExtras();
    } else {
      seq.tokens = RandomTokens(Uniform(1, 24));
      seq.extras = RandomExtras();
    }
    seq.policy.priority = Uniform(0, 100);
    seq.policy.ttl_seconds = Uniform(0, 2) == 0 ? Uniform(1, 60) : 0;
    seq.commit_tail = Uniform(0, 3) != 0;
    PrefixMatch match = cache_.Match(seq.tokens, seq.tokens.size() - 1, seq.extras, seq.policy);
    seq.table = match.blocks;
    seq.computed = match.cached_tokens;
    seq.parent_key = match.last_full_key;
    const size_t bs = static_cast<size_t>(cache_.block_size());
    ASSERT_EQ(seq.table.size(), (seq.computed + bs - 1) / bs);
    VerifyPositions(seq.table, seq.tokens, seq.computed, seq.extras);
    running_.push_back(std::move(seq));
  }

  // Computes the next chunk (up to the end of the current block) of a random sequence.
  void Advance() {
    if (running_.empty()) return;
    const size_t i = static_cast<size_t>(Uniform(0, static_cast<int>(running_.size()) - 1));
    Sequence& seq = running_[i];
    const size_t bs = static_cast<size_t>(cache_.block_size());
    const size_t len = seq.tokens.size();
    if (seq.computed == len) return;
    const size_t b = seq.computed / bs;
    if (b == seq.table.size()) {
      std::optional<BlockId> fresh = cache_.Allocate();
      if (!fresh) {  // out of memory: preempt this sequence
        cache_.Release(seq.table);
        running_.erase(running_.begin() + static_cast<ptrdiff_t>(i));
        return;
      }
      seq.table.push_back(*fresh);
    }
    const size_t begin = b * bs;
    const size_t end = std::min(len, begin + bs);
    const size_t chunk_end = std::min(end, seq.computed + static_cast<size_t>(Uniform(1, 4)));
    for (size_t pos = seq.computed; pos < chunk_end; ++pos) {
      WriteSlot(cache_, seq.table[b], pos - begin, PositionValue(seq.tokens, pos, seq.extras));
    }
    seq.computed = chunk_end;
    const bool block_full = chunk_end == begin + bs;
    const bool tail_done = chunk_end == len && !block_full;
    if (block_full || (tail_done && seq.commit_tail)) {
      std::span<const int32_t> block_tokens(seq.tokens.data() + begin, chunk_end - begin);
      seq.parent_key =
          cache_.Commit(seq.table[b], seq.parent_key, block_tokens, seq.extras, seq.policy);
    }
  }

  void Finish(bool cancel) {
    if (running_.empty()) return;
    const size_t i = static_cast<size_t>(Uniform(0, static_cast<int>(running_.size()) - 1));
    Sequence& seq = running_[i];
    VerifyPositions(seq.table, seq.tokens, seq.computed, seq.extras);
    if (!cancel && seq.computed == seq.tokens.size()) {
      history_.emplace_back(seq.tokens, seq.extras);
      if (history_.size() > 16) history_.erase(history_.begin());
    }
    if (Uniform(0, 1) == 0) cache_.Unpin(seq.table);
    cache_.Release(seq.table);
    running_.erase(running_.begin() + static_cast<ptrdiff_t>(i));
  }

  void Probe() {
    std::vector<int32_t> tokens;
    CacheKeyExtras extras;
    if (!history_.empty() && Uniform(0, 1) == 0) {
      const auto& entry =
          history_[static_cast<size_t>(Uniform(0, static_cast<int>(history_.size()) - 1))];
      tokens = entry.first;
      extras = entry.second;
    } else {
      tokens = RandomTokens(Uniform(1, 24));
      extras = RandomExtras();
    }
    const size_t max_tokens = static_cast<size_t>(Uniform(0, static_cast<int>(tokens.size())));
    PrefixMatch match = cache_.Match(tokens, max_tokens, extras);
    ASSERT_LE(match.cached_tokens, max_tokens);
    VerifyPositions(match.blocks, tokens, match.cached_tokens, extras);
    cache_.Release(match.blocks);
  }

  void PinSome() {
    if (running_.empty() || cache_.Stats().blocks_pinned > cache_.num_blocks() / 4) return;
    const Sequence& seq =
        running_[static_cast<size_t>(Uniform(0, static_cast<int>(running_.size()) - 1))];
    cache_.Pin(seq.table);
  }

  void UnpinAll() {
    for (BlockId id = 0; id < cache_.num_blocks(); ++id) {
      if (cache_.IsPinned(id)) cache_.Unpin(std::vector<BlockId>{id});
    }
  }

  void Pressure() {
    std::vector<BlockId> taken;
    const int want = Uniform(1, 8);
    const size_t promised = cache_.NumAllocatable();
    for (int k = 0; k < want; ++k) {
      std::optional<BlockId> id = cache_.Allocate();
      if (!id) {
        EXPECT_EQ(taken.size(), promised);
        break;
      }
      taken.push_back(*id);
    }
    cache_.Release(taken);
  }

  // NumAllocatable promises exactly how many blocks Allocate can hand out.
  void DrainAll() {
    const size_t promised = cache_.NumAllocatable();
    std::vector<BlockId> taken;
    while (std::optional<BlockId> id = cache_.Allocate()) taken.push_back(*id);
    EXPECT_EQ(taken.size(), promised);
    EXPECT_EQ(cache_.NumAllocatable(), 0u);
    cache_.Release(taken);
  }

  std::mt19937 rng_;
  double now_ = 0;
  PrefixCache cache_;
  std::vector<Sequence> running_;
  int64_t most_protected_ = 0;
  std::vector<std::pair<std::vector<int32_t>, CacheKeyExtras>> history_;
};

TEST(PrefixCacheStressTest, RandomTrafficKeepsInvariantsAndExactKv) {
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Traffic traffic(seed, 32, 4);
    traffic.Run(4000);
    if (HasFailure()) return;
    const CacheStats stats = traffic.cache().Stats();
    EXPECT_GT(stats.hit_tokens, 0);
    EXPECT_GT(stats.miss_tokens, 0);
    EXPECT_GT(stats.evictions, 0);
  }
}

TEST(PrefixCacheStressTest, ScanResistanceKeepsInvariantsAndExactKv) {
  for (uint32_t seed : {5u, 6u, 7u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Traffic traffic(seed, 32, 4, /*protected_share=*/0.75);
    traffic.Run(4000);
    if (HasFailure()) return;
    const CacheStats stats = traffic.cache().Stats();
    EXPECT_GT(stats.hit_tokens, 0);
    EXPECT_GT(stats.evictions, 0);
    // The tier fills towards its share (0.75 * 32 = 24; CheckInvariants keeps it within).
    EXPECT_GT(traffic.most_protected(), 12);
  }
}

TEST(PrefixCacheStressTest, BlockSizeOneAndLargeBlocks) {
  for (int block_size : {1, 16}) {
    SCOPED_TRACE("block_size " + std::to_string(block_size));
    Traffic traffic(99, 48, block_size);
    traffic.Run(2000);
    if (HasFailure()) return;
    EXPECT_GT(traffic.cache().Stats().hit_tokens, 0);
  }
}

}  // namespace
}  // namespace reprise
