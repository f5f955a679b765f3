#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "kernels/cpu_target.h"
#include "kernels/matmul_kernels.h"
#include "kernels/unpacked.h"
#include "test_util.h"

namespace reprise::kernels {
namespace {

using testing::kAllTypes;
using testing::RandomValues;
using testing::TestWeights;

std::vector<CpuTarget> SupportedTargets() {
  std::vector<CpuTarget> targets;
  for (CpuTarget t : {CpuTarget::kScalar, CpuTarget::kAvx2, CpuTarget::kAvx512}) {
    if (CpuTargetSupported(t)) targets.push_back(t);
  }
  return targets;
}

// Columns for a type: an odd number of blocks where the type allows it.
int64_t ColsFor(WeightType type) { return testing::IsKQuant(type) ? 768 : 96; }

// sum_c |x[t][c] * w[r][c]|: the scale of rounding errors in y[t][r]. [tokens][rows]
std::vector<double> Magnitudes(const WeightView& w, const std::vector<float>& x, int64_t tokens) {
  std::vector<double> out(tokens * w.rows);
  std::vector<float> row(w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    DequantizeRow(w, r, row.data());
    for (int64_t t = 0; t < tokens; ++t) {
      double sum = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) sum += std::fabs(x[t * w.cols + c] * double(row[c]));
      out[t * w.rows + r] = sum;
    }
  }
  return out;
}

std::vector<float> RunMatMul(CpuTarget target, const WeightView& w, const std::vector<float>& x,
                             int64_t tokens, int threads) {
  ThreadPool pool(threads);
  std::vector<float> y(tokens * w.rows, std::nanf(""));
  MatMulOnTarget(target, w, x.data(), tokens, y.data(), pool);
  return y;
}

// Each token of x multiplied alone, on `threads` threads, gives exactly its row of `batch` (the
// same tokens' product in one call): the exactness promise. `what` names the case in failures.
void ExpectEachTokenAloneGives(CpuTarget target, const WeightView& w, const std::vector<float>& x,
                               const std::vector<float>& batch, int threads,
                               const std::string& what) {
  ThreadPool pool(threads);
  const int64_t tokens = static_cast<int64_t>(x.size()) / w.cols;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<float> one(w.rows);
    MatMulOnTarget(target, w, x.data() + t * w.cols, 1, one.data(), pool);
    ASSERT_EQ(std::memcmp(one.data(), batch.data() + t * w.rows, w.rows * sizeof(float)), 0)
        << CpuTargetName(target) << " " << WeightTypeName(w.type) << " " << what << " token " << t;
  }
}

TEST(KernelMatMulTest, EveryTargetMatchesReference) {
  const int64_t tokens = 7, rows = 37;
  for (CpuTarget target : SupportedTargets()) {
    for (WeightType type : kAllTypes) {
      const int64_t cols = ColsFor(type);
      TestWeights w(type, rows, cols, 100);
      std::vector<float> x = RandomValues(tokens * cols, 200, 2.0f);
      std::vector<float> reference(tokens * rows);
      MatMulReference(w.view, x.data(), tokens, reference.data());
      std::vector<double> magnitude = Magnitudes(w.view, x, tokens);
      std::vector<float> y = RunMatMul(target, w.view, x, tokens, 2);
      // Quantized types quantize activations to int8 per 32: a looser bound.
      const double tolerance =
          (type == WeightType::kF32 || type == WeightType::kF16 || type == WeightType::kBF16)
              ? 1e-5
              : 1e-2;
      for (int64_t i = 0; i < tokens * rows; ++i) {
        ASSERT_NEAR(y[i], reference[i], tolerance * magnitude[i] + 1e-6)
            << CpuTargetName(target) << " " << WeightTypeName(type) << " index " << i;
      }
    }
  }
}

// x quantized as `target` quantizes it for w, and back to floats (q * d).
std::vector<float> AsTargetQuantizes(CpuTarget target, const WeightView& w,
                                     const std::vector<float>& x) {
  const int64_t cols = w.cols, tokens = static_cast<int64_t>(x.size()) / cols;
  if (!IsQuantized(w.type)) return x;
  const bool super_blocks = ActivationFormFor(target, w) == ActivationForm::kPerSuperBlock;
  const int64_t per_scale = super_blocks ? 256 : 32;
  std::vector<int8_t> q(cols);
  std::vector<float> d(cols / 16), sum(cols / 32), out(x.size());
  std::vector<int16_t> group_sum(cols / 16);
  for (int64_t t = 0; t < tokens; ++t) {
    if (super_blocks) {
      QuantizeActivationRowPerSuperBlock(x.data() + t * cols, cols, q.data(), d.data(),
                                         group_sum.data());
    } else {
      QuantizeActivationRow(x.data() + t * cols, cols, q.data(), d.data(), sum.data());
    }
    for (int64_t c = 0; c < cols; ++c) {
      // Per block, d holds a scale per 16 (both equal); per super-block, one per 256.
      const float scale = super_blocks ? d[c / per_scale] : d[c / 16];
      out[t * cols + c] = static_cast<float>(q[c]) * scale;
    }
  }
  return out;
}

// Every target computes the exact product of the weights with its quantized activations, up to
// its float rounding: the integer work is exact whatever the target's order of operations.
TEST(KernelMatMulTest, EveryTargetComputesItsQuantizedProduct) {
  const int64_t tokens = 9, rows = 21;
  for (CpuTarget target : SupportedTargets()) {
    for (WeightType type : kAllTypes) {
      for (int64_t cols : {ColsFor(type), int64_t{1024}}) {
        TestWeights w(type, rows, cols, 101);
        std::vector<float> x = RandomValues(tokens * cols, 201, 3.0f);
        std::vector<double> magnitude = Magnitudes(w.view, x, tokens);
        const std::vector<float> quantized = AsTargetQuantizes(target, w.view, x);
        std::vector<float> reference(tokens * rows);
        MatMulReference(w.view, quantized.data(), tokens, reference.data());
        std::vector<float> y = RunMatMul(target, w.view, x, tokens, 2);
        for (int64_t i = 0; i < tokens * rows; ++i) {
          ASSERT_NEAR(y[i], reference[i], 2e-6 * magnitude[i] + 1e-6)
              << CpuTargetName(target) << " " << WeightTypeName(type) << " cols " << cols
              << " index " << i;
        }
      }
    }
  }
}

// The per-super-block quantizer: a scale per 256 and the sums of each 16, as its contract says.
TEST(KernelMatMulTest, SuperBlockActivationQuantizer) {
  const int64_t cols = 512;
  std::vector<float> x = RandomValues(cols, 202, 3.0f);
  std::fill(x.begin() + 256, x.end(), 0.0f);  // a zero super-block quantizes to zeros
  x[7] = -5.0f;                               // the first super-block's largest magnitude
  std::vector<int8_t> q(cols);
  std::vector<float> d(cols / 256);
  std::vector<int16_t> group_sum(cols / 16);
  QuantizeActivationRowPerSuperBlock(x.data(), cols, q.data(), d.data(), group_sum.data());
  EXPECT_EQ(d[0], 5.0f / 127.0f);
  EXPECT_EQ(q[7], -127);
  EXPECT_EQ(d[1], 0.0f);
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_EQ(q[c], static_cast<int>(std::nearbyint(x[c] * (c < 256 ? 127.0f / 5.0f : 0.0f)))) << c;
  }
  for (int64_t g = 0; g < cols / 16; ++g) {
    int sum = 0;
    for (int64_t c = 16 * g; c < 16 * g + 16; ++c) sum += q[c];
    EXPECT_EQ(group_sum[g], sum) << g;
  }
}

TEST(KernelMatMulTest, FloatColumnsWithTail) {
  const int64_t tokens = 19, rows = 13, cols = 100;  // not a multiple of any vector width
  for (CpuTarget target : SupportedTargets()) {
    for (WeightType type : {WeightType::kF32, WeightType::kF16, WeightType::kBF16}) {
      TestWeights w(type, rows, cols, 102);
      std::vector<float> x = RandomValues(tokens * cols, 202);
      std::vector<float> reference(tokens * rows);
      MatMulReference(w.view, x.data(), tokens, reference.data());
      std::vector<double> magnitude = Magnitudes(w.view, x, tokens);
      std::vector<float> y = RunMatMul(target, w.view, x, tokens, 1);
      for (int64_t i = 0; i < tokens * rows; ++i) {
        ASSERT_NEAR(y[i], reference[i], 1e-5 * magnitude[i] + 1e-6)
            << CpuTargetName(target) << " " << WeightTypeName(type);
      }
    }
  }
}

// The exactness promise: a row's bits do not depend on the batch, its place in it, or the
// thread count.
TEST(KernelMatMulTest, RowBitsIndependentOfBatchAndThreads) {
  for (CpuTarget target : SupportedTargets()) {
    for (WeightType type : kAllTypes) {
      // Legacy types (one-token tiles read them in place): 96 = a span of the AVX2 decode tile
      // cut short; 544 = one full 512-column segment (two spans of the decode tiles) plus a lone
      // block of 32; 608 = the same plus three blocks (a span's last blocks read with masks, and
      // its lone last block).
      std::vector<int64_t> widths{768};
      if (IsQuantized(type) && !testing::IsKQuant(type)) widths = {96, 544, 608};
      // Float types: rows longer than a prefill span of columns (float_span_tile), cut with a
      // tail inside the last span (1100) and with a short last span (2080).
      if (!IsQuantized(type)) widths = {96, 1100, 2080};
      for (int64_t cols : widths) {
        for (int64_t rows : {int64_t{5}, int64_t{67}}) {
          TestWeights w(type, rows, cols, 103);
          std::vector<float> x = RandomValues(64 * cols, 203, 2.0f);
          // Each token alone, one thread.
          std::vector<float> alone(64 * rows);
          {
            ThreadPool pool(1);
            for (int64_t t = 0; t < 64; ++t) {
              MatMulOnTarget(target, w.view, x.data() + t * cols, 1, alone.data() + t * rows, pool);
            }
          }
          for (int threads : {1, 2, 3}) {
            ThreadPool pool(threads);
            for (int64_t batch : {1, 2, 3, 5, 8, 17, 64}) {
              // Batches start at an offset so a token sits at a different place in each.
              for (int64_t start : {int64_t{0}, int64_t{64} - batch}) {
                std::vector<float> y(batch * rows);
                MatMulOnTarget(target, w.view, x.data() + start * cols, batch, y.data(), pool);
                ASSERT_EQ(
                    std::memcmp(y.data(), alone.data() + start * rows, y.size() * sizeof(float)), 0)
                    << CpuTargetName(target) << " " << WeightTypeName(type) << " rows " << rows
                    << " cols " << cols << " batch " << batch << " start " << start << " threads "
                    << threads;
              }
            }
          }
        }
      }
    }
  }
}

// Prefill on targets that rearrange each panel into blocks of rows (AVX-512: kInterleavedRows,
// interleaved in fours) gives every row the bits of its one-token product, whatever part of a
// block the matrix's rows fill and however the panel's rows fall: every row count up to two
// blocks and one, with a row's last chunk a lone block of 32 where the type allows it.
TEST(KernelMatMulTest, PrefillOnPartBlocksOfRowsMatchesOneToken) {
  const int64_t tokens = 6;  // a whole token tile and part of one
  for (CpuTarget target : SupportedTargets()) {
    for (WeightType type :
         {WeightType::kQ8_0, WeightType::kQ4_1, WeightType::kQ4_K, WeightType::kQ6_K}) {
      const int64_t cols = testing::IsKQuant(type) ? 512 : 160;
      for (int64_t rows = 1; rows <= 2 * kInterleavedRows + 1; ++rows) {
        TestWeights w(type, rows, cols, 108);
        std::vector<float> x = RandomValues(tokens * cols, 208, 2.0f);
        std::vector<float> batch = RunMatMul(target, w.view, x, tokens, 2);
        ExpectEachTokenAloneGives(target, w.view, x, batch, 1, "rows " + std::to_string(rows));
      }
    }
  }
}

// Rows the AVX-512 target rearranges straight from the matrix (Q8_0 as stored, Q4_K and Q5_K row
// groups)
// become the bytes (mins included) that unpacking them and interleaving the unpacked panel gives:
// every row count of a block for Q8_0, with a row's lone last block of 32, and K-quant rows of 1, 3
// and 16 super-blocks.
TEST(KernelMatMulTest, InterleavingStraightFromTheMatrixGivesTheUnpackedBytes) {
#if defined(REPRISE_KERNELS_AVX512)
  if (!CpuTargetSupported(CpuTarget::kAvx512)) GTEST_SKIP() << "needs a CPU with AVX-512";
  const TargetKernels& k = Avx512Kernels();
  struct Case {
    WeightType type;
    WeightLayout layout;
    int64_t cols;
  };
  for (const Case& c : {Case{WeightType::kQ8_0, WeightLayout::kRowMajor, 160},
                        Case{WeightType::kQ8_0, WeightLayout::kRowMajor, 544},
                        Case{WeightType::kQ8_0, WeightLayout::kRowGroups, 160},
                        Case{WeightType::kQ8_0, WeightLayout::kRowGroups, 544},
                        Case{WeightType::kQ4_K, WeightLayout::kRowGroups, 256},
                        Case{WeightType::kQ4_K, WeightLayout::kRowGroups, 768},
                        Case{WeightType::kQ4_K, WeightLayout::kRowGroups, 4096},
                        Case{WeightType::kQ5_K, WeightLayout::kRowGroups, 256},
                        Case{WeightType::kQ5_K, WeightLayout::kRowGroups, 768},
                        Case{WeightType::kQ5_K, WeightLayout::kRowGroups, 4096},
                        Case{WeightType::kQ6_K, WeightLayout::kRowGroups, 256},
                        Case{WeightType::kQ6_K, WeightLayout::kRowGroups, 768}}) {
    ASSERT_TRUE(k.interleaves_weights(c.type, c.layout)) << WeightTypeName(c.type);
    const int64_t cols = c.cols;
    TestWeights w(c.type, kInterleavedRows, cols, 109);
    // The unpacked panel, as the driver fills it (portable unpacking: the same bytes).
    const bool has_min = HasMin(c.type);
    const int64_t blocks = cols / static_cast<int64_t>(BlockElements(c.type));
    const size_t row_bytes = RowBytes(c.type, cols);
    std::vector<uint8_t> q(kInterleavedRows * cols);
    std::vector<float> scale(kInterleavedRows * (cols / kScaleGroup));
    std::vector<float> min(kInterleavedRows * (cols / kMinGroup));
    for (int r = 0; r < kInterleavedRows; ++r) {
      UnpackBlocks(c.type, w.bytes.data() + r * row_bytes, 0, blocks, q.data() + r * cols,
                   scale.data() + r * (cols / kScaleGroup),
                   has_min ? min.data() + r * (cols / kMinGroup) : nullptr);
    }
    const UnpackedRows panel{.q = q.data(),
                             .scale = scale.data(),
                             .min = has_min ? min.data() : nullptr,
                             .cols = cols,
                             .zero_point = ZeroPoint(c.type)};
    std::vector<uint8_t> stored = w.bytes;
    const uint8_t* source = stored.data();
    if (c.layout == WeightLayout::kRowGroups) {
      WeightView view = w.view;
      view.data = stored.data();
      ASSERT_EQ(ArrangeRowGroups(view, WeightLayout::kRowGroups, stored.data()).layout,
                WeightLayout::kRowGroups);
    }
    const size_t block_bytes = k.interleaved_block_bytes(cols);
    // Row groups are rearranged whole; stored rows in any number up to a block.
    const int first_nr = c.layout == WeightLayout::kRowGroups ? kInterleavedRows : 1;
    for (int nr = first_nr; nr <= kInterleavedRows; ++nr) {
      AlignedBuffer<uint8_t> expected(block_bytes), straight(block_bytes);
      std::memset(expected.data(), 0x5A, block_bytes);
      std::memset(straight.data(), 0xA5, block_bytes);
      k.interleave(panel, 0, nr, expected.data());
      k.interleave_weights(c.type, c.layout, source, row_bytes, cols, nr, straight.data());
      // A block ends with its rows' mins (16 floats per sub-block of 32), written for types
      // with mins only.
      const size_t written = has_min ? block_bytes : block_bytes - cols / kMinGroup * 64;
      ASSERT_EQ(std::memcmp(expected.data(), straight.data(), written), 0)
          << WeightTypeName(c.type) << " cols " << cols << " rows " << nr;
    }
  }
  EXPECT_FALSE(k.interleaves_weights(WeightType::kQ4_K, WeightLayout::kRowMajor));
  EXPECT_FALSE(k.interleaves_weights(WeightType::kQ6_K, WeightLayout::kRowMajor));
  EXPECT_FALSE(k.interleaves_weights(WeightType::kQ4_0, WeightLayout::kRowGroups));
#else
  GTEST_SKIP() << "built without the AVX-512 kernels (REPRISE_SIMD_KERNELS=OFF)";
#endif
}

// The one-token AVX-512 tiles split packed nibbles by GFNI where the CPU has it and by shifts
// elsewhere: both must give the same bits (the row-bits test above covers the one this CPU
// takes against the general tiles; this one the other against it).
TEST(KernelMatMulTest, DecodeTilesSameBitsWithGfniOrShifts) {
#if defined(REPRISE_KERNELS_AVX512)
  if (!CpuTargetSupported(CpuTarget::kAvx512) || BestNibbleSplit() != NibbleSplit::kGfni) {
    GTEST_SKIP() << "needs a CPU with AVX-512 and GFNI";
  }
  const int64_t rows = 4;
  for (WeightType type : kAllTypes) {
    if (DecodeTileAvx512(type, 1, NibbleSplit::kShift) == nullptr) continue;  // general tile
    // Two full spans and a part of one where the type allows it (K-quants: whole super-blocks).
    for (int64_t cols : {testing::IsKQuant(type) ? int64_t{768} : int64_t{608}, int64_t{4096}}) {
      TestWeights w(type, rows, cols, 107);
      const std::vector<float> x = RandomValues(cols, 207, 2.0f);
      std::vector<int8_t> q(cols);
      std::vector<float> d(cols / 16), sum(cols / 32);
      QuantizeActivationRow(x.data(), cols, q.data(), d.data(), sum.data());
      const QuantizedRows qx{.q = q.data(), .d = d.data(), .sum = sum.data(), .cols = cols};
      const RawRows raw{.type = type,
                        .data = w.bytes.data(),
                        .row_bytes = RowBytes(type, cols),
                        .zero_point = ZeroPoint(type),
                        .has_min = type == WeightType::kQ4_K || type == WeightType::kQ5_K,
                        .prefetch_rows = 0,
                        .prefetch_end = rows};
      for (int nr = 1; nr <= rows; ++nr) {
        std::vector<float> by_shifts(nr), by_gfni(nr);
        DecodeTileAvx512(type, nr, NibbleSplit::kShift)(qx, 0, raw, 0, by_shifts.data(), 1);
        DecodeTileAvx512(type, nr, NibbleSplit::kGfni)(qx, 0, raw, 0, by_gfni.data(), 1);
        ASSERT_EQ(std::memcmp(by_shifts.data(), by_gfni.data(), nr * sizeof(float)), 0)
            << WeightTypeName(type) << " cols " << cols << " rows " << nr;
        for (int r = 0; r < nr; ++r) ASSERT_TRUE(std::isfinite(by_gfni[r]));
      }
    }
  }
#else
  GTEST_SKIP() << "built without the AVX-512 kernels (REPRISE_SIMD_KERNELS=OFF)";
#endif
}

TEST(KernelMatMulTest, FloatTailRowsStayExact) {
  const int64_t rows = 13, cols = 100;
  for (CpuTarget target : SupportedTargets()) {
    for (WeightType type : {WeightType::kF32, WeightType::kF16, WeightType::kBF16}) {
      TestWeights w(type, rows, cols, 106);
      std::vector<float> x = RandomValues(19 * cols, 206);
      std::vector<float> batch = RunMatMul(target, w.view, x, 19, 2);
      ThreadPool pool(1);
      for (int64_t t = 0; t < 19; ++t) {
        std::vector<float> one(rows);
        MatMulOnTarget(target, w.view, x.data() + t * cols, 1, one.data(), pool);
        ASSERT_EQ(std::memcmp(one.data(), batch.data() + t * rows, rows * sizeof(float)), 0)
            << CpuTargetName(target) << " " << WeightTypeName(type) << " token " << t;
      }
    }
  }
}

// Large enough for several panels per thread in both the decode and the prefill layout.
TEST(KernelMatMulTest, ManyPanelsStayExact) {
  for (CpuTarget target : SupportedTargets()) {
    for (WeightType type : {WeightType::kF16, WeightType::kQ4_0, WeightType::kQ4_K}) {
      const int64_t cols = 2048, rows = 301, tokens = 13;
      TestWeights w(type, rows, cols, 104);
      std::vector<float> x = RandomValues(tokens * cols, 204);
      std::vector<float> batch = RunMatMul(target, w.view, x, tokens, 3);
      ExpectEachTokenAloneGives(target, w.view, x, batch, 2, "");
    }
  }
}

// Several matrices on the same activations (fused into one pass for one token) give the bits of
// MatMul on each: mixed quantized types, float types (not fused), any thread count and batch.
TEST(KernelMatMulTest, MatMulsMatchMatMulOnEach) {
  const int64_t cols = 512;
  TestWeights q5(WeightType::kQ5_0, 37, cols, 110), q6(WeightType::kQ6_K, 9, cols, 111),
      q8(WeightType::kQ8_0, 64, cols, 112), f16(WeightType::kF16, 5, cols, 113);
  std::vector<float> x = RandomValues(5 * cols, 210, 2.0f);
  for (CpuTarget target : SupportedTargets()) {
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (int64_t tokens : {int64_t{1}, int64_t{3}, int64_t{5}}) {
        for (bool with_float : {false, true}) {
          std::vector<const TestWeights*> mats = {&q5, &q6, &q8};
          if (with_float) mats.push_back(&f16);
          std::vector<std::vector<float>> fused(mats.size()), each(mats.size());
          std::vector<MatMulOutput> outputs;
          for (size_t m = 0; m < mats.size(); ++m) {
            fused[m].assign(tokens * mats[m]->view.rows, std::nanf(""));
            each[m].assign(tokens * mats[m]->view.rows, std::nanf(""));
            outputs.push_back({&mats[m]->view, fused[m].data()});
            MatMulOnTarget(target, mats[m]->view, x.data(), tokens, each[m].data(), pool);
          }
          MatMulsOnTarget(target, outputs, x.data(), tokens, pool);
          for (size_t m = 0; m < mats.size(); ++m) {
            ASSERT_EQ(std::memcmp(fused[m].data(), each[m].data(), fused[m].size() * sizeof(float)),
                      0)
                << CpuTargetName(target) << " threads " << threads << " tokens " << tokens
                << " matrix " << m;
          }
        }
      }
    }
  }
}

TEST(KernelCpuTargetTest, ScalarAlwaysAndBestSupported) {
  EXPECT_TRUE(CpuTargetSupported(CpuTarget::kScalar));
  EXPECT_TRUE(CpuTargetSupported(BestCpuTarget()));
  for (CpuTarget t : SupportedTargets())
    std::printf("supported target: %s\n", CpuTargetName(t).data());
}

TEST(KernelMatMulTest, TinyAndZeroActivationBlocks) {
  TestWeights w(WeightType::kQ4_0, 4, 96, 107);
  std::vector<float> x(96, 0.0f);
  for (int i = 32; i < 64; ++i) x[i] = 1e-40f;  // denormals
  x[70] = 1.0f;
  for (CpuTarget target : SupportedTargets()) {
    std::vector<float> y = RunMatMul(target, w.view, x, 1, 1);
    std::vector<float> row(96);
    for (int64_t r = 0; r < 4; ++r) {
      DequantizeRow(w.view, r, row.data());
      EXPECT_NEAR(y[r], row[70], 1e-6) << CpuTargetName(target);
    }
  }
}

TEST(KernelMatMulTest, DefaultTargetIsTheBest) {
  TestWeights w(WeightType::kQ8_0, 8, 64, 105);
  std::vector<float> x = RandomValues(3 * 64, 205);
  ThreadPool pool(1);
  std::vector<float> y(3 * 8);
  MatMul(w.view, x.data(), 3, y.data(), pool);
  EXPECT_EQ(y, RunMatMul(BestCpuTarget(), w.view, x, 3, 1));
}

// Activations the SIMD quantizers must quantize as the portable ones do: random rows of several
// magnitudes, a block of zeros, one of denormals, values on a rounding tie, and infinities' worth
// of range (large finite values); 3 super-blocks of 256.
std::vector<float> QuantizerEdgeCases() {
  constexpr int64_t kCols = 32 * 24;
  std::vector<float> x = RandomValues(kCols, 5);
  for (int64_t i = 0; i < 32; ++i) x[static_cast<size_t>(32 + i)] = 0.0f;
  for (int64_t i = 0; i < 32; ++i) x[static_cast<size_t>(64 + i)] = 1e-40f * static_cast<float>(i);
  for (int64_t i = 0; i < 32; ++i)
    x[static_cast<size_t>(96 + i)] = 0.5f * static_cast<float>(i - 16);
  x[127] = 127.0f;  // scale 1: the halves above are exact ties, rounded to even
  for (int64_t i = 0; i < 32; ++i) x[static_cast<size_t>(128 + i)] *= 3e37f;
  for (int64_t i = 0; i < 32; ++i) x[static_cast<size_t>(160 + i)] *= 1e-6f;
  for (int64_t i = 0; i < 256; ++i) x[static_cast<size_t>(512 + i)] = 0.0f;  // a zero super-block
  return x;
}

using BlockQuantizer = void (*)(const float*, int64_t, int8_t*, float*, float*);
void ExpectPortableBlockQuantization(BlockQuantizer quantize) {
  const std::vector<float> x = QuantizerEdgeCases();
  const auto cols = static_cast<int64_t>(x.size());
  std::vector<int8_t> q1(x.size()), q2(x.size());
  std::vector<float> d1(x.size() / 16), d2(x.size() / 16), s1(x.size() / 32), s2(x.size() / 32);
  QuantizeActivationRow(x.data(), cols, q1.data(), d1.data(), s1.data());
  quantize(x.data(), cols, q2.data(), d2.data(), s2.data());
  EXPECT_EQ(q1, q2);
  EXPECT_EQ(0, std::memcmp(d1.data(), d2.data(), d1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(s1.data(), s2.data(), s1.size() * sizeof(float)));
}

TEST(MatMulTest, AvxActivationQuantizerMatchesPortable) {
#if defined(REPRISE_KERNELS_AVX512)
  if (!CpuTargetSupported(CpuTarget::kAvx512)) GTEST_SKIP() << "no AVX-512 on this machine";
  ExpectPortableBlockQuantization(QuantizeActivationRowAvx512);
#else
  GTEST_SKIP() << "built without the AVX-512 kernels (REPRISE_SIMD_KERNELS=OFF)";
#endif
}

TEST(MatMulTest, Avx2ActivationQuantizersAndLaneSumsMatchPortable) {
#if defined(REPRISE_KERNELS_AVX2)
  if (!CpuTargetSupported(CpuTarget::kAvx2)) GTEST_SKIP() << "no AVX2 on this machine";
  ExpectPortableBlockQuantization(QuantizeActivationRowAvx2);
  const std::vector<float> x = QuantizerEdgeCases();
  const auto cols = static_cast<int64_t>(x.size());
  std::vector<int8_t> q1(x.size()), q2(x.size());
  std::vector<float> d1(x.size() / 256), d2(x.size() / 256);
  std::vector<int16_t> g1(x.size() / 16), g2(x.size() / 16);
  QuantizeActivationRowPerSuperBlock(x.data(), cols, q1.data(), d1.data(), g1.data());
  QuantizeActivationRowPerSuperBlockAvx2(x.data(), cols, q2.data(), d2.data(), g2.data());
  EXPECT_EQ(q1, q2);
  EXPECT_EQ(0, std::memcmp(d1.data(), d2.data(), d1.size() * sizeof(float)));
  EXPECT_EQ(g1, g2);
  // The zero-point lane sums of the quantized row.
  std::vector<int32_t> eights1(x.size() / 8), eights2(x.size() / 8);
  std::vector<int32_t> sixteens1(x.size() / 8), sixteens2(x.size() / 8);
  ZeroPointLanesRow(q1.data(), cols, eights1.data(), sixteens1.data());
  ZeroPointLanesRowAvx2(q1.data(), cols, eights2.data(), sixteens2.data());
  EXPECT_EQ(eights1, eights2);
  EXPECT_EQ(sixteens1, sixteens2);
#else
  GTEST_SKIP() << "built without the AVX2 kernels (REPRISE_SIMD_KERNELS=OFF)";
#endif
}

}  // namespace
}  // namespace reprise::kernels
