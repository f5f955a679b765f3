// Scan resistance (PrefixCacheConfig::protected_share): documents visited round robin through a
// cache too small for all of them keep hitting on the protected share, a burst of one-time prompts
// does not flush what is being reused, and a new reused document takes over from stale protected
// blocks. Each case runs beside plain LRU (share 0), which loses on exactly these patterns.
#include <gtest/gtest.h>

#include <vector>

#include "kv_test_util.h"
#include "kvcache/prefix_cache.h"

namespace reprise {
namespace {

using testing::ExpectNoLeak;
using testing::Range;
using testing::RunPrompt;

PrefixCacheConfig Config(int64_t num_blocks, double protected_share) {
  PrefixCacheConfig config = testing::SmallConfig(num_blocks);  // block size 4
  config.protected_share = protected_share;
  return config;
}

// Document `index`: 4 full blocks and one more token, so that a visit reuses at most the 4 full
// blocks and computes the last token in a private block (5 blocks in flight).
std::vector<int32_t> Document(int index) { return Range(1000 * index, 1000 * index + 17); }

// One visit: match, compute the rest, commit the full blocks, release. Returns the cached tokens.
size_t Visit(PrefixCache& cache, const std::vector<int32_t>& tokens) {
  std::optional<testing::Request> request = RunPrompt(cache, tokens, {}, {}, /*commit_tail=*/false);
  EXPECT_TRUE(request.has_value()) << "the pool ran out";
  if (!request) return 0;
  cache.Release(request->table);
  EXPECT_NO_THROW(cache.CheckInvariants());
  return request->cached_tokens;
}

// Hit share (of the 16 reusable tokens per visit) of rounds 2..rounds when `docs` documents are
// visited round robin.
double CycleHitShare(double protected_share, int docs, int rounds) {
  PrefixCache cache(Config(18, protected_share));  // holds 3 documents and most of a fourth
  size_t hits = 0;
  size_t visits = 0;
  for (int round = 0; round < rounds; ++round) {
    for (int d = 0; d < docs; ++d) {
      const size_t cached = Visit(cache, Document(d + 1));
      if (round > 0) {
        hits += cached;
        ++visits;
      }
    }
  }
  ExpectNoLeak(cache);
  return static_cast<double>(hits) / static_cast<double>(16 * visits);
}

TEST(PrefixCacheScanTest, CyclicVisitsBeyondTheCacheKeepTheProtectedShareHitting) {
  // 5 documents of 4 blocks through 18 blocks: LRU evicts each just before its next visit.
  const double lru = CycleHitShare(0.0, 5, 6);
  const double scan_resistant = CycleHitShare(0.8, 5, 6);
  // The protected tier holds 14 blocks: 3 whole documents and half of a fourth stay and hit.
  EXPECT_GE(scan_resistant, 0.6);
  EXPECT_LE(lru, 0.3);
}

TEST(PrefixCacheScanTest, DocumentsThatFitHitTheSameUnderEitherPolicy) {
  EXPECT_EQ(CycleHitShare(0.0, 3, 4), 1.0);
  EXPECT_EQ(CycleHitShare(0.8, 3, 4), 1.0);
}

// Reuses document 1 while 12 one-time documents stream past, then visits it once more.
size_t HotDocumentAfterABurst(double protected_share) {
  PrefixCache cache(Config(24, protected_share));
  // Stale documents fill the protected tier first (the warm-up admits every block).
  for (int d = 50; d < 55; ++d) Visit(cache, Document(d));
  EXPECT_EQ(Visit(cache, Document(1)), 0u);
  Visit(cache, Document(60));
  // Its second visit promotes it (reused sooner than the stale blocks were): by a hit, or by
  // its key remembered from the eviction when probation was too small to keep it until now.
  Visit(cache, Document(1));
  for (int d = 61; d < 73; ++d) Visit(cache, Document(d));
  const size_t cached = Visit(cache, Document(1));
  ExpectNoLeak(cache);
  return cached;
}

TEST(PrefixCacheScanTest, ABurstOfOneTimePromptsDoesNotFlushAReusedDocument) {
  EXPECT_EQ(HotDocumentAfterABurst(0.8), 16u);
  EXPECT_EQ(HotDocumentAfterABurst(0.0), 0u);
}

// A running request matches again between steps to pick up blocks others committed; finding its
// own blocks there is not a reuse, or every new prompt would promote itself.
TEST(PrefixCacheScanTest, ARequestMatchingItsOwnBlocksDoesNotPromoteThem) {
  PrefixCache cache(Config(20, 0.5));
  for (int d = 1; d <= 3; ++d) Visit(cache, Document(d));  // fills the tier (10 blocks)
  ASSERT_EQ(cache.Stats().blocks_protected, 10);
  const std::vector<int32_t> tokens = Document(4);
  std::optional<testing::Request> own = RunPrompt(cache, tokens, {}, {}, /*commit_tail=*/false);
  ASSERT_TRUE(own.has_value());
  // Its 4 committed blocks are on probation: a first use.
  const std::vector<BlockId> probation(own->table.begin(), own->table.begin() + 4);
  PrefixMatch again = cache.Match(tokens, tokens.size() - 1, {}, {}, /*held_tokens=*/16);
  EXPECT_EQ(again.cached_tokens, 16u);
  cache.Release(again.blocks);
  EXPECT_EQ(cache.Stats().blocks_protected, 10);
  // Another request finding them is a reuse, sooner than the tier's oldest: they trade places.
  PrefixMatch other = cache.Match(tokens, tokens.size() - 1, {});
  cache.Release(other.blocks);
  EXPECT_EQ(cache.Stats().blocks_protected, 10);
  size_t promoted = 0;
  for (BlockId id : probation) promoted += cache.IsProtected(id) ? 1 : 0;
  EXPECT_EQ(promoted, 4u);
  cache.Release(own->table);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheScanTest, ProtectedTierNeverExceedsItsShare) {
  PrefixCache cache(Config(20, 0.5));
  for (int round = 0; round < 3; ++round) {
    for (int d = 1; d <= 6; ++d) {
      Visit(cache, Document(d));
      EXPECT_LE(cache.Stats().blocks_protected, 10);
    }
  }
  EXPECT_EQ(cache.Stats().blocks_protected, 10);
  ExpectNoLeak(cache);
}

TEST(PrefixCacheScanTest, ShareZeroKeepsOneTier) {
  PrefixCache cache(Config(20, 0.0));
  for (int d = 1; d <= 6; ++d) Visit(cache, Document(d));
  Visit(cache, Document(6));
  EXPECT_EQ(cache.Stats().blocks_protected, 0);
}

TEST(PrefixCacheScanTest, ShareOutsideZeroToOneIsRefused) {
  EXPECT_THROW(PrefixCache(Config(8, 1.5)), std::exception);
  EXPECT_THROW(PrefixCache(Config(8, -0.1)), std::exception);
}

}  // namespace
}  // namespace reprise
