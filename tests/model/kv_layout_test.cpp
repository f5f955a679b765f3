// The KV layout model/ computes from a model's hyper-parameters: block size in bytes, and planes
// that tile a block without overlap.
#include "model/kv_layout.h"

#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "model/model.h"
#include "test_support.h"

namespace reprise {
namespace {

TEST(KvLayoutTest, BlockOfTheStoriesModel) {
  REPRISE_REQUIRE_FIXTURES();
  auto model = Model::Load(testing::Fixture("models/stories260K.gguf"));
  // 5 layers, 4 KV heads of 8: 5 * 2 (K, V) * 4 * 16 positions * 8 * 2 bytes (f16).
  kernels::PagedKv f16 = KvLayout(model->config(), kernels::KvType::kF16, 16);
  EXPECT_EQ(f16.BlockBytes(), size_t{5 * 2 * 4 * 16 * 8 * 2});
  EXPECT_EQ(f16.base, nullptr);
  kernels::PagedKv f32 = KvLayout(model->config(), kernels::KvType::kF32, 32);
  EXPECT_EQ(f32.BlockBytes(), size_t{5 * 2 * 4 * 32 * 8 * 4});
}

TEST(KvLayoutTest, PlanesTileABlock) {
  ModelConfig config;
  config.n_layer = 3;
  config.n_kv_head = 2;
  config.head_dim = 4;
  kernels::PagedKv layout = KvLayout(config, kernels::KvType::kF16, 8);
  alignas(64) static uint8_t pool[2 * 3 * 2 * 2 * 8 * 4 * 2];
  layout.base = pool;
  const size_t plane = 8 * 4 * 2;
  std::set<size_t> starts;
  for (int block = 0; block < 2; ++block) {
    for (int layer = 0; layer < 3; ++layer) {
      for (int kv = 0; kv < 2; ++kv) {
        for (int head = 0; head < 2; ++head) {
          size_t start = static_cast<size_t>(layout.Plane(block, layer, kv, head) - pool);
          EXPECT_EQ(start % plane, 0u);
          EXPECT_LT(start, sizeof(pool));
          starts.insert(start);
        }
      }
    }
  }
  EXPECT_EQ(starts.size(), sizeof(pool) / plane);  // every plane distinct: no overlap, no gap
}

TEST(KvLayoutTest, KvTypeNames) {
  EXPECT_EQ(ParseKvType("f16"), kernels::KvType::kF16);
  EXPECT_EQ(ParseKvType("f32"), kernels::KvType::kF32);
  EXPECT_THROW(ParseKvType("q8_0"), Error);
}

}  // namespace
}  // namespace reprise
