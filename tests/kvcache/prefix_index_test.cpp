#include "kvcache/prefix_index.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kvcache/block_key.h"

namespace reprise {
namespace {

Digest Key(int n) {
  Digest digest{};
  digest[0] = static_cast<uint8_t>(n);
  digest[1] = 0xEE;
  return digest;
}

std::vector<BlockId> Children(const PrefixIndex& index, BlockId parent, const Digest& extras) {
  std::vector<BlockId> ids;
  for (BlockId c = index.FirstChild(parent, extras); c != kNoBlock; c = index.NextSibling(c)) {
    ids.push_back(c);
  }
  return ids;
}

class PrefixIndexTest : public ::testing::Test {
 protected:
  PrefixIndex index_{8, 4};
  Digest extras_ = ExtrasDigest({});
  Digest salted_ = ExtrasDigest({"tenant", ""});
};

TEST_F(PrefixIndexTest, InsertFindRemove) {
  const std::vector<int32_t> full = {1, 2, 3, 4};
  const std::vector<int32_t> tail = {5, 6};
  index_.Insert(3, Key(3), kNoBlock, extras_, full);
  index_.Insert(5, Key(5), 3, extras_, tail);
  EXPECT_EQ(index_.size(), 2u);
  EXPECT_EQ(index_.Find(Key(3)), 3);
  EXPECT_EQ(index_.Find(Key(5)), 5);
  EXPECT_EQ(index_.Find(Key(4)), std::nullopt);
  EXPECT_FALSE(index_.IsPartial(3));
  EXPECT_TRUE(index_.IsPartial(5));
  EXPECT_EQ(index_.Parent(5), 3);
  EXPECT_EQ(index_.NumChildren(3), 1);
  EXPECT_EQ(std::vector<int32_t>(index_.Tokens(5).begin(), index_.Tokens(5).end()), tail);

  EXPECT_THROW(index_.Remove(3), InternalError);  // has a child
  index_.Remove(5);
  index_.Remove(3);
  EXPECT_EQ(index_.size(), 0u);
  EXPECT_FALSE(index_.Contains(3));
  EXPECT_EQ(index_.FirstChild(kNoBlock, extras_), kNoBlock);
}

TEST_F(PrefixIndexTest, RejectsBadStructure) {
  const std::vector<int32_t> full = {1, 2, 3, 4};
  const std::vector<int32_t> tail = {1, 2};
  index_.Insert(0, Key(0), kNoBlock, extras_, full);
  index_.Insert(1, Key(1), kNoBlock, extras_, tail);
  EXPECT_THROW(index_.Insert(2, Key(0), kNoBlock, extras_, full), InternalError);  // same key
  EXPECT_THROW(index_.Insert(2, Key(2), 1, extras_, full), InternalError);         // under a tail
  EXPECT_THROW(index_.Insert(2, Key(2), 0, salted_, full), InternalError);         // other extras
  EXPECT_THROW(index_.Insert(2, Key(2), 0, extras_, {}), InternalError);
  EXPECT_THROW(index_.Insert(0, Key(9), kNoBlock, extras_, full), InternalError);  // twice
  EXPECT_EQ(index_.size(), 2u);
}

TEST_F(PrefixIndexTest, ChildrenListedNewestFirstAndUnlinkAnywhere) {
  const std::vector<int32_t> full = {1, 2, 3, 4};
  index_.Insert(0, Key(0), kNoBlock, extras_, full);
  for (BlockId id : {1, 2, 3, 4}) {
    const std::vector<int32_t> tokens = {10 * id, 1, 2, 3};
    index_.Insert(id, Key(id), 0, extras_, tokens);
  }
  EXPECT_EQ(Children(index_, 0, extras_), (std::vector<BlockId>{4, 3, 2, 1}));
  index_.Remove(3);
  EXPECT_EQ(Children(index_, 0, extras_), (std::vector<BlockId>{4, 2, 1}));
  index_.Remove(4);
  EXPECT_EQ(Children(index_, 0, extras_), (std::vector<BlockId>{2, 1}));
  index_.Remove(1);
  EXPECT_EQ(Children(index_, 0, extras_), (std::vector<BlockId>{2}));
  EXPECT_EQ(index_.NumChildren(0), 1);
}

TEST_F(PrefixIndexTest, FirstBlocksAreListedPerExtras) {
  const std::vector<int32_t> full = {1, 2, 3, 4};
  index_.Insert(0, Key(0), kNoBlock, extras_, full);
  index_.Insert(1, Key(1), kNoBlock, salted_, full);
  index_.Insert(2, Key(2), kNoBlock, extras_, std::vector<int32_t>{1, 2});
  EXPECT_EQ(Children(index_, kNoBlock, extras_), (std::vector<BlockId>{2, 0}));
  EXPECT_EQ(index_.NumTailChildren(kNoBlock, extras_), 1);
  EXPECT_EQ(Children(index_, kNoBlock, salted_), (std::vector<BlockId>{1}));
  EXPECT_EQ(Children(index_, kNoBlock, ExtrasDigest({"x", ""})), std::vector<BlockId>{});
  index_.Remove(2);
  index_.Remove(0);
  EXPECT_EQ(Children(index_, kNoBlock, extras_), std::vector<BlockId>{});
  EXPECT_EQ(Children(index_, kNoBlock, salted_), (std::vector<BlockId>{1}));
}

TEST_F(PrefixIndexTest, LongestPartialMatchComparesTokens) {
  const std::vector<int32_t> root = {1, 2, 3, 4};
  index_.Insert(0, Key(0), kNoBlock, extras_, root);
  index_.Insert(1, Key(1), 0, extras_, std::vector<int32_t>{5, 6, 7, 8});  // full
  index_.Insert(2, Key(2), 0, extras_, std::vector<int32_t>{5, 6, 9});     // tail
  index_.Insert(3, Key(3), 0, extras_, std::vector<int32_t>{7});           // tail

  EXPECT_EQ(index_.NumChildren(0), 3);
  EXPECT_EQ(index_.NumTailChildren(0, extras_), 2);
  EXPECT_EQ(index_.NumTailChildren(kNoBlock, extras_), 0);
  using Result = std::pair<BlockId, size_t>;
  EXPECT_EQ(index_.LongestPartialMatch(0, extras_, std::vector<int32_t>{5, 6, 7, 0}), Result(1, 3));
  EXPECT_EQ(index_.LongestPartialMatch(0, extras_, std::vector<int32_t>{5, 6, 9, 9}), Result(2, 3));
  EXPECT_EQ(index_.LongestPartialMatch(0, extras_, std::vector<int32_t>{7, 7}), Result(3, 1));
  EXPECT_EQ(index_.LongestPartialMatch(0, extras_, std::vector<int32_t>{8}), Result(kNoBlock, 0));
  // Tie at two tokens: the newest child wins.
  EXPECT_EQ(index_.LongestPartialMatch(0, extras_, std::vector<int32_t>{5, 6}), Result(2, 2));
  // The query is cut at block_size and at its own length.
  EXPECT_EQ(index_.LongestPartialMatch(0, extras_, std::vector<int32_t>{5, 6, 7, 8, 9}),
            Result(1, 4));
  // First blocks: only those with the same extras.
  EXPECT_EQ(index_.LongestPartialMatch(kNoBlock, extras_, std::vector<int32_t>{1, 2, 0}),
            Result(0, 2));
  EXPECT_EQ(index_.LongestPartialMatch(kNoBlock, salted_, std::vector<int32_t>{1, 2, 0}),
            Result(kNoBlock, 0));
}

}  // namespace
}  // namespace reprise
