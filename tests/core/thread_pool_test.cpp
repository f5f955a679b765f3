#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace reprise {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexOnceAcrossManyJobs) {
  ThreadPool pool(4);
  for (size_t count : {1u, 3u, 4u, 17u, 1000u}) {
    for (int repeat = 0; repeat < 50; ++repeat) {
      std::vector<std::atomic<int>> hits(count);
      pool.ParallelFor(count, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(hits[i].load(), 1) << count << " " << i;
    }
  }
}

TEST(ThreadPoolTest, RangesRespectGrain) {
  ThreadPool pool(3);
  std::atomic<int> misaligned{0};
  pool.ParallelFor(
      100,
      [&](size_t begin, size_t) {
        if (begin % 8 != 0) misaligned.fetch_add(1);
      },
      8);
  EXPECT_EQ(misaligned.load(), 0);
}

// An exception thrown on a worker thread reaches ParallelFor's caller once every range is done,
// instead of ending the process; the pool keeps working after it.
TEST(ThreadPoolTest, TaskExceptionReachesCaller) {
  ThreadPool pool(3);
  for (size_t thrower : {0u, 1u, 2u}) {  // the caller's range and the workers'
    std::atomic<int> finished{0};
    EXPECT_THROW(pool.ParallelFor(3,
                                  [&](size_t begin, size_t) {
                                    if (begin == thrower) throw std::runtime_error("bad range");
                                    finished.fetch_add(1);
                                  }),
                 std::runtime_error);
    EXPECT_EQ(finished.load(), 2);
  }
  std::atomic<int> total{0};
  pool.ParallelFor(
      30, [&](size_t begin, size_t end) { total.fetch_add(static_cast<int>(end - begin)); });
  EXPECT_EQ(total.load(), 30);
}

}  // namespace
}  // namespace reprise
