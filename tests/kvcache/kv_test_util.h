// Helpers for the KV-cache tests: small configs, a leak check, and a simulated request that
// "computes" KV as a checksum of the prefix so reused bytes can be verified position by position.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "kvcache/prefix_cache.h"

namespace reprise::testing {

inline Digest Fingerprint(uint8_t seed) {
  Digest digest{};
  digest.fill(seed);
  return digest;
}

// block_size 4 and 8 bytes per position (one uint64 "KV" value each).
inline PrefixCacheConfig SmallConfig(int64_t num_blocks, int block_size = 4) {
  PrefixCacheConfig config;
  config.num_blocks = num_blocks;
  config.block_size = block_size;
  config.block_bytes = static_cast<size_t>(block_size) * sizeof(uint64_t);
  config.root_fingerprint = Fingerprint(7);
  return config;
}

inline std::vector<int32_t> Range(int32_t begin, int32_t end) {
  std::vector<int32_t> tokens(static_cast<size_t>(end - begin));
  std::iota(tokens.begin(), tokens.end(), begin);
  return tokens;
}

inline std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// No block is referenced any more, every block is free or cached, and the bookkeeping holds.
inline void ExpectNoLeak(const PrefixCache& cache) {
  EXPECT_NO_THROW(cache.CheckInvariants());
  CacheStats stats = cache.Stats();
  EXPECT_EQ(stats.blocks_in_use, 0);
  EXPECT_EQ(stats.blocks_cached + stats.blocks_free, cache.num_blocks());
  for (BlockId id = 0; id < cache.num_blocks(); ++id) EXPECT_EQ(cache.RefCount(id), 0) << id;
}

// The "KV" of position `pos`: a checksum of the extras and tokens[0, pos], as a real model's KV
// depends on exactly those.
inline uint64_t PositionValue(std::span<const int32_t> tokens, size_t pos,
                              const CacheKeyExtras& extras = {}) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](uint64_t value) {
    hash ^= value;
    hash *= 1099511628211ull;
  };
  for (char c : extras.cache_salt) mix(static_cast<uint8_t>(c));
  mix(0x100);
  for (char c : extras.extra) mix(static_cast<uint8_t>(c));
  mix(0x200);
  for (size_t i = 0; i <= pos; ++i) mix(static_cast<uint32_t>(tokens[i]) + 0x1000ull);
  return hash;
}

inline uint64_t ReadSlot(const PrefixCache& cache, BlockId block, size_t slot) {
  uint64_t value;
  std::memcpy(&value, cache.BlockData(block) + slot * sizeof(uint64_t), sizeof(value));
  return value;
}

inline void WriteSlot(PrefixCache& cache, BlockId block, size_t slot, uint64_t value) {
  std::memcpy(cache.BlockData(block) + slot * sizeof(uint64_t), &value, sizeof(value));
}

struct Request {
  std::vector<BlockId> table;  // held; the caller releases it
  size_t cached_tokens = 0;
};

// Runs a prompt the way the engine will: Match (leaving one token to compute), check that every
// reused position holds the right KV, allocate and "compute" the rest, commit each block as soon
// as it is full and (if commit_tail) the partly filled last block at the end. Returns nullopt,
// holding nothing, when the pool runs out. Reports mismatching KV as test failures.
inline std::optional<Request> RunPrompt(PrefixCache& cache, std::span<const int32_t> tokens,
                                        const CacheKeyExtras& extras = {},
                                        const RetentionPolicy& policy = {},
                                        bool commit_tail = true) {
  const size_t bs = static_cast<size_t>(cache.block_size());
  const size_t len = tokens.size();
  PrefixMatch match = cache.Match(tokens, len == 0 ? 0 : len - 1, extras, policy);
  Request request;
  request.table = match.blocks;
  request.cached_tokens = match.cached_tokens;
  for (size_t pos = 0; pos < match.cached_tokens; ++pos) {
    EXPECT_EQ(ReadSlot(cache, request.table[pos / bs], pos % bs),
              PositionValue(tokens, pos, extras))
        << "reused KV differs at position " << pos;
  }
  std::optional<Digest> parent_key = match.last_full_key;
  for (size_t b = match.cached_tokens / bs; b * bs < len; ++b) {
    if (b >= request.table.size()) {
      std::optional<BlockId> fresh = cache.Allocate();
      if (!fresh) {
        cache.Release(request.table);
        return std::nullopt;
      }
      request.table.push_back(*fresh);
    }
    const BlockId block = request.table[b];
    const size_t begin = b * bs;
    const size_t end = std::min(len, begin + bs);
    for (size_t pos = std::max(begin, match.cached_tokens); pos < end; ++pos) {
      WriteSlot(cache, block, pos - begin, PositionValue(tokens, pos, extras));
    }
    if (end - begin == bs || commit_tail) {
      parent_key =
          cache.Commit(block, parent_key, tokens.subspan(begin, end - begin), extras, policy);
    }
  }
  return request;
}

}  // namespace reprise::testing
