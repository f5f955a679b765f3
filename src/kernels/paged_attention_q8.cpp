// The q8 KV type's storage and its portable attention (paged_attention_q8.h). The portable
// kernel follows paged_attention.cpp's per-block online softmax; its scores and value sums are
// the integer sums the q8 rules define.
#include "kernels/paged_attention_q8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace reprise::kernels {

void StoreQ8Key(const PagedKv& kv, uint8_t* key_plane, int slot, const float* k) {
  const int head_dim = kv.head_dim;
  const int block_size = kv.block_size;
  float* scales = const_cast<float*>(Q8PlaneScales(kv, key_plane));
  for (int g = 0; g < kv.KeyGroups(); ++g) {
    const int begin = g * kKvQ8KeyGroup;
    const int end = std::min(head_dim, begin + kKvQ8KeyGroup);
    float absmax = 0.0f;
    for (int d = begin; d < end; ++d) absmax = std::max(absmax, std::fabs(k[d]));
    const Q8Scale q8 = ScaleOfMagnitude(absmax);
    std::memcpy(scales + static_cast<size_t>(g) * block_size + slot, &q8.scale, sizeof(float));
    for (int d = begin; d < end; ++d) {
      // Dimension d of the slot: byte d % 4 of the slot's dword in row d / 4, biased to unsigned.
      key_plane[(static_cast<size_t>(d / 4) * block_size + slot) * 4 + d % 4] =
          static_cast<uint8_t>(Q8Code(k[d], q8.inverse) + 128);
    }
  }
}

void StoreQ8Value(const PagedKv& kv, uint8_t* value_plane, int slot, const float* v) {
  const int head_dim = kv.head_dim;
  float absmax = 0.0f;
  for (int d = 0; d < head_dim; ++d) absmax = std::max(absmax, std::fabs(v[d]));
  const Q8Scale q8 = ScaleOfMagnitude(absmax);
  float* scales = const_cast<float*>(Q8PlaneScales(kv, value_plane));
  std::memcpy(scales + slot, &q8.scale, sizeof(float));
  // Slots in fours: dimension d of the slot is byte slot % 4 of dword d in row slot / 4.
  uint8_t* row = value_plane + static_cast<size_t>(slot / 4) * head_dim * 4 + slot % 4;
  for (int d = 0; d < head_dim; ++d) {
    row[static_cast<size_t>(d) * 4] = static_cast<uint8_t>(Q8Code(v[d], q8.inverse));
  }
}

void QuantizeQueryQ8(const float* q, int head_dim, float attention_scale, QueryQ8* out) {
  for (int g = 0; g * kKvQ8KeyGroup < head_dim; ++g) {
    const int begin = g * kKvQ8KeyGroup;
    const int end = std::min(head_dim, begin + kKvQ8KeyGroup);
    float absmax = 0.0f;
    for (int d = begin; d < end; ++d) absmax = std::max(absmax, std::fabs(q[d]));
    const Q8Scale q8 = ScaleOfMagnitude(absmax);
    int32_t sum = 0;
    for (int d = begin; d < end; d += 4) {
      uint32_t dword = 0;
      for (int i = 0; i < 4; ++i) {
        const int8_t code = Q8Code(q[d + i], q8.inverse);
        sum += code;
        dword |= static_cast<uint32_t>(static_cast<uint8_t>(code)) << (8 * i);
      }
      std::memcpy(&out->codes[d / 4], &dword, sizeof(dword));
    }
    out->scales[g] = q8.scale * attention_scale;
    out->corrections[g] = -128 * sum;
  }
}

namespace {

// The integer dot product of group g of a query with slot `slot`'s key codes.
int32_t KeyGroupSum(const QueryQ8& query, const uint8_t* key_codes, int block_size, int head_dim,
                    int g, int slot) {
  int32_t sum = query.corrections[g];
  const int end = std::min(head_dim, (g + 1) * kKvQ8KeyGroup) / 4;
  for (int e = g * kKvQ8KeyGroup / 4; e < end; ++e) {
    uint32_t dword;
    std::memcpy(&dword, &query.codes[e], sizeof(dword));
    const uint8_t* key = key_codes + (static_cast<size_t>(e) * block_size + slot) * 4;
    for (int i = 0; i < 4; ++i) {
      sum += static_cast<int32_t>(key[i]) * static_cast<int8_t>(dword >> (8 * i));
    }
  }
  return sum;
}

}  // namespace

void QueryScalarQ8(const PagedKv& kv, int layer, int kv_head, const float* q,
                   const QueryQ8* prepared, int group, std::span<const int32_t> block_table,
                   int num_positions, float scale, float* out, const AttentionBlocks& blocks) {
  const int head_dim = kv.head_dim;
  const int block_size = kv.block_size;
  std::fill(out, out + static_cast<int64_t>(group) * head_dim, 0.0f);  // acc: [group][head_dim]
  if (num_positions == 0) return;
  QueryQ8 own[kMaxAttentionGroup];
  const QueryQ8* queries = prepared != nullptr ? prepared : own;
  float running_max[kMaxAttentionGroup];
  float running_sum[kMaxAttentionGroup];
  for (int g = 0; g < group; ++g) {
    if (prepared == nullptr) {
      QuantizeQueryQ8(q + static_cast<int64_t>(g) * head_dim, head_dim, scale, &own[g]);
    }
    running_max[g] = -std::numeric_limits<float>::infinity();
    running_sum[g] = 0.0f;
  }
  float scores[kMaxAttentionBlockSize];
  uint8_t codes[kMaxAttentionBlockSize];
  int32_t sums[kMaxAttentionHeadDim];

  const int end_block = blocks.EndFor(num_positions, block_size);
  for (int b = blocks.first_block; b < end_block; ++b) {
    const int filled = std::min(block_size, num_positions - b * block_size);
    const uint8_t* k_plane = kv.Plane(block_table[b], layer, 0, kv_head);
    const uint8_t* v_plane = kv.Plane(block_table[b], layer, 1, kv_head);
    const float* key_scales = Q8PlaneScales(kv, k_plane);
    const float* value_scales = Q8PlaneScales(kv, v_plane);
    for (int h = 0; h < group; ++h) {
      const QueryQ8& query = queries[h];
      float* acc = out + static_cast<int64_t>(h) * head_dim;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < filled; ++j) {
        float s = 0.0f;
        for (int g = 0; g * kKvQ8KeyGroup < head_dim; ++g) {
          const float sum =
              static_cast<float>(KeyGroupSum(query, k_plane, block_size, head_dim, g, j));
          s += sum * (key_scales[static_cast<size_t>(g) * block_size + j] * query.scales[g]);
        }
        scores[j] = s;
        block_max = std::max(block_max, s);
      }
      const float new_max = std::max(running_max[h], block_max);
      const float correction = std::exp(running_max[h] - new_max);
      float sum = running_sum[h] * correction;
      float max_weight = 0.0f;
      for (int j = 0; j < filled; ++j) {
        const float p = std::exp(scores[j] - new_max);
        sum += p;
        scores[j] = p * value_scales[j];  // the slot's weight
        max_weight = std::max(max_weight, scores[j]);
      }
      float inverse;
      const float weight_scale = ProbabilityScale(max_weight, &inverse);
      const int quads = (filled + 3) / 4;
      for (int j = 0; j < 4 * quads; ++j) {
        codes[j] = j < filled ? static_cast<uint8_t>(RoundedCode(scores[j] * inverse, 255.0f)) : 0;
      }
      std::fill(sums, sums + head_dim, 0);
      for (int quad = 0; quad < quads; ++quad) {
        const int8_t* row =
            reinterpret_cast<const int8_t*>(v_plane) + static_cast<size_t>(quad) * head_dim * 4;
        for (int d = 0; d < head_dim; ++d) {
          for (int i = 0; i < 4; ++i) sums[d] += codes[4 * quad + i] * row[d * 4 + i];
        }
      }
      for (int d = 0; d < head_dim; ++d) {
        acc[d] = acc[d] * correction + static_cast<float>(sums[d]) * weight_scale;
      }
      running_max[h] = new_max;
      running_sum[h] = sum;
    }
  }
  FinishScalarQuery(running_max, running_sum, group, head_dim, blocks, out);
}

}  // namespace reprise::kernels
