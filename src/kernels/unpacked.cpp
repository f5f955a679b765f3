#include "kernels/unpacked.h"

#include <cstring>

#include "core/error.h"
#include "kernels/quant_blocks.h"

namespace reprise::kernels {

int ZeroPoint(WeightType type) {
  switch (type) {
    case WeightType::kQ4_0:
      return 8;
    case WeightType::kQ5_0:
      return 16;
    case WeightType::kQ6_K:
      return 32;
    case WeightType::kQ8_0:
      return 128;
    default:
      return 0;
  }
}

bool HasMin(WeightType type) {
  return type == WeightType::kQ4_1 || type == WeightType::kQ5_1 || type == WeightType::kQ4_K ||
         type == WeightType::kQ5_K;
}

bool ScalesPer32(WeightType type) { return IsQuantized(type) && type != WeightType::kQ6_K; }

bool IsQuantized(WeightType type) {
  return type != WeightType::kF32 && type != WeightType::kF16 && type != WeightType::kBF16;
}

namespace {

// Low nibbles give elements 0-15, high nibbles 16-31.
void UnpackNibbles(const uint8_t* qs, uint8_t* q) {
  for (int j = 0; j < kQk / 2; ++j) {
    q[j] = qs[j] & 0xF;
    q[j + kQk / 2] = qs[j] >> 4;
  }
}

// Adds bit 4 of each element from the 32-bit little-endian mask qh.
void AddFifthBits(const uint8_t* qh_bytes, uint8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  for (int j = 0; j < kQk; ++j) q[j] |= static_cast<uint8_t>(((qh >> j) & 1u) << 4);
}

// Legacy blocks have one scale for both 16-element groups.
void SetBlockScale(float d, float* scale) { scale[0] = scale[1] = d; }

template <typename Block>
const Block* BlockAt(const void* row, int64_t index) {
  return static_cast<const Block*>(row) + index;
}

}  // namespace

void UnpackBlocks(WeightType type, const void* row, int64_t first_block, int64_t num_blocks,
                  uint8_t* q, float* scale, float* min) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    int64_t index = first_block + b;
    switch (type) {
      case WeightType::kQ4_0: {
        const auto* block = BlockAt<BlockQ4_0>(row, index);
        UnpackNibbles(block->qs, q);
        SetBlockScale(HalfToFloat(block->d), scale);
        break;
      }
      case WeightType::kQ4_1: {
        const auto* block = BlockAt<BlockQ4_1>(row, index);
        UnpackNibbles(block->qs, q);
        SetBlockScale(HalfToFloat(block->d), scale);
        min[0] = HalfToFloat(block->m);
        break;
      }
      case WeightType::kQ5_0: {
        const auto* block = BlockAt<BlockQ5_0>(row, index);
        UnpackNibbles(block->qs, q);
        AddFifthBits(block->qh, q);
        SetBlockScale(HalfToFloat(block->d), scale);
        break;
      }
      case WeightType::kQ5_1: {
        const auto* block = BlockAt<BlockQ5_1>(row, index);
        UnpackNibbles(block->qs, q);
        AddFifthBits(block->qh, q);
        SetBlockScale(HalfToFloat(block->d), scale);
        min[0] = HalfToFloat(block->m);
        break;
      }
      case WeightType::kQ8_0: {
        const auto* block = BlockAt<BlockQ8_0>(row, index);
        for (int j = 0; j < kQk; ++j) q[j] = static_cast<uint8_t>(block->qs[j] + 128);
        SetBlockScale(HalfToFloat(block->d), scale);
        break;
      }
      case WeightType::kQ4_K:
      case WeightType::kQ5_K: {
        // The two layouts share d, dmin, scales and qs at different offsets.
        const uint8_t* packed_scales;
        const uint8_t* qs;
        const uint8_t* qh = nullptr;
        float d, dmin;
        if (type == WeightType::kQ4_K) {
          const auto* block = BlockAt<BlockQ4_K>(row, index);
          d = HalfToFloat(block->d);
          dmin = HalfToFloat(block->dmin);
          packed_scales = block->scales;
          qs = block->qs;
        } else {
          const auto* block = BlockAt<BlockQ5_K>(row, index);
          d = HalfToFloat(block->d);
          dmin = HalfToFloat(block->dmin);
          packed_scales = block->scales;
          qs = block->qs;
          qh = block->qh;
        }
        for (int sub = 0; sub < kQkK / kQk; ++sub) {
          uint8_t sc, m;
          GetScaleMinK4(sub, packed_scales, &sc, &m);
          const uint8_t* bytes = qs + (sub / 2) * kQk;
          uint8_t* out = q + sub * kQk;
          for (int l = 0; l < kQk; ++l) {
            uint8_t code = (sub % 2 == 0) ? (bytes[l] & 0xF) : (bytes[l] >> 4);
            if (qh != nullptr) code |= static_cast<uint8_t>(((qh[l] >> sub) & 1u) << 4);
            out[l] = code;
          }
          scale[2 * sub] = scale[2 * sub + 1] = d * static_cast<float>(sc);
          min[sub] = -(dmin * static_cast<float>(m));
        }
        break;
      }
      case WeightType::kQ6_K: {
        const auto* block = BlockAt<BlockQ6_K>(row, index);
        float d = HalfToFloat(block->d);
        ReadQ6KCodes(block->ql, block->qh, q);
        for (int i = 0; i < kQkK / kScaleGroup; ++i) {
          scale[i] = d * static_cast<float>(block->scales[i]);
        }
        break;
      }
      default:
        REPRISE_CHECK(false, "{} is not a quantized type", WeightTypeName(type));
    }
    int elements = static_cast<int>(BlockElements(type));
    q += elements;
    scale += elements / kScaleGroup;
    if (min != nullptr) min += elements / kMinGroup;
  }
}

}  // namespace reprise::kernels
