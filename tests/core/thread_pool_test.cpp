#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace reprise
