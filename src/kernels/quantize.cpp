// Row (de)quantization for every weight type. Quantizers are simple and correct (round to
// nearest, one pass); they are meant for tests and make-model, not to match llama.cpp's
// optimising quantizers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"
#include "kernels/row_groups.h"
#include "kernels/unpacked.h"

namespace reprise::kernels {

namespace {

int RoundToInt(float value) { return static_cast<int>(std::nearbyint(value)); }

uint8_t ClampCode(int value, int max) { return static_cast<uint8_t>(std::clamp(value, 0, max)); }

// Value of largest magnitude, with its sign.
float SignedAbsMax(const float* x, int n) {
  float best = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  }
  return best;
}

void PackNibbles(const uint8_t* codes, uint8_t* qs) {
  for (int j = 0; j < kQk / 2; ++j) {
    qs[j] = static_cast<uint8_t>((codes[j] & 0xF) | ((codes[j + kQk / 2] & 0xF) << 4));
  }
}

void PackFifthBits(const uint8_t* codes, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < kQk; ++j) qh |= static_cast<uint32_t>((codes[j] >> 4) & 1u) << j;
  std::memcpy(qh_bytes, &qh, sizeof(qh));
}

// Symmetric: w = d * (code - zero), codes in [0, 2 * zero - 1]; d = -max / zero as ggml does,
// so the extreme value maps to code 0 exactly.
template <typename Block>
void QuantizeSymmetric(const float* x, int zero, Block* block, uint8_t* codes) {
  float max = SignedAbsMax(x, kQk);
  uint16_t d_half = FloatToHalf(max / -static_cast<float>(zero));
  float d = HalfToFloat(d_half);
  float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQk; ++j)
    codes[j] = ClampCode(RoundToInt(x[j] * inverse) + zero, 2 * zero - 1);
  block->d = d_half;
}

// Asymmetric: w = d * code + m, codes in [0, levels].
template <typename Block>
void QuantizeAsymmetric(const float* x, int levels, Block* block, uint8_t* codes) {
  float lo = *std::min_element(x, x + kQk);
  float hi = *std::max_element(x, x + kQk);
  uint16_t d_half = FloatToHalf((hi - lo) / static_cast<float>(levels));
  uint16_t m_half = FloatToHalf(lo);
  float d = HalfToFloat(d_half);
  float m = HalfToFloat(m_half);
  float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQk; ++j) codes[j] = ClampCode(RoundToInt((x[j] - m) * inverse), levels);
  block->d = d_half;
  block->m = m_half;
}

// Q4_K / Q5_K super-block: per sub-block of 32, an offset min <= 0 and a step; both are then
// quantized to 6 bits against the super-block's d and dmin.
void QuantizeKWithMins(const float* x, int levels, uint16_t* d_out, uint16_t* dmin_out,
                       uint8_t* packed_scales, uint8_t* codes) {
  constexpr int kSubs = kQkK / kQk;
  float steps[kSubs];
  float mins[kSubs];  // -min of each sub-block, >= 0
  float max_step = 0.0f, max_min = 0.0f;
  for (int sub = 0; sub < kSubs; ++sub) {
    const float* xs = x + sub * kQk;
    float lo = std::min(0.0f, *std::min_element(xs, xs + kQk));
    float hi = *std::max_element(xs, xs + kQk);
    steps[sub] = (hi - lo) / static_cast<float>(levels);
    mins[sub] = -lo;
    max_step = std::max(max_step, steps[sub]);
    max_min = std::max(max_min, mins[sub]);
  }
  *d_out = FloatToHalf(max_step / 63.0f);
  *dmin_out = FloatToHalf(max_min / 63.0f);
  float d = HalfToFloat(*d_out);
  float dmin = HalfToFloat(*dmin_out);
  uint8_t sc[kSubs], mn[kSubs];
  for (int sub = 0; sub < kSubs; ++sub) {
    sc[sub] = ClampCode(d > 0.0f ? RoundToInt(steps[sub] / d) : 0, 63);
    mn[sub] = ClampCode(dmin > 0.0f ? RoundToInt(mins[sub] / dmin) : 0, 63);
  }
  std::memset(packed_scales, 0, kKScaleBytes);
  for (int j = 0; j < kSubs; ++j) {
    if (j < 4) {
      packed_scales[j] |= sc[j];
      packed_scales[j + 4] |= mn[j];
    } else {
      packed_scales[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
      packed_scales[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      packed_scales[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
    }
  }
  for (int sub = 0; sub < kSubs; ++sub) {
    float step = d * static_cast<float>(sc[sub]);
    float offset = dmin * static_cast<float>(mn[sub]);
    float inverse = step != 0.0f ? 1.0f / step : 0.0f;
    for (int l = 0; l < kQk; ++l) {
      int e = sub * kQk + l;
      codes[e] = ClampCode(RoundToInt((x[e] + offset) * inverse), levels);
    }
  }
}

void QuantizeQ4K(const float* x, BlockQ4_K* block) {
  uint8_t codes[kQkK];
  QuantizeKWithMins(x, 15, &block->d, &block->dmin, block->scales, codes);
  for (int pair = 0; pair < kQkK / 64; ++pair) {
    for (int l = 0; l < kQk; ++l) {
      block->qs[pair * kQk + l] =
          static_cast<uint8_t>(codes[pair * 64 + l] | (codes[pair * 64 + kQk + l] << 4));
    }
  }
}

void QuantizeQ5K(const float* x, BlockQ5_K* block) {
  uint8_t codes[kQkK];
  QuantizeKWithMins(x, 31, &block->d, &block->dmin, block->scales, codes);
  std::memset(block->qh, 0, sizeof(block->qh));
  for (int pair = 0; pair < kQkK / 64; ++pair) {
    for (int l = 0; l < kQk; ++l) {
      uint8_t lo = codes[pair * 64 + l];
      uint8_t hi = codes[pair * 64 + kQk + l];
      block->qs[pair * kQk + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      block->qh[l] |=
          static_cast<uint8_t>(((lo >> 4) << (2 * pair)) | ((hi >> 4) << (2 * pair + 1)));
    }
  }
}

void QuantizeQ6K(const float* x, BlockQ6_K* block) {
  constexpr int kSubs = kQkK / 16;
  float steps[kSubs];
  float max_step = 0.0f;
  for (int sub = 0; sub < kSubs; ++sub) {
    float amax = 0.0f;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[sub * 16 + l]));
    steps[sub] = amax / 31.0f;
    max_step = std::max(max_step, steps[sub]);
  }
  block->d = FloatToHalf(max_step / 127.0f);
  float d = HalfToFloat(block->d);
  uint8_t codes[kQkK];
  for (int sub = 0; sub < kSubs; ++sub) {
    int sc = d > 0.0f ? std::clamp(RoundToInt(steps[sub] / d), 0, 127) : 0;
    block->scales[sub] = static_cast<int8_t>(sc);
    float step = d * static_cast<float>(sc);
    float inverse = step != 0.0f ? 1.0f / step : 0.0f;
    for (int l = 0; l < 16; ++l) {
      int e = sub * 16 + l;
      codes[e] = ClampCode(RoundToInt(x[e] * inverse) + 32, 63);
    }
  }
  WriteQ6KCodes(codes, block->ql, block->qh);
}

}  // namespace

void DequantizeRow(const WeightView& w, int64_t row, float* out) {
  REPRISE_CHECK(row >= 0 && row < w.rows, "row {} out of [0, {})", row, w.rows);
  const uint8_t* base = static_cast<const uint8_t*>(w.data) + row * RowBytes(w.type, w.cols);
  std::vector<uint8_t> stored;  // the row in stored order, from a grouped matrix
  if (w.layout != WeightLayout::kRowMajor) {
    stored.resize(RowBytes(w.type, w.cols));
    UngroupRow(w.type, w.layout, static_cast<const uint8_t*>(w.data), w.rows, w.cols, row,
               stored.data());
    base = stored.data();
  }
  switch (w.type) {
    case WeightType::kF32:
      std::memcpy(out, base, static_cast<size_t>(w.cols) * sizeof(float));
      return;
    case WeightType::kF16:
    case WeightType::kBF16: {
      for (int64_t c = 0; c < w.cols; ++c) {
        uint16_t bits;
        std::memcpy(&bits, base + 2 * c, sizeof(bits));
        out[c] = w.type == WeightType::kF16 ? HalfToFloat(bits) : Bfloat16ToFloat(bits);
      }
      return;
    }
    default:
      break;
  }
  const int64_t block_elements = static_cast<int64_t>(BlockElements(w.type));
  const int zero = ZeroPoint(w.type);
  const bool has_min = HasMin(w.type);
  uint8_t q[kQkK];                   // [block_elements]
  float scale[kQkK / kScaleGroup];   // [block_elements / 16]
  float min[kQkK / kMinGroup] = {};  // [block_elements / 32]
  for (int64_t b = 0; b < w.cols / block_elements; ++b) {
    UnpackBlocks(w.type, base, b, 1, q, scale, has_min ? min : nullptr);
    float* dst = out + b * block_elements;
    for (int64_t e = 0; e < block_elements; ++e) {
      float value = scale[e / kScaleGroup] * static_cast<float>(static_cast<int>(q[e]) - zero);
      dst[e] = has_min ? value + min[e / kMinGroup] : value;
    }
  }
}

void QuantizeRow(WeightType type, const float* values, int64_t cols, void* out) {
  REPRISE_CHECK(IsSupportedWeightType(static_cast<uint32_t>(type)), "unsupported weight type");
  const int64_t blocks = static_cast<int64_t>(RowBytes(type, cols) / BlockBytes(type));
  uint8_t* bytes = static_cast<uint8_t*>(out);
  uint8_t codes[kQk];
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = values + b * static_cast<int64_t>(BlockElements(type));
    void* dst = bytes + b * static_cast<int64_t>(BlockBytes(type));
    switch (type) {
      case WeightType::kF32:
        std::memcpy(dst, x, sizeof(float));
        break;
      case WeightType::kF16: {
        uint16_t bits = FloatToHalf(*x);
        std::memcpy(dst, &bits, sizeof(bits));
        break;
      }
      case WeightType::kBF16: {
        uint16_t bits = FloatToBfloat16(*x);
        std::memcpy(dst, &bits, sizeof(bits));
        break;
      }
      case WeightType::kQ4_0: {
        auto* block = static_cast<BlockQ4_0*>(dst);
        QuantizeSymmetric(x, 8, block, codes);
        PackNibbles(codes, block->qs);
        break;
      }
      case WeightType::kQ5_0: {
        auto* block = static_cast<BlockQ5_0*>(dst);
        QuantizeSymmetric(x, 16, block, codes);
        PackNibbles(codes, block->qs);
        PackFifthBits(codes, block->qh);
        break;
      }
      case WeightType::kQ4_1: {
        auto* block = static_cast<BlockQ4_1*>(dst);
        QuantizeAsymmetric(x, 15, block, codes);
        PackNibbles(codes, block->qs);
        break;
      }
      case WeightType::kQ5_1: {
        auto* block = static_cast<BlockQ5_1*>(dst);
        QuantizeAsymmetric(x, 31, block, codes);
        PackNibbles(codes, block->qs);
        PackFifthBits(codes, block->qh);
        break;
      }
      case WeightType::kQ8_0: {
        auto* block = static_cast<BlockQ8_0*>(dst);
        float amax = 0.0f;
        for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(x[j]));
        block->d = FloatToHalf(amax / 127.0f);
        float d = HalfToFloat(block->d);
        float inverse = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < kQk; ++j) {
          block->qs[j] = static_cast<int8_t>(std::clamp(RoundToInt(x[j] * inverse), -127, 127));
        }
        break;
      }
      case WeightType::kQ4_K:
        QuantizeQ4K(x, static_cast<BlockQ4_K*>(dst));
        break;
      case WeightType::kQ5_K:
        QuantizeQ5K(x, static_cast<BlockQ5_K*>(dst));
        break;
      case WeightType::kQ6_K:
        QuantizeQ6K(x, static_cast<BlockQ6_K*>(dst));
        break;
    }
  }
}

}  // namespace reprise::kernels
