#include "kvcache/block_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

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

bool KernelCanPopulate() {
  const size_t probe_bytes = size_t{1} << 20;
  void* probe =
      ::mmap(nullptr, probe_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return false;
  const bool can_populate = ::madvise(probe, probe_bytes, MADV_POPULATE_WRITE) == 0;
  ::munmap(probe, probe_bytes);
  return can_populate;
}

// How many pages of the pool's bytes [from, to) are not resident (mincore).
size_t MissingPages(BlockPool& pool, size_t from, size_t to) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(pool.BlockData(0)) + from;
  const uintptr_t start = begin & ~(page - 1);
  const size_t length = begin + (to - from) - start;
  std::vector<unsigned char> resident((length + page - 1) / page);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(start), length, resident.data()), 0);
  size_t missing = 0;
  for (unsigned char flags : resident) missing += (flags & 1) == 0 ? 1 : 0;
  return missing;
}

// The pool's pages are made resident beside the engine (mincore), so the first request to use a
// block does not fault it in.
TEST(BlockPoolTest, MemoryIsMadeResidentBesideTheEngine) {
  if (!KernelCanPopulate()) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)";
  const size_t block_bytes = 64 * 1024;
  BlockPool pool(64, block_bytes);  // 4 MiB: an anonymous mapping, not the heap
  pool.FinishPopulating();
  EXPECT_EQ(pool.PopulatedBytes(), 64 * block_bytes);
  EXPECT_EQ(MissingPages(pool, 0, 64 * block_bytes), 0u);
}

// Memory is taken as it is needed: a window ahead of the highest block handed out is resident,
// the rest of the budget is not, and the window moves on as blocks are handed out.
TEST(BlockPoolTest, OnlyAWindowAheadOfUseIsMadeResident) {
  if (!KernelCanPopulate()) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)";
  const size_t block_bytes = 64 * 1024;
  const int64_t num_blocks = 4096;  // 256 MiB of budget
  BlockPool pool(num_blocks, block_bytes);
  const size_t window = pool.PopulateWindowBytes();
  ASSERT_GE(window, size_t{32} << 20);
  ASSERT_LT(window, num_blocks * block_bytes / 4);
  pool.FinishPopulating();
  EXPECT_EQ(pool.PopulatedBytes(), window);
  EXPECT_EQ(MissingPages(pool, 0, window), 0u);
  // Beyond the window (and the huge page it may end in) nothing is resident.
  const size_t slack = size_t{2} << 20;
  const size_t beyond = num_blocks * block_bytes - window - slack;
  EXPECT_EQ(MissingPages(pool, window + slack, num_blocks * block_bytes),
            beyond / static_cast<size_t>(::sysconf(_SC_PAGESIZE)));

  // Hand out blocks up to 1.5 windows: the window follows.
  const auto used = static_cast<int64_t>(window * 3 / 2 / block_bytes);
  for (int64_t i = 0; i < used; ++i) ASSERT_EQ(pool.PopFree(), static_cast<BlockId>(i));
  pool.FinishPopulating();
  const size_t used_bytes = static_cast<size_t>(used) * block_bytes;
  EXPECT_GE(pool.PopulatedBytes(), used_bytes + window / 2);
  EXPECT_LE(pool.PopulatedBytes(), used_bytes + window + slack);
  EXPECT_EQ(MissingPages(pool, 0, used_bytes + window / 2), 0u);
  EXPECT_GT(MissingPages(pool, pool.PopulatedBytes() + slack, num_blocks * block_bytes), 0u);

  // Blocks given back and handed out again stay within what is resident.
  const size_t before = pool.PopulatedBytes();
  for (int64_t i = 0; i < 16; ++i) pool.PushFree(static_cast<BlockId>(i));
  for (int64_t i = 0; i < 16; ++i) ASSERT_TRUE(pool.PopFree().has_value());
  pool.FinishPopulating();
  EXPECT_EQ(pool.PopulatedBytes(), before);
}

TEST(BlockPoolTest, RejectsBadSizes) {
  EXPECT_THROW(BlockPool(0, 64), InternalError);
  EXPECT_THROW(BlockPool(4, 0), InternalError);
}

}  // namespace
}  // namespace reprise
