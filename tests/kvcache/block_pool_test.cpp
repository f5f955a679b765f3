#include "kvcache/block_pool.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"

namespace reprise {
namespace {

TEST(BlockPoolTest, NumBlocksForBudgetRoundsDown) {
  EXPECT_EQ(BlockPool::NumBlocksForBudget(1000, 100), 10);
  EXPECT_EQ(BlockPool::NumBlocksForBudget(1099, 100), 10);
  EXPECT_EQ(BlockPool::NumBlocksForBudget(99, 100), 0);
  EXPECT_EQ(BlockPool::NumBlocksForBudget(size_t{1} << 62, 1), INT32_MAX);
  EXPECT_THROW(BlockPool::NumBlocksForBudget(100, 0), InternalError);
}

TEST(BlockPoolTest, FreeStackPopsInIdOrderThenMostRecentlyPushed) {
  BlockPool pool(4, 64);
  EXPECT_EQ(pool.NumFree(), 4u);
  EXPECT_EQ(pool.PopFree(), 0);
  EXPECT_EQ(pool.PopFree(), 1);
  EXPECT_EQ(pool.PopFree(), 2);
  pool.PushFree(1);
  pool.PushFree(0);
  EXPECT_EQ(pool.PopFree(), 0);
  EXPECT_EQ(pool.PopFree(), 1);
  EXPECT_EQ(pool.PopFree(), 3);
  EXPECT_EQ(pool.PopFree(), std::nullopt);
  EXPECT_EQ(pool.NumFree(), 0u);
}

TEST(BlockPoolTest, RefCountsAndMisuseAreChecked) {
  BlockPool pool(2, 64);
  BlockId id = *pool.PopFree();
  EXPECT_FALSE(pool.IsFree(id));
  pool.AddRef(id);
  pool.AddRef(id);
  EXPECT_EQ(pool.RefCount(id), 2);
  EXPECT_THROW(pool.PushFree(id), InternalError);  // still referenced
  EXPECT_EQ(pool.DropRef(id), 1);
  EXPECT_EQ(pool.DropRef(id), 0);
  EXPECT_THROW(pool.DropRef(id), InternalError);
  pool.PushFree(id);
  EXPECT_TRUE(pool.IsFree(id));
  EXPECT_THROW(pool.PushFree(id), InternalError);  // twice
  EXPECT_THROW(pool.RefCount(2), InternalError);
  EXPECT_THROW(pool.RefCount(-1), InternalError);
}

TEST(BlockPoolTest, BlocksAreDisjointAlignedAndCopyable) {
  BlockPool pool(3, 128);
  EXPECT_EQ(pool.BlockData(1) - pool.BlockData(0), 128);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pool.BlockData(0)) % 64, 0u);
  for (size_t i = 0; i < 128; ++i) EXPECT_EQ(pool.BlockData(2)[i], 0);  // zeroed
  std::memset(pool.BlockData(1), 0xAB, 128);
  pool.CopyBlock(2, 1);
  EXPECT_EQ(std::memcmp(pool.BlockData(1), pool.BlockData(2), 128), 0);
  EXPECT_EQ(pool.BlockData(0)[127], 0);
}

TEST(BlockPoolTest, RejectsBadSizes) {
  EXPECT_THROW(BlockPool(0, 64), InternalError);
  EXPECT_THROW(BlockPool(4, 0), InternalError);
}

}  // namespace
}  // namespace reprise
