#include "kvcache/eviction_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace reprise {
namespace {

std::vector<BlockId> Drain(EvictionQueue& queue) {
  std::vector<BlockId> order;
  while (std::optional<BlockId> id = queue.PopVictim()) order.push_back(*id);
  return order;
}

TEST(CacheEvictionQueueTest, LeastRecentlyUsedFirst) {
  EvictionQueue queue(8, [] { return 0.0; });
  queue.Add(5, 35, false, 0, 30);
  queue.Add(2, 35, false, 0, 10);
  queue.Add(7, 35, false, 0, 20);
  queue.Add(0, 35, false, 0, 40);
  EXPECT_EQ(queue.size(), 4u);
  EXPECT_EQ(Drain(queue), (std::vector<BlockId>{2, 7, 5, 0}));
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.PopVictim(), std::nullopt);
}

TEST(CacheEvictionQueueTest, LowerPriorityFirstThenRecency) {
  EvictionQueue queue(8, [] { return 0.0; });
  queue.Add(0, 50, false, 0, 1);
  queue.Add(1, 10, false, 0, 4);
  queue.Add(2, 50, false, 0, 2);
  queue.Add(3, 10, false, 0, 3);
  queue.Add(4, 100, false, 0, 0);
  EXPECT_EQ(Drain(queue), (std::vector<BlockId>{3, 1, 0, 2, 4}));
}

TEST(CacheEvictionQueueTest, ProbationBeforeProtectedWithinAPriority) {
  EvictionQueue queue(8, [] { return 0.0; });
  queue.Add(0, 35, true, 0, 1);   // protected, oldest
  queue.Add(1, 35, false, 0, 5);  // probation, newest
  queue.Add(2, 35, false, 0, 3);
  queue.Add(3, 10, true, 0, 9);  // protected but of a lower priority: still goes first
  queue.Add(4, 35, true, 0, 2);
  EXPECT_EQ(Drain(queue), (std::vector<BlockId>{3, 2, 1, 0, 4}));
}

TEST(CacheEvictionQueueTest, RemoveAnywhere) {
  EvictionQueue queue(8, [] { return 0.0; });
  for (BlockId id = 0; id < 6; ++id) queue.Add(id, 35, false, 0, static_cast<uint64_t>(10 - id));
  queue.Remove(3);
  queue.Remove(5);
  EXPECT_FALSE(queue.Contains(3));
  EXPECT_TRUE(queue.Contains(4));
  EXPECT_EQ(Drain(queue), (std::vector<BlockId>{4, 2, 1, 0}));
}

TEST(CacheEvictionQueueTest, RunningTtlGoesLastUntilItExpires) {
  double now = 100;
  EvictionQueue queue(8, [&now] { return now; });
  queue.Add(0, 100, false, 0, 1);  // high priority, no TTL
  queue.Add(1, 0, false, 110, 2);  // lowest priority but TTL runs until 110
  queue.Add(2, 0, false, 105, 3);  // TTL until 105
  queue.Add(3, 35, false, 0, 4);
  // Every block without a running TTL goes first, whatever its priority.
  EXPECT_EQ(queue.PopVictim(), 3);
  EXPECT_EQ(queue.PopVictim(), 0);
  now = 106;  // block 2 expired: it is an ordinary priority-0 block again
  queue.Add(4, 35, false, 0, 5);
  EXPECT_EQ(queue.PopVictim(), 2);
  EXPECT_EQ(queue.PopVictim(), 4);
  EXPECT_EQ(queue.PopVictim(), 1);  // still running, but memory is needed
  EXPECT_TRUE(queue.empty());
}

TEST(CacheEvictionQueueTest, ClockIsReadOnlyForTtls) {
  int calls = 0;
  EvictionQueue queue(4, [&calls] {
    ++calls;
    return 0.0;
  });
  queue.Add(0, 35, false, 0, 1);
  queue.Add(1, 35, false, 0, 2);
  EXPECT_EQ(Drain(queue), (std::vector<BlockId>{0, 1}));
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace reprise
