// The SIMD unpackers must produce exactly the scalar unpacker's bytes: MatMul's exactness across
// the decode and prefill paths relies on the unpacked form being a pure function of the weights.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu_target.h"
#include "kernels/matmul_kernels.h"
#include "kernels/unpacked.h"
#include "test_util.h"

namespace reprise::kernels {
namespace {

// Random bytes with every f16 field set to a finite value: a valid row of `blocks` blocks.
std::vector<uint8_t> RandomRow(WeightType type, int64_t blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(BlockBytes(type) * blocks);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  auto set_half = [&](size_t offset) {
    uint16_t h = FloatToHalf(dist(rng));
    std::memcpy(bytes.data() + offset, &h, 2);
  };
  for (int64_t b = 0; b < blocks; ++b) {
    size_t base = b * BlockBytes(type);
    switch (type) {
      case WeightType::kQ4_1:
      case WeightType::kQ5_1:
      case WeightType::kQ4_K:
      case WeightType::kQ5_K:
        set_half(base);
        set_half(base + 2);
        break;
      case WeightType::kQ6_K:
        set_half(base + 208);
        break;
      default:
        set_half(base);
    }
  }
  return bytes;
}

using UnpackFn = void (*)(WeightType, const void*, int64_t, int64_t, uint8_t*, float*, float*);

[[maybe_unused]] void ExpectSameAsScalar(UnpackFn unpack) {
  for (WeightType type : testing::kAllTypes) {
    if (!IsQuantized(type)) continue;
    const int64_t blocks = 12;  // 11 unpacked from block 1: steps of 4 plus leftovers
    const int64_t n = blocks * static_cast<int64_t>(BlockElements(type));
    std::vector<uint8_t> row = RandomRow(type, blocks, 77);
    std::vector<uint8_t> q_scalar(n), q_simd(n);
    std::vector<float> s_scalar(n / 16), s_simd(n / 16), m_scalar(n / 32), m_simd(n / 32);
    UnpackBlocks(type, row.data(), 1, blocks - 1, q_scalar.data(), s_scalar.data(),
                 HasMin(type) ? m_scalar.data() : nullptr);
    unpack(type, row.data(), 1, blocks - 1, q_simd.data(), s_simd.data(),
           HasMin(type) ? m_simd.data() : nullptr);
    EXPECT_EQ(q_scalar, q_simd) << WeightTypeName(type);
    EXPECT_EQ(std::memcmp(s_scalar.data(), s_simd.data(), s_simd.size() * 4), 0)
        << WeightTypeName(type);
    EXPECT_EQ(std::memcmp(m_scalar.data(), m_simd.data(), m_simd.size() * 4), 0)
        << WeightTypeName(type);
  }
}

TEST(KernelUnpackTest, Avx2UnpackMatchesScalarBytes) {
#if defined(REPRISE_KERNELS_AVX2)
  if (!CpuTargetSupported(CpuTarget::kAvx2)) GTEST_SKIP() << "no AVX2";
  ExpectSameAsScalar(UnpackBlocksAvx2);
  ExpectSameAsScalar(UnpackBlocksAvx2NoPrefetch);
#else
  GTEST_SKIP() << "built without the AVX2 kernels (REPRISE_SIMD_KERNELS=OFF)";
#endif
}

TEST(KernelUnpackTest, Avx512UnpackMatchesScalarBytes) {
#if defined(REPRISE_KERNELS_AVX512)
  if (!CpuTargetSupported(CpuTarget::kAvx512)) GTEST_SKIP() << "no AVX-512";
  ExpectSameAsScalar(UnpackBlocksAvx512NoPrefetch);
#else
  GTEST_SKIP() << "built without the AVX-512 kernels (REPRISE_SIMD_KERNELS=OFF)";
#endif
}

}  // namespace
}  // namespace reprise::kernels
