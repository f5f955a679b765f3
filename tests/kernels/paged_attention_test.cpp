#include "kernels/paged_attention.h"

#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/cpu_target.h"
#include "kernels/weight_type.h"
#include "test_util.h"

namespace reprise::kernels {
namespace {

using testing::RandomValues;

// A small pool of blocks with the sequence's K/V stored through StoreKv.
struct TestCache {
  PagedKv kv;
  std::vector<uint8_t> storage;  // [num_blocks][BlockBytes]

  TestCache(KvType type, int num_blocks, int block_size, int n_layer = 2, int n_kv_head = 2,
            int head_dim = 64, uint8_t garbage = 0xAB) {
    kv = PagedKv{.base = nullptr,
                 .type = type,
                 .n_layer = n_layer,
                 .n_kv_head = n_kv_head,
                 .head_dim = head_dim,
                 .block_size = block_size};
    storage.assign(kv.BlockBytes() * num_blocks, garbage);  // garbage in unused slots
    kv.base = storage.data();
  }

  // Stores positions [0, n) of k, v: [n][n_kv_head][head_dim] for `layer` through `table`.
  void Fill(int layer, const std::vector<int32_t>& table, const std::vector<float>& k,
            const std::vector<float>& v, int n) {
    const int64_t stride = static_cast<int64_t>(kv.n_kv_head) * kv.head_dim;
    for (int p = 0; p < n; ++p) {
      StoreKv(kv, layer, table[p / kv.block_size], p % kv.block_size, k.data() + p * stride,
              v.data() + p * stride);
    }
  }
};

std::vector<CpuTarget> Targets() {
  std::vector<CpuTarget> targets;
  for (CpuTarget t : {CpuTarget::kScalar, CpuTarget::kAvx2, CpuTarget::kAvx512}) {
    if (CpuTargetSupported(t)) targets.push_back(t);
  }
  return targets;
}

// A value as the KV type keeps it (q8 is compared with the unrounded value, within a tolerance).
float Rounded(float value, KvType type) {
  return type == KvType::kF16 ? HalfToFloat(FloatToHalf(value)) : value;
}

// Naive two-pass softmax attention in double over K/V rounded to the KV type.
std::vector<float> NaiveAttention(const std::vector<float>& q, int group, int head_dim,
                                  const std::vector<float>& k, const std::vector<float>& v,
                                  int n_kv_head, int kv_head, int n, float scale, KvType type) {
  std::vector<float> out(group * head_dim);
  for (int g = 0; g < group; ++g) {
    std::vector<double> scores(n);
    double max = -1e300;
    for (int p = 0; p < n; ++p) {
      double s = 0.0;
      for (int d = 0; d < head_dim; ++d) {
        s += q[g * head_dim + d] *
             double(Rounded(k[(p * n_kv_head + kv_head) * head_dim + d], type));
      }
      scores[p] = s * scale;
      max = std::max(max, scores[p]);
    }
    double total = 0.0;
    for (double& s : scores) total += (s = std::exp(s - max));
    for (int d = 0; d < head_dim; ++d) {
      double acc = 0.0;
      for (int p = 0; p < n; ++p) {
        acc += scores[p] * Rounded(v[(p * n_kv_head + kv_head) * head_dim + d], type);
      }
      out[g * head_dim + d] = static_cast<float>(acc / total);
    }
  }
  return out;
}

// Blocks of a sequence scattered over a pool of 2 * num_blocks: 2k + 1 for even k, then the even
// ids from the top down.
std::vector<int32_t> ScatteredTable(int num_blocks) {
  std::vector<int32_t> table(num_blocks);
  for (int k = 0; k < num_blocks; ++k) {
    table[k] = k % 2 == 0 ? k + 1 : 2 * num_blocks - 1 - k;
  }
  return table;
}

TEST(KernelPagedAttentionTest, MatchesNaiveReference) {
  const int n_kv_head = 2, group = 4;
  // Keys are stored [head_dim][block_size]: block sizes of less than a vector of slots, one, and
  // several vectors.
  for (CpuTarget target : Targets())
    for (int block_size : {16, 4, 64})
      for (int head_dim : {64, 80, 36})  // 36: a partial last chunk on every target
        for (KvType type : {KvType::kF32, KvType::kF16, KvType::kQ8}) {
          // q8 against the reference over the unrounded K/V: its 8-bit codes of keys, values,
          // queries and probabilities move an output by up to about 1% of the values' range.
          const double tolerance = type == KvType::kQ8 ? 2e-2 : 2e-5;
          for (int n : {1, 15, 16, 17, 100}) {
            const int num_blocks = (100 + block_size - 1) / block_size;
            TestCache cache(type, 2 * num_blocks, block_size, 2, n_kv_head, head_dim);
            std::vector<int32_t> table = ScatteredTable(num_blocks);
            std::vector<float> k = RandomValues(n * n_kv_head * head_dim, 10, 2.0f);
            std::vector<float> v = RandomValues(n * n_kv_head * head_dim, 11);
            cache.Fill(1, table, k, v, n);
            std::vector<float> q = RandomValues(group * head_dim, 12, 2.0f);
            const float scale = 1.0f / std::sqrt(float(head_dim));
            for (int kv_head = 0; kv_head < n_kv_head; ++kv_head) {
              std::vector<float> out(group * head_dim);
              PagedAttentionOnTarget(target, cache.kv, 1, kv_head, q.data(), group, table, n, scale,
                                     out.data());
              std::vector<float> expected =
                  NaiveAttention(q, group, head_dim, k, v, n_kv_head, kv_head, n, scale, type);
              for (int i = 0; i < group * head_dim; ++i) {
                ASSERT_NEAR(out[i], expected[i], tolerance)
                    << CpuTargetName(target) << " block " << block_size << " head_dim " << head_dim
                    << " n " << n << " head " << kv_head << " type " << int(type);
              }
            }
          }
        }
}

// The same positions stored in other blocks, with other garbage around, give the same bits.
TEST(KernelPagedAttentionTest, BitsIndependentOfWhereBlocksLive) {
  const int head_dim = 64, n_kv_head = 2, group = 2, block_size = 16, n = 70;
  for (CpuTarget target : Targets())
    for (KvType type : {KvType::kF32, KvType::kF16, KvType::kQ8}) {
      std::vector<float> k = RandomValues(n * n_kv_head * head_dim, 20);
      std::vector<float> v = RandomValues(n * n_kv_head * head_dim, 21);
      std::vector<float> q = RandomValues(group * head_dim, 22);
      TestCache a(type, 10, block_size), b(type, 10, block_size);
      std::vector<int32_t> table_a = {0, 1, 2, 3, 4}, table_b = {9, 3, 6, 0, 5};
      a.Fill(0, table_a, k, v, n);
      b.Fill(0, table_b, k, v, n);
      std::vector<float> out_a(group * head_dim), out_b(group * head_dim);
      PagedAttentionOnTarget(target, a.kv, 0, 1, q.data(), group, table_a, n, 0.125f, out_a.data());
      PagedAttentionOnTarget(target, b.kv, 0, 1, q.data(), group, table_b, n, 0.125f, out_b.data());
      EXPECT_EQ(std::memcmp(out_a.data(), out_b.data(), out_a.size() * sizeof(float)), 0);
      // A head's result does not depend on the other heads of its group either.
      std::vector<float> alone(head_dim);
      PagedAttentionOnTarget(target, a.kv, 0, 1, q.data() + head_dim, 1, table_a, n, 0.125f,
                             alone.data());
      EXPECT_EQ(std::memcmp(alone.data(), out_a.data() + head_dim, head_dim * sizeof(float)), 0);
    }
}

// A run of consecutive tokens gives each token the bits it gets alone, for any run start and
// length (across block boundaries, longer than one kernel call), group size and block table,
// with NaN in every slot no query may read.
TEST(KernelPagedAttentionTest, TokensMatchSingleQueriesBitForBit) {
  const int n_kv_head = 2, n = 150;
  for (CpuTarget target : Targets())
    for (KvType type : {KvType::kF32, KvType::kF16, KvType::kQ8})
      for (auto [head_dim, block_size] :
           {std::pair{64, 16}, {80, 16}, {36, 12}, {64, 40}, {64, 4}, {80, 8}, {64, 1}})
        for (int group : {1, 3, 4, 5}) {
          if (type == KvType::kQ8 && block_size % 4 != 0) continue;  // q8 takes multiples of 4
          const int num_blocks = (n + block_size - 1) / block_size;
          TestCache cache(type, 2 * num_blocks, block_size, 2, n_kv_head, head_dim,
                          0xFF);  // NaN garbage
          std::vector<int32_t> table = ScatteredTable(num_blocks);
          std::vector<float> k = RandomValues(n * n_kv_head * head_dim, 60, 2.0f);
          std::vector<float> v = RandomValues(n * n_kv_head * head_dim, 61);
          cache.Fill(1, table, k, v, n);
          const int64_t q_stride = static_cast<int64_t>(group + 1) * head_dim;  // strided rows
          std::vector<float> q = RandomValues(n * q_stride, 62, 2.0f);
          // Temperature 40: scores so spread that most probabilities are denormal or 0.
          for (float temperature : {1.0f, 40.0f})
            for (auto [first, count] : {std::pair{0, 1},
                                        {0, 40},
                                        {5, 11},
                                        {15, 2},
                                        {16, 16},
                                        {3, 120},
                                        {130, 20},
                                        {149, 1}}) {
              const float scale = temperature / std::sqrt(float(head_dim));
              std::vector<float> out(count * q_stride, -7.0f);
              PagedAttentionTokensOnTarget(target, cache.kv, 1, 1, q.data() + first * q_stride,
                                           q_stride, group, table, first, count, scale, out.data(),
                                           q_stride);
              for (int t = 0; t < count; ++t) {
                std::vector<float> alone(group * head_dim);
                PagedAttentionOnTarget(target, cache.kv, 1, 1, q.data() + (first + t) * q_stride,
                                       group, table, first + t + 1, scale, alone.data());
                ASSERT_EQ(std::memcmp(alone.data(), out.data() + t * q_stride,
                                      alone.size() * sizeof(float)),
                          0)
                    << CpuTargetName(target) << " type " << int(type) << " group " << group
                    << " head_dim " << head_dim << " block " << block_size << " run " << first
                    << "+" << count << " token " << t << " temperature " << temperature;
                for (int i = group * head_dim; i < q_stride; ++i) {  // the gap is not written
                  ASSERT_EQ(out[t * q_stride + i], -7.0f);
                }
              }
            }
        }
}

// Attention flushes denormals while it runs (they cost a microcode assist per operation), and
// gives the thread its floating-point mode back, on every target and in the merge.
TEST(KernelPagedAttentionTest, LeavesTheThreadsFloatingPointModeAsItFoundIt) {
  const int head_dim = 64, group = 2, block_size = 16, n = kAttentionSplitPositions + 40;
  const int num_blocks = (n + block_size - 1) / block_size;
  TestCache cache(KvType::kQ8, num_blocks, block_size, 1, 1, head_dim);
  std::vector<int32_t> table(num_blocks);
  for (int b = 0; b < num_blocks; ++b) table[b] = b;
  cache.Fill(0, table, RandomValues(n * head_dim, 70), RandomValues(n * head_dim, 71), n);
  std::vector<float> q = RandomValues(group * head_dim, 72), out(group * head_dim);
  const unsigned mode = _mm_getcsr();
  for (CpuTarget target : Targets()) {
    PagedAttentionOnTarget(target, cache.kv, 0, 0, q.data(), group, table, n, 30.0f, out.data());
    EXPECT_EQ(_mm_getcsr(), mode) << CpuTargetName(target);
  }
}

// Long contexts are attended in splits of kAttentionSplitPositions positions merged in order:
// still close to the two-pass reference, and a run crossing split boundaries gives each token
// the bits it gets alone.
TEST(KernelPagedAttentionTest, LongContextSplitsMatchReferenceAndSingleQueries) {
  const int n_kv_head = 2, head_dim = 64, group = 3;
  for (CpuTarget target : Targets())
    for (KvType type : {KvType::kF16, KvType::kQ8})
      for (int block_size : {16, 256}) {
        const int n = 2 * kAttentionSplitPositions + kAttentionSplitPositions / 2;  // three splits
        const int num_blocks = (n + block_size - 1) / block_size;
        ASSERT_EQ(AttentionSplits(block_size, n), 3);
        ASSERT_EQ(AttentionSplits(block_size, kAttentionSplitPositions), 1);
        TestCache cache(type, 2 * num_blocks, block_size, 1, n_kv_head, head_dim, 0xFF);
        std::vector<int32_t> table = ScatteredTable(num_blocks);
        std::vector<float> k = RandomValues(n * n_kv_head * head_dim, 80, 2.0f);
        std::vector<float> v = RandomValues(n * n_kv_head * head_dim, 81);
        cache.Fill(0, table, k, v, n);
        const int64_t row = static_cast<int64_t>(group) * head_dim;
        std::vector<float> q = RandomValues(n * row, 82, 2.0f);
        const float scale = 1.0f / std::sqrt(float(head_dim));
        // A query of three splits against the reference.
        std::vector<float> last(row);
        PagedAttentionOnTarget(target, cache.kv, 0, 1, q.data() + (n - 1) * row, group, table, n,
                               scale, last.data());
        std::vector<float> q_last(q.begin() + (n - 1) * row, q.begin() + n * row);
        std::vector<float> expected =
            NaiveAttention(q_last, group, head_dim, k, v, n_kv_head, 1, n, scale, type);
        const double tolerance = type == KvType::kQ8 ? 2e-2 : 2e-5;
        for (int i = 0; i < row; ++i) ASSERT_NEAR(last[i], expected[i], tolerance) << i;
        // Runs around the split boundaries: each token as alone.
        const int boundary = AttentionSplitBlocks(block_size) * block_size;
        for (auto [first, count] : {std::pair{boundary - 5, 10},
                                    {0, boundary + 3},
                                    {2 * boundary - 1, 2},
                                    {n - 40, 40}}) {
          std::vector<float> out(count * row);
          PagedAttentionTokensOnTarget(target, cache.kv, 0, 1, q.data() + first * row, row, group,
                                       table, first, count, scale, out.data(), row);
          for (int t = 0; t < count; t += (t < 8 || count - t < 8) ? 1 : 37) {
            std::vector<float> alone(row);
            PagedAttentionOnTarget(target, cache.kv, 0, 1, q.data() + (first + t) * row, group,
                                   table, first + t + 1, scale, alone.data());
            ASSERT_EQ(std::memcmp(alone.data(), out.data() + t * row, row * sizeof(float)), 0)
                << CpuTargetName(target) << " type " << int(type) << " block " << block_size
                << " run " << first << "+" << count << " token " << t;
          }
        }
      }
}

// Splits computed separately (as threads do, in any order) and merged give the one-call bits.
TEST(KernelPagedAttentionTest, PartialsMergedInAnyComputeOrderMatchOneCall) {
  const int n_kv_head = 1, group = 2, block_size = 16;
  const int n = kAttentionSplitPositions * 3 + 17;
  const int num_blocks = (n + block_size - 1) / block_size;
  // 72: a head's last 16 lanes partly outside it (masked in the AVX-512 kernels and merge).
  for (int head_dim : {80, 72})
    for (CpuTarget target : Targets())
      for (KvType type : {KvType::kF32, KvType::kQ8}) {
        TestCache cache(type, num_blocks, block_size, 1, n_kv_head, head_dim);
        std::vector<int32_t> table(num_blocks);
        for (int b = 0; b < num_blocks; ++b) table[b] = b;
        std::vector<float> k = RandomValues(n * head_dim, 90, 2.0f);
        std::vector<float> v = RandomValues(n * head_dim, 91);
        cache.Fill(0, table, k, v, n);
        const int64_t row = static_cast<int64_t>(group) * head_dim;
        // The first two tokens end before the last split: it leaves their rows acc 0, max -inf and
        // sum 0 (the merge does not read them).
        const int first = 3 * kAttentionSplitPositions - 2, count = n - first;
        const int short_rows = 2 * group;
        std::vector<float> q = RandomValues(count * row, 92, 2.0f);
        std::vector<float> one_call(count * row);
        PagedAttentionTokensOnTarget(target, cache.kv, 0, 0, q.data(), row, group, table, first,
                                     count, 0.1f, one_call.data(), row);
        const int splits = AttentionSplits(block_size, n);
        ASSERT_EQ(splits, 4);
        // The partials' buffers hold what they held before (the engine reuses them every layer):
        // a kernel that read its out rows before writing them would carry the NaNs into the result.
        std::vector<std::vector<float>> acc(
            splits, std::vector<float>(count * row, std::numeric_limits<float>::quiet_NaN()));
        std::vector<std::vector<float>> stats(splits, std::vector<float>(2 * count * group));
        std::vector<AttentionPartial> partials(splits);
        for (int s = splits - 1; s >= 0; --s) {  // last split first
          partials[s] = {.acc = acc[s].data(),
                         .acc_stride = row,
                         .max = stats[s].data(),
                         .sum = stats[s].data() + count * group};
          PagedAttentionPartialOnTarget(target, cache.kv, 0, 0, q.data(), row, group, table, first,
                                        count, 0.1f, s, partials[s]);
        }
        // Every target's merge gives the same bits.
        for (CpuTarget merge_target : Targets()) {
          std::vector<float> merged(count * row);
          MergeAttentionPartialsOnTarget(merge_target, cache.kv, group, first, count, partials,
                                         merged.data(), row);
          EXPECT_EQ(std::memcmp(merged.data(), one_call.data(), merged.size() * sizeof(float)), 0)
              << CpuTargetName(target) << " type " << int(type) << " head_dim " << head_dim
              << " merged on " << CpuTargetName(merge_target);
        }
        const AttentionPartial& last = partials[splits - 1];
        for (int r = 0; r < short_rows; ++r) {
          EXPECT_EQ(last.max[r], -std::numeric_limits<float>::infinity()) << r;
          EXPECT_EQ(last.sum[r], 0.0f) << r;
          for (int d = 0; d < head_dim; ++d) ASSERT_EQ(last.acc[r * head_dim + d], 0.0f) << r;
        }
      }
}

// Queries prepared once (as the engine does, for all heads of each token) give every target
// the same bytes, and a run attended with them has the bits of one that prepares its own, in one
// call and in splits.
TEST(KernelPagedAttentionTest, PreparedQueriesGiveTheBitsOfUnpreparedOnes) {
  const int n_kv_head = 2, head_dim = 96, group = 3, block_size = 16;
  const int n_head = n_kv_head * group, count = 5;
  const int n = kAttentionSplitPositions * 2 + 9;
  const int num_blocks = (n + block_size - 1) / block_size;
  TestCache cache(KvType::kQ8, num_blocks, block_size, 1, n_kv_head, head_dim);
  std::vector<int32_t> table(num_blocks);
  for (int b = 0; b < num_blocks; ++b) table[b] = b;
  cache.Fill(0, table, RandomValues(n * n_kv_head * head_dim, 93, 2.0f),
             RandomValues(n * n_kv_head * head_dim, 94), n);
  const int64_t q_dim = static_cast<int64_t>(n_head) * head_dim;
  std::vector<float> q = RandomValues(count * q_dim, 95, 3.0f);
  const size_t head_bytes = PreparedQueryBytes(cache.kv);
  ASSERT_GT(head_bytes, 0u);
  EXPECT_EQ(PreparedQueryBytes(TestCache(KvType::kF16, 1, block_size, 1, 1, head_dim).kv), 0u);
  const auto token_bytes = static_cast<int64_t>(n_head * head_bytes);
  auto prepare = [&](CpuTarget target) {
    std::vector<float> storage(count * token_bytes / sizeof(float));  // aligned for floats
    auto* bytes = reinterpret_cast<std::byte*>(storage.data());
    for (int t = 0; t < count; ++t) {
      PrepareQueriesOnTarget(target, cache.kv, q.data() + t * q_dim, n_head, 0.1f,
                             bytes + t * token_bytes);
    }
    return storage;
  };
  const std::vector<float> portable = prepare(CpuTarget::kScalar);
  for (CpuTarget target : Targets()) {
    const std::vector<float> prepared_storage = prepare(target);
    EXPECT_EQ(std::memcmp(prepared_storage.data(), portable.data(), count * token_bytes), 0)
        << CpuTargetName(target);
    const int kv_head = 1;
    const int64_t head_offset = static_cast<int64_t>(kv_head) * group * head_dim;
    const PreparedQueries prepared{
        .data = reinterpret_cast<const std::byte*>(prepared_storage.data()) +
                kv_head * group * head_bytes,
        .stride = token_bytes};
    for (int first : {0, 40, n - count}) {  // one split, then three
      std::vector<float> own(count * q_dim, -1.0f), with(count * q_dim, -1.0f);
      PagedAttentionTokensOnTarget(target, cache.kv, 0, kv_head, q.data() + head_offset, q_dim,
                                   group, table, first, count, 0.1f, own.data() + head_offset,
                                   q_dim);
      PagedAttentionTokensOnTarget(target, cache.kv, 0, kv_head, q.data() + head_offset, q_dim,
                                   group, table, first, count, 0.1f, with.data() + head_offset,
                                   q_dim, prepared);
      EXPECT_EQ(std::memcmp(own.data(), with.data(), own.size() * sizeof(float)), 0)
          << CpuTargetName(target) << " from position " << first;
    }
    // One split's partial state, as the engine's items compute it.
    const int first = n - count, split = 1;
    std::vector<float> acc_own(count * q_dim), acc_with(count * q_dim);
    std::vector<float> stats_own(2 * count * group), stats_with(2 * count * group);
    const AttentionPartial own{.acc = acc_own.data(),
                               .acc_stride = q_dim,
                               .max = stats_own.data(),
                               .sum = stats_own.data() + count * group};
    const AttentionPartial with{.acc = acc_with.data(),
                                .acc_stride = q_dim,
                                .max = stats_with.data(),
                                .sum = stats_with.data() + count * group};
    PagedAttentionPartialOnTarget(target, cache.kv, 0, kv_head, q.data() + head_offset, q_dim,
                                  group, table, first, count, 0.1f, split, own);
    PagedAttentionPartialOnTarget(target, cache.kv, 0, kv_head, q.data() + head_offset, q_dim,
                                  group, table, first, count, 0.1f, split, with, prepared);
    EXPECT_EQ(acc_own, acc_with) << CpuTargetName(target);
    EXPECT_EQ(stats_own, stats_with) << CpuTargetName(target);
  }
  // Prepared queries are refused for a type without a prepared form.
  TestCache f16(KvType::kF16, num_blocks, block_size, 1, n_kv_head, head_dim);
  std::vector<float> out(count * q_dim);
  std::vector<float> storage(count * token_bytes / sizeof(float));
  EXPECT_THROW(PagedAttentionTokens(
                   f16.kv, 0, 0, q.data(), q_dim, group, table, 0, count, 0.1f, out.data(), q_dim,
                   {reinterpret_cast<const std::byte*>(storage.data()), token_bytes}),
               std::exception);
}

TEST(KernelPagedAttentionTest, F16CloseToF32) {
  const int head_dim = 128, n_kv_head = 1, group = 1, block_size = 32, n = 200;
  std::vector<float> k = RandomValues(n * n_kv_head * head_dim, 30);
  std::vector<float> v = RandomValues(n * n_kv_head * head_dim, 31);
  std::vector<float> q = RandomValues(group * head_dim, 32);
  TestCache f32(KvType::kF32, 7, block_size, 1, 1, head_dim);
  TestCache f16(KvType::kF16, 7, block_size, 1, 1, head_dim);
  std::vector<int32_t> table = {6, 5, 4, 3, 2, 1, 0};
  f32.Fill(0, table, k, v, n);
  f16.Fill(0, table, k, v, n);
  for (CpuTarget target : Targets()) {
    std::vector<float> out32(head_dim), out16(head_dim);
    PagedAttentionOnTarget(target, f32.kv, 0, 0, q.data(), group, table, n, 0.09f, out32.data());
    PagedAttentionOnTarget(target, f16.kv, 0, 0, q.data(), group, table, n, 0.09f, out16.data());
    for (int d = 0; d < head_dim; ++d) EXPECT_NEAR(out16[d], out32[d], 2e-3);
  }
}

// q8 keeps 8-bit codes: on a head of 128 with several blocks, within about 1% of f32's output
// (here the largest difference is printed, beside f16's).
TEST(KernelPagedAttentionTest, Q8CloseToF32) {
  const int head_dim = 128, n_kv_head = 1, group = 4, block_size = 16, n = 300;
  std::vector<float> k = RandomValues(n * n_kv_head * head_dim, 33, 2.0f);
  std::vector<float> v = RandomValues(n * n_kv_head * head_dim, 34);
  std::vector<float> q = RandomValues(group * head_dim, 35, 2.0f);
  const int num_blocks = (n + block_size - 1) / block_size;
  std::vector<int32_t> table = ScatteredTable(num_blocks);
  TestCache f32(KvType::kF32, 2 * num_blocks, block_size, 1, 1, head_dim);
  TestCache q8(KvType::kQ8, 2 * num_blocks, block_size, 1, 1, head_dim);
  f32.Fill(0, table, k, v, n);
  q8.Fill(0, table, k, v, n);
  const float scale = 1.0f / std::sqrt(float(head_dim));
  for (CpuTarget target : Targets()) {
    std::vector<float> out32(group * head_dim), out8(group * head_dim);
    PagedAttentionOnTarget(target, f32.kv, 0, 0, q.data(), group, table, n, scale, out32.data());
    PagedAttentionOnTarget(target, q8.kv, 0, 0, q.data(), group, table, n, scale, out8.data());
    double largest = 0.0;
    for (int i = 0; i < group * head_dim; ++i) {
      largest = std::max(largest, double(std::fabs(out8[i] - out32[i])));
      EXPECT_NEAR(out8[i], out32[i], 5e-3) << CpuTargetName(target) << " " << i;
    }
    std::cout << CpuTargetName(target) << ": q8 differs from f32 by at most " << largest << "\n";
  }
}

// A q8 slot keeps each key group's and the value's largest magnitude at code +-127, every
// element within half a step of its value, and an all-zero row as zeros.
TEST(KernelPagedAttentionTest, StoreKvQ8CodesWithinHalfAStep) {
  const int head_dim = 40, block_size = 8;  // two key groups: 32 and 8 dimensions
  TestCache cache(KvType::kQ8, 2, block_size, 1, 1, head_dim);
  std::vector<float> k = RandomValues(head_dim, 42, 3.0f), v = RandomValues(head_dim, 43);
  const int slot = 5;
  StoreKv(cache.kv, 0, 1, slot, k.data(), v.data());
  const uint8_t* k_plane = cache.kv.Plane(1, 0, 0, 0);
  const uint8_t* v_plane = cache.kv.Plane(1, 0, 1, 0);
  const float* k_scales = reinterpret_cast<const float*>(k_plane + head_dim * block_size);
  const float* v_scales = reinterpret_cast<const float*>(v_plane + head_dim * block_size);
  for (int g = 0; g < 2; ++g) {
    const float step = k_scales[g * block_size + slot];
    int largest = 0;
    for (int d = 32 * g; d < std::min(head_dim, 32 * g + 32); ++d) {
      const int code = int(k_plane[((d / 4) * block_size + slot) * 4 + d % 4]) - 128;
      largest = std::max(largest, std::abs(code));
      EXPECT_LE(std::fabs(code * step - k[d]), 0.5f * step * 1.0001f) << d;
    }
    EXPECT_EQ(largest, 127) << g;
  }
  const float step = v_scales[slot];
  int largest = 0;
  for (int d = 0; d < head_dim; ++d) {
    const int code = int(int8_t(v_plane[((slot / 4) * head_dim + d) * 4 + slot % 4]));
    largest = std::max(largest, std::abs(code));
    EXPECT_LE(std::fabs(code * step - v[d]), 0.5f * step * 1.0001f) << d;
  }
  EXPECT_EQ(largest, 127);
  std::vector<float> zeros(head_dim, 0.0f);
  StoreKv(cache.kv, 0, 0, 0, zeros.data(), zeros.data());
  const uint8_t* zero_plane = cache.kv.Plane(0, 0, 0, 0);
  EXPECT_EQ(reinterpret_cast<const float*>(zero_plane + head_dim * block_size)[0], 0.0f);
  for (int d = 0; d < head_dim; ++d) EXPECT_EQ(zero_plane[(d / 4) * block_size * 4 + d % 4], 128);
  // Its layout needs head_dim and block size in fours.
  TestCache odd(KvType::kQ8, 1, 6, 1, 1, 8);
  EXPECT_ANY_THROW(StoreKv(odd.kv, 0, 0, 0, zeros.data(), zeros.data()));
}

// Infinities and NaN in K, V or the query (a diverging model) are stored and attended without
// undefined behaviour (the sanitizer builds check), and rows that never see them keep finite
// outputs.
TEST(KernelPagedAttentionTest, Q8TakesNonFiniteValues) {
  const int head_dim = 64, block_size = 16, n = 40;
  TestCache cache(KvType::kQ8, 3, block_size, 1, 1, head_dim);
  std::vector<float> k = RandomValues(n * head_dim, 44), v = RandomValues(n * head_dim, 45);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  k[30 * head_dim + 3] = inf;
  k[31 * head_dim + 40] = -inf;
  v[32 * head_dim + 7] = nan;
  k[33 * head_dim + 9] = nan;
  std::vector<int32_t> table = {2, 0, 1};
  cache.Fill(0, table, k, v, n);
  std::vector<float> q = RandomValues(2 * head_dim, 46);
  q[head_dim + 5] = nan;  // the second row's query
  for (CpuTarget target : Targets()) {
    std::vector<float> out(2 * head_dim);
    // Positions before 30 only: both rows finite unless their own query is not.
    PagedAttentionOnTarget(target, cache.kv, 0, 0, q.data(), 1, table, 30, 0.125f, out.data());
    for (int d = 0; d < head_dim; ++d) EXPECT_TRUE(std::isfinite(out[d])) << CpuTargetName(target);
    PagedAttentionOnTarget(target, cache.kv, 0, 0, q.data() + head_dim, 1, table, n, 0.125f,
                           out.data() + head_dim);
    PagedAttentionOnTarget(target, cache.kv, 0, 0, q.data(), 1, table, n, 0.125f, out.data());
  }
}

TEST(KernelPagedAttentionTest, StoreKvRoundsToKvType) {
  TestCache cache(KvType::kF16, 2, 4, 1, 1, 8);
  std::vector<float> k = RandomValues(8, 40), v = RandomValues(8, 41);
  StoreKv(cache.kv, 0, 1, 3, k.data(), v.data());
  const uint16_t* stored = reinterpret_cast<const uint16_t*>(cache.kv.Plane(1, 0, 1, 0)) + 3 * 8;
  for (int d = 0; d < 8; ++d) EXPECT_EQ(stored[d], FloatToHalf(v[d]));
  EXPECT_ANY_THROW(StoreKv(cache.kv, 0, 1, 4, k.data(), v.data()));
}

TEST(KernelPagedAttentionTest, SinglePositionReturnsItsValue) {
  TestCache cache(KvType::kF32, 1, 16, 1, 1, 8);
  std::vector<float> k = RandomValues(8, 50), v = RandomValues(8, 51), q = RandomValues(8, 52);
  StoreKv(cache.kv, 0, 0, 0, k.data(), v.data());
  std::vector<int32_t> table = {0};
  for (CpuTarget target : Targets()) {
    std::vector<float> out(8);
    PagedAttentionOnTarget(target, cache.kv, 0, 0, q.data(), 1, table, 1, 0.3f, out.data());
    EXPECT_EQ(out, v) << CpuTargetName(target);
  }
}

TEST(KernelPagedAttentionTest, Q8SinglePositionReturnsItsValueWithinAStep) {
  TestCache cache(KvType::kQ8, 1, 16, 1, 1, 8);
  std::vector<float> k = RandomValues(8, 53), v = RandomValues(8, 54), q = RandomValues(8, 55);
  StoreKv(cache.kv, 0, 0, 0, k.data(), v.data());
  const float step = *reinterpret_cast<const float*>(cache.kv.Plane(0, 0, 1, 0) + 8 * 16);
  std::vector<int32_t> table = {0};
  for (CpuTarget target : Targets()) {
    std::vector<float> out(8);
    PagedAttentionOnTarget(target, cache.kv, 0, 0, q.data(), 1, table, 1, 0.3f, out.data());
    for (int d = 0; d < 8; ++d) EXPECT_NEAR(out[d], v[d], 0.51f * step) << CpuTargetName(target);
  }
}

}  // namespace
}  // namespace reprise::kernels
