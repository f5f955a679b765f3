// Paged attention, one KV head and its group of query heads at a time:
//
//   for each KV block of the sequence, in order:             (the fixed blocking)
//     s[j] = scale * q . k[j]          j in the block's filled slots
//     m'   = max(m, max_j s[j]);  c = exp(m - m')
//     l    = l * c + sum_j exp(s[j] - m')
//     acc  = acc * c + sum_j exp(s[j] - m') * v[j]
//   out = acc / l
//
// Keys and values are always read back from the block storage, so a position has the same
// (rounded) K and V whether it was computed in this step or came from cache.
#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/paged_attention_internal.h"
#include "kernels/paged_attention_q8.h"
#include "kernels/weight_type.h"

namespace reprise::kernels {

namespace {

constexpr int kMaxBlockSize = kMaxAttentionBlockSize;
constexpr int kMaxGroup = kMaxAttentionGroup;
constexpr int kMaxHeadDim = kMaxAttentionHeadDim;

// Reads `n` elements of `type` starting at `src` as f32. dst: [n]
void LoadRow(const uint8_t* src, KvType type, int n, float* dst) {
  if (type == KvType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  for (int i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, sizeof(bits));
    dst[i] = HalfToFloat(bits);
  }
}

// Key of `slot` from a transposed key plane ([head_dim][block_size]) as f32. dst: [head_dim]
void LoadKey(const uint8_t* k_plane, KvType type, int block_size, int head_dim, int slot,
             float* dst) {
  const size_t element = KvElementBytes(type);
  for (int d = 0; d < head_dim; ++d) {
    LoadRow(k_plane + (static_cast<size_t>(d) * block_size + slot) * element, type, 1, dst + d);
  }
}

// Dot product with a fixed order: 8 interleaved partial sums, then a fixed tree.
float Dot(const float* a, const float* b, int n) {
  float partial[8] = {};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int lane = 0; lane < 8; ++lane) partial[lane] += a[i + lane] * b[i + lane];
  }
  for (; i < n; ++i) partial[i % 8] += a[i] * b[i];
  float s4[4] = {partial[0] + partial[4], partial[1] + partial[5], partial[2] + partial[6],
                 partial[3] + partial[7]};
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// One query's `group` heads over positions [0, num_positions), blocks as AttentionBlocks says
// (max and sum, when given, point at this query's `group` entries). q, out: [group][head_dim]
void QueryScalar(const PagedKv& kv, int layer, int kv_head, const float* q, int group,
                 std::span<const int32_t> block_table, int num_positions, float scale, float* out,
                 const AttentionBlocks& blocks) {
  const int head_dim = kv.head_dim;
  const int block_size = kv.block_size;
  std::fill(out, out + static_cast<int64_t>(group) * head_dim, 0.0f);  // acc: [group][head_dim]
  if (num_positions == 0) return;

  float running_max[kMaxGroup];
  float running_sum[kMaxGroup];
  std::fill(running_max, running_max + group, -std::numeric_limits<float>::infinity());
  std::fill(running_sum, running_sum + group, 0.0f);
  float row[kMaxHeadDim];       // [head_dim]
  float scores[kMaxBlockSize];  // [block_size]
  const size_t row_bytes = static_cast<size_t>(head_dim) * KvElementBytes(kv.type);

  const int end_block = blocks.EndFor(num_positions, block_size);
  for (int b = blocks.first_block; b < end_block; ++b) {
    const int filled = std::min(block_size, num_positions - b * block_size);
    const uint8_t* k_plane = kv.Plane(block_table[b], layer, 0, kv_head);
    const uint8_t* v_plane = kv.Plane(block_table[b], layer, 1, kv_head);
    for (int g = 0; g < group; ++g) {
      const float* qg = q + static_cast<int64_t>(g) * head_dim;
      float* acc = out + static_cast<int64_t>(g) * head_dim;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < filled; ++j) {
        LoadKey(k_plane, kv.type, block_size, head_dim, j, row);
        scores[j] = scale * Dot(qg, row, head_dim);
        block_max = std::max(block_max, scores[j]);
      }
      const float new_max = std::max(running_max[g], block_max);
      const float correction = std::exp(running_max[g] - new_max);
      float sum = running_sum[g] * correction;
      for (int d = 0; d < head_dim; ++d) acc[d] *= correction;
      for (int j = 0; j < filled; ++j) {
        const float p = std::exp(scores[j] - new_max);
        sum += p;
        LoadRow(v_plane + j * row_bytes, kv.type, head_dim, row);
        for (int d = 0; d < head_dim; ++d) acc[d] += p * row[d];
      }
      running_max[g] = new_max;
      running_sum[g] = sum;
    }
  }
  FinishScalarQuery(running_max, running_sum, group, head_dim, blocks, out);
}

}  // namespace

void StoreKv(const PagedKv& kv, int layer, int32_t block, int slot, const float* k,
             const float* v) {
  REPRISE_CHECK(slot >= 0 && slot < kv.block_size, "slot {} outside block of {}", slot,
                kv.block_size);
  REPRISE_CHECK(layer >= 0 && layer < kv.n_layer && block >= 0, "bad layer {} or block {}", layer,
                block);
  REPRISE_CHECK(kv.type != KvType::kQ8 || (kv.head_dim % 4 == 0 && kv.block_size % 4 == 0),
                "q8 K/V need head_dim and block size in multiples of 4, not {} and {}", kv.head_dim,
                kv.block_size);
  if (kv.type == KvType::kQ8) {
    for (int h = 0; h < kv.n_kv_head; ++h) {
      StoreQ8Key(kv, kv.Plane(block, layer, 0, h), slot, k + static_cast<int64_t>(h) * kv.head_dim);
      StoreQ8Value(kv, kv.Plane(block, layer, 1, h), slot,
                   v + static_cast<int64_t>(h) * kv.head_dim);
    }
    return;
  }
  const size_t element = KvElementBytes(kv.type);
  const size_t row_bytes = static_cast<size_t>(kv.head_dim) * element;
  for (int h = 0; h < kv.n_kv_head; ++h) {
    uint8_t* k_plane = kv.Plane(block, layer, 0, h);
    uint8_t* v_row = kv.Plane(block, layer, 1, h) + slot * row_bytes;
    const float* k_head = k + static_cast<int64_t>(h) * kv.head_dim;
    const float* v_head = v + static_cast<int64_t>(h) * kv.head_dim;
    if (kv.type == KvType::kF32) {
      for (int d = 0; d < kv.head_dim; ++d) {  // keys are stored transposed: a column per slot
        std::memcpy(k_plane + (static_cast<size_t>(d) * kv.block_size + slot) * element, k_head + d,
                    sizeof(float));
      }
      std::memcpy(v_row, v_head, row_bytes);
      continue;
    }
    // F16: whole rows converted at once (F16C where present, same bits), keys then scattered.
    constexpr int kChunk = 64;
    uint16_t halves[kChunk];
    for (int d0 = 0; d0 < kv.head_dim; d0 += kChunk) {
      const int n = std::min(kChunk, kv.head_dim - d0);
      FloatsToHalves(k_head + d0, n, halves);
      for (int d = 0; d < n; ++d) {
        std::memcpy(k_plane + (static_cast<size_t>(d0 + d) * kv.block_size + slot) * element,
                    halves + d, sizeof(uint16_t));
      }
      FloatsToHalves(v_head + d0, n, halves);
      std::memcpy(v_row + static_cast<size_t>(d0) * element, halves, n * sizeof(uint16_t));
    }
  }
}

void PagedAttention(const PagedKv& kv, int layer, int kv_head, const float* q, int group,
                    std::span<const int32_t> block_table, int num_positions, float scale,
                    float* out) {
  PagedAttentionOnTarget(BestCpuTarget(), kv, layer, kv_head, q, group, block_table, num_positions,
                         scale, out);
}

void PagedAttentionOnTarget(CpuTarget target, const PagedKv& kv, int layer, int kv_head,
                            const float* q, int group, std::span<const int32_t> block_table,
                            int num_positions, float scale, float* out) {
  REPRISE_CHECK(num_positions >= 0, "{} positions", num_positions);
  if (num_positions == 0) {  // nothing to attend to: zeros
    REPRISE_CHECK(group >= 1 && group <= kMaxGroup, "group {} outside [1, {}]", group, kMaxGroup);
    std::fill(out, out + static_cast<int64_t>(group) * kv.head_dim, 0.0f);
    return;
  }
  const int64_t row = static_cast<int64_t>(group) * kv.head_dim;
  PagedAttentionTokensOnTarget(target, kv, layer, kv_head, q, row, group, block_table,
                               num_positions - 1, 1, scale, out, row);
}

void PagedAttentionTokens(const PagedKv& kv, int layer, int kv_head, const float* q,
                          int64_t q_stride, int group, std::span<const int32_t> block_table,
                          int first_position, int num_tokens, float scale, float* out,
                          int64_t out_stride, const PreparedQueries& prepared) {
  PagedAttentionTokensOnTarget(BestCpuTarget(), kv, layer, kv_head, q, q_stride, group, block_table,
                               first_position, num_tokens, scale, out, out_stride, prepared);
}

size_t PreparedQueryBytes(const PagedKv& kv) {
  return kv.type == KvType::kQ8 ? sizeof(QueryQ8) : 0;
}

void PrepareQueries(const PagedKv& kv, const float* q, int num_heads, float scale, std::byte* out) {
  PrepareQueriesOnTarget(BestCpuTarget(), kv, q, num_heads, scale, out);
}

void PrepareQueriesOnTarget(CpuTarget target, const PagedKv& kv, const float* q, int num_heads,
                            float scale, std::byte* out) {
  if (kv.type != KvType::kQ8) return;
  REPRISE_CHECK(CpuTargetSupported(target), "CPU target {} is not supported here",
                CpuTargetName(target));
  REPRISE_CHECK(kv.head_dim >= 1 && kv.head_dim <= kMaxHeadDim, "head_dim {} unsupported",
                kv.head_dim);
  REPRISE_CHECK(reinterpret_cast<uintptr_t>(out) % alignof(QueryQ8) == 0,
                "prepared queries need {}-byte alignment", alignof(QueryQ8));
  auto* queries = reinterpret_cast<QueryQ8*>(out);
#if defined(REPRISE_KERNELS_AVX512)
  if (target == CpuTarget::kAvx512) {
    PrepareQueriesQ8Avx512(q, num_heads, kv.head_dim, scale, queries);
    return;
  }
#endif
  for (int h = 0; h < num_heads; ++h) {
    QuantizeQueryQ8(q + static_cast<int64_t>(h) * kv.head_dim, kv.head_dim, scale, &queries[h]);
  }
}

namespace {

// The kernel of `target`, after checking a run's arguments (see PagedAttentionTokens).
PagedAttentionKernel CheckedKernel(CpuTarget target, const PagedKv& kv, int layer, int kv_head,
                                   int64_t q_stride, int group,
                                   std::span<const int32_t> block_table, int first_position,
                                   int num_tokens, int64_t out_stride,
                                   const PreparedQueries& prepared) {
  const int head_dim = kv.head_dim;
  const int block_size = kv.block_size;
  REPRISE_CHECK(CpuTargetSupported(target), "CPU target {} is not supported here",
                CpuTargetName(target));
  REPRISE_CHECK(group >= 1 && group <= kMaxGroup, "group {} outside [1, {}]", group, kMaxGroup);
  REPRISE_CHECK(block_size >= 1 && block_size <= kMaxBlockSize, "block size {} unsupported",
                block_size);
  REPRISE_CHECK(head_dim >= 1 && head_dim <= kMaxHeadDim, "head_dim {} unsupported", head_dim);
  REPRISE_CHECK(kv.type != KvType::kQ8 || (head_dim % 4 == 0 && block_size % 4 == 0),
                "q8 K/V need head_dim and block size in multiples of 4, not {} and {}", head_dim,
                block_size);
  REPRISE_CHECK(first_position >= 0 && num_tokens >= 0, "bad run: first position {}, {} tokens",
                first_position, num_tokens);
  REPRISE_CHECK(static_cast<int64_t>(first_position) + num_tokens <=
                    static_cast<int64_t>(block_table.size()) * block_size,
                "{} positions but the block table covers {}",
                static_cast<int64_t>(first_position) + num_tokens, block_table.size() * block_size);
  REPRISE_CHECK(layer >= 0 && layer < kv.n_layer && kv_head >= 0 && kv_head < kv.n_kv_head,
                "bad layer {} or kv head {}", layer, kv_head);
  REPRISE_CHECK(q_stride >= static_cast<int64_t>(group) * head_dim &&
                    out_stride >= static_cast<int64_t>(group) * head_dim,
                "row strides {} and {} shorter than a row", q_stride, out_stride);
  REPRISE_CHECK(prepared.data == nullptr ||
                    (kv.type == KvType::kQ8 &&
                     prepared.stride >= static_cast<int64_t>(group) *
                                            static_cast<int64_t>(PreparedQueryBytes(kv))),
                "prepared queries for KV type {}, {} bytes apart", static_cast<int>(kv.type),
                prepared.stride);
  PagedAttentionKernel kernel = PagedAttentionScalar;
#if defined(REPRISE_KERNELS_AVX512)
  if (target == CpuTarget::kAvx512) kernel = PagedAttentionAvx512;
#endif
#if defined(REPRISE_KERNELS_AVX2)
  if (target == CpuTarget::kAvx2) kernel = PagedAttentionAvx2;
#endif
  return kernel;
}

// Flushes denormal results and inputs to zero while attention runs, then gives the thread its
// own mode back. Probabilities of scores far below a row's max land in the denormal range, where
// every operation on them takes a microcode assist: on spread scores (a random-weight 3B model,
// a peaked head) the q8 kernel ran 5.7x slower. Values that small cannot move an attention
// output; the bits stay a function of the inputs.
class FlushDenormals {
 public:
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero); }
  ~FlushDenormals() { _mm_setcsr(saved_); }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  static constexpr unsigned kFlushToZero = 0x8000;       // MXCSR.FZ
  static constexpr unsigned kDenormalsAreZero = 0x0040;  // MXCSR.DAZ
  unsigned saved_;
};

// Runs `kernel` over the run in calls of at most kMaxAttentionRows query rows.
void RunInCalls(PagedAttentionKernel kernel, const PagedKv& kv, int layer, int kv_head,
                const float* q, int64_t q_stride, int group, std::span<const int32_t> block_table,
                int first_position, int num_tokens, float scale, float* out, int64_t out_stride,
                const AttentionBlocks& blocks, const PreparedQueries& prepared) {
  const FlushDenormals flush_denormals;
  const int tokens_per_call = std::max(1, kMaxAttentionRows / group);
  for (int t = 0; t < num_tokens; t += tokens_per_call) {
    AttentionBlocks call = blocks;
    if (blocks.max != nullptr) {
      call.max = blocks.max + t * group;
      call.sum = blocks.sum + t * group;
    }
    PreparedQueries call_queries = prepared;
    if (prepared.data != nullptr) call_queries.data += t * prepared.stride;
    kernel(kv, layer, kv_head, q + t * q_stride, q_stride, group, block_table, first_position + t,
           std::min(tokens_per_call, num_tokens - t), scale, out + t * out_stride, out_stride, call,
           call_queries);
  }
}

}  // namespace

int AttentionSplitBlocks(int block_size) {
  return std::max(1, kAttentionSplitPositions / std::max(1, block_size));
}

int AttentionSplits(int block_size, int num_positions) {
  const int blocks = (num_positions + block_size - 1) / block_size;
  const int per_split = AttentionSplitBlocks(block_size);
  return std::max(1, (blocks + per_split - 1) / per_split);
}

void PagedAttentionTokensOnTarget(CpuTarget target, const PagedKv& kv, int layer, int kv_head,
                                  const float* q, int64_t q_stride, int group,
                                  std::span<const int32_t> block_table, int first_position,
                                  int num_tokens, float scale, float* out, int64_t out_stride,
                                  const PreparedQueries& prepared) {
  const PagedAttentionKernel kernel =
      CheckedKernel(target, kv, layer, kv_head, q_stride, group, block_table, first_position,
                    num_tokens, out_stride, prepared);
  const int splits = AttentionSplits(kv.block_size, first_position + num_tokens);
  if (splits == 1) {
    RunInCalls(kernel, kv, layer, kv_head, q, q_stride, group, block_table, first_position,
               num_tokens, scale, out, out_stride, AttentionBlocks{}, prepared);
    return;
  }
  // The queries prepared once for every split (where the caller has not).
  std::vector<std::byte> own_prepared;
  PreparedQueries queries = prepared;
  const size_t query_bytes = PreparedQueryBytes(kv);
  if (queries.data == nullptr && query_bytes > 0) {
    queries.stride = static_cast<int64_t>(group * query_bytes);
    own_prepared.resize(static_cast<size_t>(num_tokens) * group * query_bytes);
    for (int t = 0; t < num_tokens; ++t) {
      PrepareQueriesOnTarget(target, kv, q + t * q_stride, group, scale,
                             own_prepared.data() + t * queries.stride);
    }
    queries.data = own_prepared.data();
  }
  // One split after another into partials, then the merge: the arithmetic the threads of
  // PagedAttentionPartial + MergeAttentionPartials do.
  const int64_t row = static_cast<int64_t>(group) * kv.head_dim;
  const size_t rows = static_cast<size_t>(num_tokens) * group;
  std::vector<float> acc(static_cast<size_t>(splits) * num_tokens * row);
  std::vector<float> stats(static_cast<size_t>(splits) * 2 * rows);
  std::vector<AttentionPartial> partials(static_cast<size_t>(splits));
  for (int s = 0; s < splits; ++s) {
    partials[s] = {.acc = acc.data() + static_cast<size_t>(s) * num_tokens * row,
                   .acc_stride = row,
                   .max = stats.data() + static_cast<size_t>(s) * 2 * rows,
                   .sum = stats.data() + static_cast<size_t>(s) * 2 * rows + rows};
    PagedAttentionPartialOnTarget(target, kv, layer, kv_head, q, q_stride, group, block_table,
                                  first_position, num_tokens, scale, s, partials[s], queries);
  }
  MergeAttentionPartialsOnTarget(target, kv, group, first_position, num_tokens, partials, out,
                                 out_stride);
}

void PagedAttentionPartial(const PagedKv& kv, int layer, int kv_head, const float* q,
                           int64_t q_stride, int group, std::span<const int32_t> block_table,
                           int first_position, int num_tokens, float scale, int split,
                           const AttentionPartial& partial, const PreparedQueries& prepared) {
  PagedAttentionPartialOnTarget(BestCpuTarget(), kv, layer, kv_head, q, q_stride, group,
                                block_table, first_position, num_tokens, scale, split, partial,
                                prepared);
}

void PagedAttentionPartialOnTarget(CpuTarget target, const PagedKv& kv, int layer, int kv_head,
                                   const float* q, int64_t q_stride, int group,
                                   std::span<const int32_t> block_table, int first_position,
                                   int num_tokens, float scale, int split,
                                   const AttentionPartial& partial,
                                   const PreparedQueries& prepared) {
  const PagedAttentionKernel kernel =
      CheckedKernel(target, kv, layer, kv_head, q_stride, group, block_table, first_position,
                    num_tokens, partial.acc_stride, prepared);
  REPRISE_CHECK(split >= 0, "split {}", split);
  const int per_split = AttentionSplitBlocks(kv.block_size);
  const AttentionBlocks blocks{.first_block = split * per_split,
                               .end_block = (split + 1) * per_split,
                               .max = partial.max,
                               .sum = partial.sum};
  RunInCalls(kernel, kv, layer, kv_head, q, q_stride, group, block_table, first_position,
             num_tokens, scale, partial.acc, partial.acc_stride, blocks, prepared);
}

// Per row, in split order: m = max(M, m_s); L = L e^(M - m) + l_s e^(m_s - m);
// acc = acc e^(M - m) + acc_s e^(m_s - m); then acc * (1 / L), as a one-pass kernel normalizes.
// Plain float operations in a fixed order (the file is built without FMA contraction).
namespace {

constexpr int kMergeBatch = 32;  // splits merged per pass over a row
constexpr int kMergeLanes = 16;  // elements carried through a batch's splits at once

// Elements [d0, d0 + kLanes) of a row through a batch's splits [first, end): from x = start[d],
// x = x * keeps[s] + sources[s][d] * adds[s] in split order, then dst[d] = x * inverse.
template <int kLanes>
inline void MergeElements(const float* start, const float* const* sources, const float* keeps,
                          const float* adds, int first, int end, float inverse, int d0,
                          float* dst) {
  float x[kLanes];
  for (int i = 0; i < kLanes; ++i) x[i] = start[d0 + i];
  for (int s = first; s < end; ++s) {
    const float* src = sources[s] + d0;
    for (int i = 0; i < kLanes; ++i) x[i] = x[i] * keeps[s] + src[i] * adds[s];
  }
  for (int i = 0; i < kLanes; ++i) dst[d0 + i] = x[i] * inverse;
}

// A MergeRowFunction (paged_attention_internal.h) in portable code, kMergeLanes elements at a
// time.
void MergeRowScalar(const float* start, const float* const* sources, const float* keeps,
                    const float* adds, int first, int end, float inverse, int head_dim,
                    float* dst) {
  int d0 = 0;
  for (; d0 + kMergeLanes <= head_dim; d0 += kMergeLanes) {
    MergeElements<kMergeLanes>(start, sources, keeps, adds, first, end, inverse, d0, dst);
  }
  for (; d0 < head_dim; ++d0) {
    MergeElements<1>(start, sources, keeps, adds, first, end, inverse, d0, dst);
  }
}

}  // namespace

void MergeAttentionPartials(const PagedKv& kv, int group, int first_position, int num_tokens,
                            std::span<const AttentionPartial> partials, float* out,
                            int64_t out_stride) {
  MergeAttentionPartialsOnTarget(BestCpuTarget(), kv, group, first_position, num_tokens, partials,
                                 out, out_stride);
}

void MergeAttentionPartialsOnTarget(CpuTarget target, const PagedKv& kv, int group,
                                    int first_position, int num_tokens,
                                    std::span<const AttentionPartial> partials, float* out,
                                    int64_t out_stride) {
  const FlushDenormals flush_denormals;
  const int head_dim = kv.head_dim;
  MergeRowFunction merge_row = MergeRowScalar;
#if defined(REPRISE_KERNELS_AVX512)
  if (target == CpuTarget::kAvx512) merge_row = MergeRowAvx512;
#endif
  for (int t = 0; t < num_tokens; ++t) {
    const int splits = AttentionSplits(kv.block_size, first_position + t + 1);
    REPRISE_CHECK(static_cast<size_t>(splits) <= partials.size(), "{} partials for {} splits",
                  partials.size(), splits);
    for (int g = 0; g < group; ++g) {
      const size_t row = static_cast<size_t>(t) * group + g;
      const int64_t offset = static_cast<int64_t>(g) * head_dim;
      // Splits a batch at a time: the batch's factors first, then each element through its
      // splits in one pass. Each element's operations, and so its bits, are those of merging
      // one split after another.
      float* dst = out + t * out_stride + offset;
      float max = partials[0].max[row];
      float sum = partials[0].sum[row];
      for (int s0 = 0; s0 < splits; s0 += kMergeBatch) {
        const int s_end = std::min(splits, s0 + kMergeBatch);
        float keeps[kMergeBatch];
        float adds[kMergeBatch];
        const float* sources[kMergeBatch];
        for (int s = std::max(s0, 1); s < s_end; ++s) {
          const AttentionPartial& p = partials[static_cast<size_t>(s)];
          sources[s - s0] = p.acc + t * p.acc_stride + offset;
          const float merged = std::max(max, p.max[row]);
          keeps[s - s0] = std::exp(max - merged);
          adds[s - s0] = std::exp(p.max[row] - merged);
          sum = sum * keeps[s - s0] + p.sum[row] * adds[s - s0];
          max = merged;
        }
        const bool last = s_end == splits;
        const float inverse = last ? 1.0f / sum : 1.0f;
        const float* start = s0 == 0 ? partials[0].acc + t * partials[0].acc_stride + offset : dst;
        merge_row(start, sources, keeps, adds, s0 == 0 ? 1 : 0, s_end - s0, inverse, head_dim, dst);
      }
    }
  }
}

// The reference: one query at a time, each K/V row converted for every head that reads it.
void PagedAttentionScalar(const PagedKv& kv, int layer, int kv_head, const float* q,
                          int64_t q_stride, int group, std::span<const int32_t> block_table,
                          int first_position, int num_tokens, float scale, float* out,
                          int64_t out_stride, const AttentionBlocks& blocks,
                          const PreparedQueries& prepared) {
  for (int t = 0; t < num_tokens; ++t) {
    AttentionBlocks query = blocks;
    if (blocks.max != nullptr) {
      query.max = blocks.max + t * group;
      query.sum = blocks.sum + t * group;
    }
    if (kv.type == KvType::kQ8) {
      const QueryQ8* prepared_heads =
          prepared.data == nullptr
              ? nullptr
              : reinterpret_cast<const QueryQ8*>(prepared.data + t * prepared.stride);
      QueryScalarQ8(kv, layer, kv_head, q + t * q_stride, prepared_heads, group, block_table,
                    first_position + t + 1, scale, out + t * out_stride, query);
    } else {
      QueryScalar(kv, layer, kv_head, q + t * q_stride, group, block_table, first_position + t + 1,
                  scale, out + t * out_stride, query);
    }
  }
}

}  // namespace reprise::kernels
