// The attention timings `bench kernels` reports: every KV type timed, and the rates computed
// from the shape's flops and K/V bytes.
#include "bench/warm_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace reprise::bench {
namespace {

void ExpectAttentionRates(const WarmAttentionShape& shape,
                          const std::vector<WarmAttentionTiming>& timings) {
  ASSERT_EQ(timings.size(), 3u);
  const std::vector<std::string> types = {"f16", "q8", "f32"};
  const int positions = shape.cached + shape.new_tokens;
  double pairs = 0;  // (query row, position) pairs
  for (int t = 0; t < shape.new_tokens; ++t) pairs += shape.cached + t + 1;
  pairs *= shape.kv_heads * shape.group;
  for (size_t i = 0; i < timings.size(); ++i) {
    const WarmAttentionTiming& timing = timings[i];
    EXPECT_EQ(timing.kv_type, types[i]);
    ASSERT_GT(timing.seconds, 0) << timing.kv_type;
    ASSERT_TRUE(std::isfinite(timing.seconds)) << timing.kv_type;
    EXPECT_NEAR(timing.gflops * timing.seconds * 1e9, 4.0 * pairs * shape.head_dim, 1.0)
        << timing.kv_type;
    // One layer's K/V: per position and KV head a key and a value (q8: codes and their scales,
    // a scale per 32 key dimensions and one per value).
    const double per_position = types[i] == "f16" ? 4.0 * shape.head_dim
                                : types[i] == "f32"
                                    ? 8.0 * shape.head_dim
                                    : 2.0 * shape.head_dim + 4.0 * (shape.head_dim / 32 + 1);
    EXPECT_NEAR(timing.gbps * timing.seconds * 1e9, per_position * positions * shape.kv_heads, 1.0)
        << timing.kv_type;
  }
}

TEST(BenchWarmAttentionTest, TimesEveryKvTypeOfAWarmTurn) {
  const WarmAttentionShape shape{.new_tokens = 5, .cached = 40};
  ThreadPool pool(2);
  ExpectAttentionRates(shape, TimeWarmAttention(shape, pool, 2));
}

// A decoding token over several layers' blocks, each layer's K/V first pushed out of the caches.
TEST(BenchWarmAttentionTest, TimesADecodingTokenOverEveryLayerFromMemory) {
  const WarmAttentionShape shape{.new_tokens = 1, .cached = 47, .layers = 3, .from_memory = true};
  ThreadPool pool(2);
  ExpectAttentionRates(shape, TimeWarmAttention(shape, pool, 2));
}

}  // namespace
}  // namespace reprise::bench
