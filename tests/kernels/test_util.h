// Shared helpers for the kernels tests: deterministic random data and weight matrices.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/weight_type.h"

namespace reprise::kernels::testing {

inline const WeightType kAllTypes[] = {
    WeightType::kF32,  WeightType::kF16,  WeightType::kBF16, WeightType::kQ8_0,
    WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ5_0, WeightType::kQ5_1,
    WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K,
};

inline bool IsKQuant(WeightType type) { return BlockElements(type) == 256; }

// Uniform values in [-scale, scale], from a fixed seed. [n]
inline std::vector<float> RandomValues(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

// A weight matrix quantized from random values, with its storage.
struct TestWeights {
  std::vector<uint8_t> bytes;  // [rows][RowBytes]
  WeightView view;

  TestWeights(WeightType type, int64_t rows, int64_t cols, uint32_t seed) {
    std::vector<float> values = RandomValues(static_cast<size_t>(rows * cols), seed);
    size_t row_bytes = RowBytes(type, cols);
    bytes.resize(row_bytes * rows);
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeRow(type, values.data() + r * cols, cols, bytes.data() + r * row_bytes);
    }
    view = WeightView{.type = type, .data = bytes.data(), .rows = rows, .cols = cols};
  }
};

}  // namespace reprise::kernels::testing
