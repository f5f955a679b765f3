// Matrices rearranged into row groups (row_groups.h) hold the same bytes and give every output
// the bits of the stored matrix, on every target, for one token and many, fused or alone.
#include "kernels/row_groups.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu_target.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "test_util.h"

namespace reprise::kernels {
namespace {

using testing::RandomValues;
using testing::TestWeights;

// Every grouped layout of every type that has one.
struct Grouping {
  WeightType type;
  WeightLayout layout;
};
const Grouping kGroupings[] = {
    {WeightType::kQ4_0, WeightLayout::kRowGroups},  {WeightType::kQ8_0, WeightLayout::kRowGroups},
    {WeightType::kQ4_K, WeightLayout::kRowGroups},  {WeightType::kQ5_K, WeightLayout::kRowGroups},
    {WeightType::kQ6_K, WeightLayout::kRowGroups},  {WeightType::kQ4_0, WeightLayout::kRowStreams},
    {WeightType::kQ5_0, WeightLayout::kRowStreams}, {WeightType::kQ8_0, WeightLayout::kRowStreams},
    {WeightType::kQ4_K, WeightLayout::kRowStreams}, {WeightType::kQ5_K, WeightLayout::kRowStreams},
    {WeightType::kQ6_K, WeightLayout::kRowStreams}, {WeightType::kF16, WeightLayout::kRowGroups},
    {WeightType::kBF16, WeightLayout::kRowGroups},  {WeightType::kF16, WeightLayout::kRowStreams},
    {WeightType::kBF16, WeightLayout::kRowStreams}};

std::string Name(const Grouping& g) {
  return std::string(WeightTypeName(g.type)) +
         (g.layout == WeightLayout::kRowStreams ? " in streams" : " in groups");
}

std::vector<CpuTarget> SupportedTargets() {
  std::vector<CpuTarget> targets;
  for (CpuTarget t : {CpuTarget::kScalar, CpuTarget::kAvx2, CpuTarget::kAvx512}) {
    if (CpuTargetSupported(t)) targets.push_back(t);
  }
  return targets;
}

// A copy of `w` rearranged into `layout` (its bytes in `storage`).
WeightView Grouped(const TestWeights& w, WeightLayout layout, std::vector<uint8_t>& storage) {
  storage = w.bytes;
  WeightView view = w.view;
  view.data = storage.data();
  return ArrangeRowGroups(view, layout, storage.data());
}

// Widths per type: K-quants with 8, 24 and 128 sub-blocks (MinsDot's masked last step or none);
// Q4_0, Q5_0 and Q8_0 with a lone last block, a span's masked last blocks, and a long row.
std::vector<int64_t> WidthsFor(WeightType type) {
  // F16 and BF16: a masked last chunk of 16 columns or none, in one stretch of the float group
  // tile's columns (64) and after several.
  if (type == WeightType::kF16 || type == WeightType::kBF16) return {16, 37, 100, 1040};
  if (type == WeightType::kQ4_0 || type == WeightType::kQ5_0 || type == WeightType::kQ8_0) {
    return {96, 544, 608, 4096};
  }
  return {256, 768, 4096};
}

TEST(KernelRowGroupsTest, LayoutPlacesEachRowsWordsSideBySide) {
  const int64_t rows = 37, cols = 512;  // two groups and 5 rows as stored
  for (const Grouping& grouping : kGroupings) {
    const WeightType type = grouping.type;
    TestWeights w(type, rows, cols, 301);
    std::vector<uint8_t> storage;
    const WeightView grouped = Grouped(w, grouping.layout, storage);
    ASSERT_EQ(grouped.layout, grouping.layout);
    const size_t row_bytes = RowBytes(type, cols);
    // Every row reads back as stored; the tail rows were not moved.
    std::vector<uint8_t> row(row_bytes);
    for (int64_t r = 0; r < rows; ++r) {
      UngroupRow(type, grouping.layout, storage.data(), rows, cols, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), w.bytes.data() + r * row_bytes, row_bytes), 0)
          << Name(grouping) << " row " << r;
    }
    ASSERT_EQ(std::memcmp(storage.data() + 32 * row_bytes, w.bytes.data() + 32 * row_bytes,
                          5 * row_bytes),
              0);
    // The documented order: in group 1, block 1, row r's copy of the block's first code word
    // (Q4_0, Q8_0: bytes 2-5; Q5_0: bytes 6-9; K-quants: word 0, d and dmin) is 4-byte piece r of
    // the block's group (F16, BF16: its element, 2-byte piece r of the column); in streams, rows
    // 8-15 in a stream after rows 0-7.
    const size_t block_bytes = BlockBytes(type);
    const uint8_t* group = storage.data() + 16 * row_bytes;
    const size_t first = type == WeightType::kQ5_0                                ? 6
                         : type == WeightType::kQ4_0 || type == WeightType::kQ8_0 ? 2
                                                                                  : 0;
    const int stream_rows = StreamRows(grouping.layout);
    const bool q6k_streams =
        type == WeightType::kQ6_K && grouping.layout == WeightLayout::kRowStreams;
    for (int r = 0; r < 16; ++r) {
      const uint8_t* stream = group + r / stream_rows * stream_rows * row_bytes;
      const uint8_t* block = stream + stream_rows * block_bytes;
      const int piece = type == WeightType::kF16 || type == WeightType::kBF16 ? 2 : 4;
      const uint8_t* stored_block = w.bytes.data() + (16 + r) * row_bytes + block_bytes;
      if (q6k_streams) {
        // The codes recoded (Q6KCodeByte): byte i of word 3 g + k holds element 16 g + 4 k + i's
        // code and bits 2 k, 2 k + 1 of element 16 g + 12 + i's; the scales' words as stored.
        const auto code = [stored_block](int e) {
          const int h = e / 128, l = e % 128;
          const uint8_t low = stored_block[64 * h + l % 64];
          const uint8_t high = stored_block[offsetof(BlockQ6_K, qh) + 32 * h + l % 32];
          return (l < 64 ? low & 15 : low >> 4) | ((high >> (2 * (l / 32))) & 3) << 4;
        };
        for (int g = 0; g < 16; ++g) {
          for (int k = 0; k < 3; ++k) {
            for (int i = 0; i < 4; ++i) {
              const uint8_t placed = block[32 * (3 * g + k) + 4 * (r % stream_rows) + i];
              ASSERT_EQ(placed, code(16 * g + 4 * k + i) | ((code(16 * g + 12 + i) >> (2 * k)) & 3)
                                                               << 6)
                  << "row " << r << " group " << g;
            }
          }
        }
        ASSERT_EQ(
            std::memcmp(block + 4 * (r % stream_rows) + stream_rows * offsetof(BlockQ6_K, scales),
                        stored_block + offsetof(BlockQ6_K, scales), 4),
            0);
        continue;
      }
      ASSERT_EQ(std::memcmp(block + piece * (r % stream_rows), stored_block + first, piece), 0)
          << Name(grouping) << " row " << r;
      if (type == WeightType::kQ5_0) {
        // After the four code-word vectors, the rows' qh words recoded: bit Q5_0FifthBit(e)
        // holds the fifth bit of element e.
        uint32_t stored, recoded;
        std::memcpy(&stored, w.bytes.data() + (16 + r) * row_bytes + block_bytes + 2, 4);
        std::memcpy(&recoded, block + 4 * 4 * stream_rows + 4 * (r % stream_rows), 4);
        uint32_t placed = 0;
        for (int e = 0; e < 32; ++e) {
          ASSERT_EQ((recoded >> Q5_0FifthBit(e)) & 1, (stored >> e) & 1) << "row " << r;
          placed |= 1u << Q5_0FifthBit(e);
        }
        ASSERT_EQ(placed, 0xFFFFFFFFu);  // one place per element
      }
      const bool k_quant = type == WeightType::kQ4_K || type == WeightType::kQ5_K;
      if (k_quant && grouping.layout == WeightLayout::kRowStreams) {
        // The codes' words in sub-block order: byte 16 j + n holds element 32 j + n in its low
        // nibble and 32 j + 16 + n in its high one (stored: byte 32 p + b holds 64 p + b and
        // 64 p + 32 + b).
        const size_t qs_at =
            type == WeightType::kQ5_K ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs);
        const uint8_t* qs = w.bytes.data() + (16 + r) * row_bytes + block_bytes + qs_at;
        const auto code = [qs](int e) {
          const int p = e / 64, b = e % 64;
          return b < 32 ? qs[32 * p + b] & 15 : qs[32 * p + b - 32] >> 4;
        };
        for (int i = 0; i < kQkK / 2; ++i) {
          const uint8_t placed =
              block[(qs_at + i / 4 * 4) * stream_rows + 4 * (r % stream_rows) + i % 4];
          const int j = i / 16, n = i % 16;
          ASSERT_EQ(placed, code(32 * j + n) | code(32 * j + 16 + n) << 4)
              << Name(grouping) << " row " << r << " byte " << i;
        }
      }
    }
    // Group, then ungroup: the stored bytes.
    std::vector<uint8_t> back(16 * row_bytes);
    UngroupRows(type, grouping.layout, group, cols, back.data());
    ASSERT_EQ(std::memcmp(back.data(), w.bytes.data() + 16 * row_bytes, back.size()), 0);
  }
}

// A target's reader of its grouped layout (TargetKernels::ungroup_rows, prefill's) gives the
// portable one's bytes.
[[maybe_unused]] void ExpectPortableBytes(WeightLayout layout,
                                          void (*reader)(WeightType, const uint8_t*, int64_t,
                                                         uint8_t*)) {
  for (const Grouping& grouping : kGroupings) {
    if (grouping.layout != layout) continue;
    const WeightType type = grouping.type;
    for (int64_t cols : WidthsFor(type)) {
      TestWeights w(type, 16, cols, 311);
      std::vector<uint8_t> storage;
      Grouped(w, layout, storage);
      std::vector<uint8_t> portable(storage.size(), 0xA5), vector(storage.size(), 0x5A);
      UngroupRows(type, layout, storage.data(), cols, portable.data());
      reader(type, storage.data(), cols, vector.data());
      ASSERT_EQ(portable, vector) << Name(grouping) << " cols " << cols;
      ASSERT_EQ(portable, w.bytes);
    }
  }
}

TEST(KernelRowGroupsTest, VectorUngroupingGivesThePortableBytes) {
#if defined(REPRISE_KERNELS_AVX512)
  if (!CpuTargetSupported(CpuTarget::kAvx512)) GTEST_SKIP() << "needs a CPU with AVX-512";
  ExpectPortableBytes(WeightLayout::kRowGroups, UngroupRowsAvx512);
#else
  GTEST_SKIP() << "built without the AVX-512 kernels (REPRISE_SIMD_KERNELS=OFF)";
#endif
}

TEST(KernelRowGroupsTest, Avx2StreamUngroupingGivesThePortableBytes) {
#if defined(REPRISE_KERNELS_AVX2)
  if (!CpuTargetSupported(CpuTarget::kAvx2)) GTEST_SKIP() << "needs a CPU with AVX2";
  ExpectPortableBytes(WeightLayout::kRowStreams, UngroupRowStreamsAvx2);
#else
  GTEST_SKIP() << "built without the AVX2 kernels (REPRISE_SIMD_KERNELS=OFF)";
#endif
}

TEST(KernelRowGroupsTest, PreferredOnlyWhereATileReadsThem) {
  constexpr WeightLayout kRowMajor = WeightLayout::kRowMajor;
  EXPECT_EQ(PreferredLayout(CpuTarget::kScalar, WeightType::kQ4_K), kRowMajor);
  for (CpuTarget target : SupportedTargets()) {
    const bool avx2 = target == CpuTarget::kAvx2, avx512 = target == CpuTarget::kAvx512;
    EXPECT_EQ(PreferredLayout(target, WeightType::kQ8_0), avx2     ? WeightLayout::kRowStreams
                                                          : avx512 ? WeightLayout::kRowGroups
                                                                   : kRowMajor);
    for (WeightType float_type : {WeightType::kF16, WeightType::kBF16}) {
      EXPECT_EQ(PreferredLayout(target, float_type), avx512 ? WeightLayout::kRowGroups
                                                     : avx2 ? WeightLayout::kRowStreams
                                                            : kRowMajor);
    }
    EXPECT_EQ(PreferredLayout(target, WeightType::kF32), kRowMajor);
    for (WeightType k_quant : {WeightType::kQ4_K, WeightType::kQ5_K}) {
      EXPECT_EQ(PreferredLayout(target, k_quant), avx512 ? WeightLayout::kRowGroups
                                                  : avx2 ? WeightLayout::kRowStreams
                                                         : kRowMajor);
    }
    EXPECT_EQ(PreferredLayout(target, WeightType::kQ6_K), avx512 ? WeightLayout::kRowGroups
                                                          : avx2 ? WeightLayout::kRowStreams
                                                                 : kRowMajor);
    EXPECT_EQ(PreferredLayout(target, WeightType::kQ5_0),
              avx2 ? WeightLayout::kRowStreams : kRowMajor);
    EXPECT_EQ(PreferredLayout(target, WeightType::kQ4_0), avx2     ? WeightLayout::kRowStreams
                                                          : avx512 ? WeightLayout::kRowGroups
                                                                   : kRowMajor);
  }
  TestWeights q5_0(WeightType::kQ5_0, 16, 64, 302), q4_1(WeightType::kQ4_1, 16, 64, 302);
  EXPECT_THROW(ArrangeRowGroups(q4_1.view, WeightLayout::kRowStreams, q4_1.bytes.data()),
               InternalError);
  EXPECT_THROW(ArrangeRowGroups(q5_0.view, WeightLayout::kRowGroups, q5_0.bytes.data()),
               InternalError);
}

// The bits of the stored matrix from the grouped one: each token alone and in batches (the
// row-group tiles, several calls per group up to kRowGroupMaxTokens, then the panels, reading
// groups back or, where the target interleaves them, straight), on 1 to 3 threads, rows in whole
// groups and not, activations with blocks of zeros.
TEST(KernelRowGroupsTest, GroupedRowsGiveTheStoredRowsBits) {
  const int64_t tokens = kRowGroupMaxTokens + 5;
  for (CpuTarget target : SupportedTargets()) {
    for (const Grouping& grouping : kGroupings) {
      const WeightType type = grouping.type;
      for (int64_t cols : WidthsFor(type)) {
        for (int64_t rows : {int64_t{16}, int64_t{37}, int64_t{67}}) {
          TestWeights w(type, rows, cols, 303);
          std::vector<uint8_t> storage;
          const WeightView grouped = Grouped(w, grouping.layout, storage);
          std::vector<float> x = RandomValues(tokens * cols, 304, 2.0f);
          std::fill(x.begin(), x.begin() + 64, 0.0f);  // zero blocks: signed zeros kept
          for (int threads : {1, 2, 3}) {
            ThreadPool pool(threads);
            for (int64_t batch :
                 {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{6},
                  int64_t{7}, int64_t{8}, int64_t{9}, int64_t{16}, int64_t{17},
                  int64_t{kRowGroupMaxTokens}, int64_t{kRowGroupMaxTokens + 1}, tokens}) {
              std::vector<float> stored(batch * rows, std::nanf("")), read(batch * rows);
              MatMulOnTarget(target, w.view, x.data(), batch, stored.data(), pool);
              MatMulOnTarget(target, grouped, x.data(), batch, read.data(), pool);
              ASSERT_EQ(std::memcmp(stored.data(), read.data(), stored.size() * sizeof(float)), 0)
                  << CpuTargetName(target) << " " << Name(grouping) << " rows " << rows << " cols "
                  << cols << " batch " << batch << " threads " << threads;
            }
          }
        }
      }
    }
  }
}

// One token over many groups, where a target reads them in pairs (two streams per thread): the
// stored rows' bits with every pairing a thread's range makes (an odd group left over, a range
// that starts or ends inside a group, a lone group), on 1 to 4 threads.
TEST(KernelRowGroupsTest, OneTokenOverGroupPairsGivesTheStoredRowsBits) {
  const std::vector<float> x = RandomValues(512, 315, 2.0f);
  using Shape = std::pair<int64_t, int64_t>;  // rows, columns
  const std::vector<Shape> quantized = {
      {32, 512}, {48, 512}, {117, 512}, {16 * 9, 512}, {205, 512}};
  // Float rows also of a last stretch and a last column chunk cut short.
  const std::vector<Shape> floats = {{32, 512}, {48, 512}, {117, 512}, {16 * 9, 200}, {205, 71}};
  for (CpuTarget target : SupportedTargets()) {
    for (const Grouping& grouping : kGroupings) {
      const bool half = grouping.type == WeightType::kF16 || grouping.type == WeightType::kBF16;
      for (const auto& [rows, cols] : half ? floats : quantized) {
        TestWeights w(grouping.type, rows, cols, 316);
        std::vector<uint8_t> storage;
        const WeightView grouped = Grouped(w, grouping.layout, storage);
        for (int threads : {1, 2, 3, 4}) {
          ThreadPool pool(threads);
          std::vector<float> stored(rows, std::nanf("")), read(rows, std::nanf(""));
          MatMulOnTarget(target, w.view, x.data(), 1, stored.data(), pool);
          MatMulOnTarget(target, grouped, x.data(), 1, read.data(), pool);
          ASSERT_EQ(std::memcmp(stored.data(), read.data(), stored.size() * sizeof(float)), 0)
              << CpuTargetName(target) << " " << Name(grouping) << " rows " << rows << " cols "
              << cols << " threads " << threads;
        }
      }
    }
  }
}

// Fused one-token products over grouped and stored matrices whose row counts put group
// boundaries inside the threads' chunks give the bits of each matrix alone.
TEST(KernelRowGroupsTest, FusedProductsOverGroupsMatchEach) {
  const int64_t cols = 512;
  TestWeights q4k(WeightType::kQ4_K, 37, cols, 305), q40(WeightType::kQ4_0, 53, cols, 306),
      q8(WeightType::kQ8_0, 21, cols, 307), q5k(WeightType::kQ5_K, 96, cols, 308),
      q6k(WeightType::kQ6_K, 35, cols, 313), q50(WeightType::kQ5_0, 45, cols, 312);
  std::vector<uint8_t> s4k, s40, s5k, s50, s40s, s8, s8s, s4ks, s5ks, s6k, s6ks;
  const WeightView g4k = Grouped(q4k, WeightLayout::kRowGroups, s4k),
                   g8 = Grouped(q8, WeightLayout::kRowGroups, s8),
                   g6k = Grouped(q6k, WeightLayout::kRowGroups, s6k),
                   g40 = Grouped(q40, WeightLayout::kRowGroups, s40),
                   g5k = Grouped(q5k, WeightLayout::kRowGroups, s5k),
                   g50 = Grouped(q50, WeightLayout::kRowStreams, s50),
                   g40s = Grouped(q40, WeightLayout::kRowStreams, s40s),
                   g8s = Grouped(q8, WeightLayout::kRowStreams, s8s),
                   g4ks = Grouped(q4k, WeightLayout::kRowStreams, s4ks),
                   g5ks = Grouped(q5k, WeightLayout::kRowStreams, s5ks),
                   g6ks = Grouped(q6k, WeightLayout::kRowStreams, s6ks);
  const std::vector<float> x = RandomValues(2 * cols, 309, 2.0f);
  for (CpuTarget target : SupportedTargets()) {
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (int64_t tokens : {int64_t{1}, int64_t{2}}) {
        const WeightView* grouped[] = {&g4k, &q8.view, &g40,  &g5k, &g50, &g40s,
                                       &g8s, &g4ks,    &g5ks, &g8,  &g6k, &g6ks};
        const WeightView* stored[] = {&q4k.view, &q8.view,  &q40.view, &q5k.view,
                                      &q50.view, &q40.view, &q8.view,  &q4k.view,
                                      &q5k.view, &q8.view,  &q6k.view, &q6k.view};
        // Passes of four (the most one pass fuses): the second with the streams layouts, and
        // with both layouts at once; the third and sixth with the K-quants' streams; the fourth
        // and fifth with Q8_0 and Q6_K in groups beside stored rows.
        for (const std::array<int, 4>& fused_set :
             {std::array{0, 1, 2, 3}, std::array{4, 6, 5, 3}, std::array{7, 8, 6, 1},
              std::array{9, 1, 0, 2}, std::array{10, 1, 9, 3}, std::array{11, 7, 2, 8}}) {
          std::vector<std::vector<float>> fused(4), each(4);
          std::vector<MatMulOutput> outputs;
          for (int i = 0; i < 4; ++i) {
            const int m = fused_set[i];
            fused[i].assign(tokens * stored[m]->rows, std::nanf(""));
            each[i].assign(tokens * stored[m]->rows, std::nanf(""));
            outputs.push_back({grouped[m], fused[i].data()});
            MatMulOnTarget(target, *stored[m], x.data(), tokens, each[i].data(), pool);
          }
          MatMulsOnTarget(target, outputs, x.data(), tokens, pool);
          for (int i = 0; i < 4; ++i) {
            ASSERT_EQ(std::memcmp(fused[i].data(), each[i].data(), fused[i].size() * sizeof(float)),
                      0)
                << CpuTargetName(target) << " threads " << threads << " tokens " << tokens
                << " matrix " << fused_set[i];
          }
        }
      }
    }
  }
}

TEST(KernelRowGroupsTest, DequantizedRowsAsStored) {
  for (const Grouping& grouping : kGroupings) {
    const int64_t rows = 35, cols = 256;
    TestWeights w(grouping.type, rows, cols, 310);
    std::vector<uint8_t> storage;
    const WeightView grouped = Grouped(w, grouping.layout, storage);
    std::vector<float> a(cols), b(cols);
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(w.view, r, a.data());
      DequantizeRow(grouped, r, b.data());
      ASSERT_EQ(std::memcmp(a.data(), b.data(), cols * sizeof(float)), 0);
    }
  }
}

}  // namespace
}  // namespace reprise::kernels
