// Attention over a KV cache kept in fixed-size blocks. A query reads every key and value from the
// block storage (after rounding to the KV type), in position order with a fixed blocking of the
// online softmax, so its result does not depend on which positions were computed in this step,
// came from cache, or on chunk boundaries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu_target.h"

namespace reprise::kernels {

enum class KvType : uint32_t { kF32 = 0, kF16 = 1, kQ8 = 2 };

// Bytes of one stored element: for kQ8, of one code (its scales come on top, see PagedKv).
constexpr size_t KvElementBytes(KvType type) {
  return type == KvType::kF32 ? 4 : type == KvType::kF16 ? 2 : 1;
}

// kQ8 keeps 8-bit codes with a float scale per slot and group of kKvQ8KeyGroup key dimensions
// (keys) or per slot (values); its head_dim and block_size must be multiples of 4.
inline constexpr int kKvQ8KeyGroup = 32;

// The block storage, owned elsewhere (kvcache's BlockPool). One block:
//   [n_layer][2 (K, V)][n_kv_head][plane], where for f32 and f16 a key plane is
//   [head_dim][block_size] elements (transposed: the kernels score many slots at once from
//   contiguous slots of one dimension) and a value plane is [block_size][head_dim].
// kQ8 planes hold codes laid out for 4-way integer dot products, then their scales:
//   key plane:   codes [head_dim / 4][block_size][4] as unsigned bytes (the signed code + 128),
//                then scales [ceil(head_dim / kKvQ8KeyGroup)][block_size] f32;
//   value plane: codes [block_size / 4][head_dim][4] signed bytes, then scales [block_size] f32;
//   a key or value is its code times its scale.
// Blocks are `BlockBytes()` apart starting at `base`.
struct PagedKv {
  uint8_t* base = nullptr;
  KvType type = KvType::kF16;
  int n_layer = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int block_size = 16;

  // Key groups of a kQ8 key plane (each with its own scale per slot).
  int KeyGroups() const { return (head_dim + kKvQ8KeyGroup - 1) / kKvQ8KeyGroup; }
  // Bytes of one key (kv 0) or value (kv 1) plane.
  size_t PlaneBytes(int kv) const {
    const size_t codes = static_cast<size_t>(block_size) * head_dim * KvElementBytes(type);
    if (type != KvType::kQ8) return codes;
    const size_t scales = kv == 0 ? static_cast<size_t>(KeyGroups()) * block_size : block_size;
    return codes + scales * sizeof(float);
  }
  size_t BlockBytes() const {
    return static_cast<size_t>(n_layer) * n_kv_head * (PlaneBytes(0) + PlaneBytes(1));
  }
  // Start of the plane of (block, layer, K or V, kv head).
  uint8_t* Plane(int32_t block, int layer, int kv, int kv_head) const {
    const size_t key_plane = PlaneBytes(0);
    const size_t layer_start = static_cast<size_t>(layer) * n_kv_head * (key_plane + PlaneBytes(1));
    const size_t in_layer = kv == 0 ? static_cast<size_t>(kv_head) * key_plane
                                    : static_cast<size_t>(n_kv_head) * key_plane +
                                          static_cast<size_t>(kv_head) * PlaneBytes(1);
    return base + static_cast<size_t>(block) * BlockBytes() + layer_start + in_layer;
  }
};

// Writes one position's keys and values (rounded to kv.type) into slot `slot` of `block`.
//   k, v: [n_kv_head][head_dim]
void StoreKv(const PagedKv& kv, int layer, int32_t block, int slot, const float* k, const float* v);

// Queries in the form a KV type's kernels read them, made once per token and read by every
// split and call that attends with it (rather than once per split): for kQ8, each query head's
// 8-bit codes with their scales; nothing for f32 and f16, whose kernels read the floats. Token
// t's heads lie at data + t * stride, PreparedQueryBytes(kv) apart; the kernels of every target
// read the same form.
struct PreparedQueries {
  const std::byte* data = nullptr;
  int64_t stride = 0;
};
// Bytes of one prepared query head (0: the KV type has no prepared form).
size_t PreparedQueryBytes(const PagedKv& kv);
// Prepares `num_heads` query heads of one token (q: [num_heads][head_dim], the attention's
// scale applied) into out ([num_heads] x PreparedQueryBytes(kv), 4-byte aligned). Every target
// prepares the same bytes; the OnTarget form is for tests.
void PrepareQueries(const PagedKv& kv, const float* q, int num_heads, float scale, std::byte* out);
void PrepareQueriesOnTarget(CpuTarget target, const PagedKv& kv, const float* q, int num_heads,
                            float scale, std::byte* out);

// Causal attention of `group` query heads that share KV head `kv_head` (grouped-query attention),
// over positions [0, num_positions) of one sequence whose blocks are `block_table` in order.
//   q: [group][head_dim], out: [group][head_dim]; scale is usually 1/sqrt(head_dim).
void PagedAttention(const PagedKv& kv, int layer, int kv_head, const float* q, int group,
                    std::span<const int32_t> block_table, int num_positions, float scale,
                    float* out);

// PagedAttention on a named target (tests, benchmarks); PagedAttention uses BestCpuTarget().
// Each target has its own bits (its own summation trees and exp), the same on every call.
void PagedAttentionOnTarget(CpuTarget target, const PagedKv& kv, int layer, int kv_head,
                            const float* q, int group, std::span<const int32_t> block_table,
                            int num_positions, float scale, float* out);

// Several consecutive query positions of one sequence at once (prefill): token t, at position
// first_position + t, attends over positions [0, first_position + t]. Each K/V block is read
// (and converted) once for all the tokens and heads that need it. Every token's output has the
// same bits as PagedAttention(kv, layer, kv_head, q_t, group, block_table,
// first_position + t + 1, scale, out_t) on the same target: a query does exactly the operations
// it would do alone, over its own positions only (no masking by -inf).
//   q:   [num_tokens] rows q_stride floats apart, each [group][head_dim]
//   out: [num_tokens] rows out_stride floats apart, each [group][head_dim]
// `prepared`, where given, holds the run's queries prepared (PrepareQueries with this scale),
// token t's heads of this KV head at prepared.data + t * prepared.stride; where not, a call
// prepares them itself.
void PagedAttentionTokens(const PagedKv& kv, int layer, int kv_head, const float* q,
                          int64_t q_stride, int group, std::span<const int32_t> block_table,
                          int first_position, int num_tokens, float scale, float* out,
                          int64_t out_stride, const PreparedQueries& prepared = {});
void PagedAttentionTokensOnTarget(CpuTarget target, const PagedKv& kv, int layer, int kv_head,
                                  const float* q, int64_t q_stride, int group,
                                  std::span<const int32_t> block_table, int first_position,
                                  int num_tokens, float scale, float* out, int64_t out_stride,
                                  const PreparedQueries& prepared = {});

// Long contexts. A query over more than kAttentionSplitPositions positions is attended in splits
// of that many (a fixed partition of positions, in whole blocks): each split's partial softmax
// state is computed on its own, so the splits of one sequence can run on different threads, and
// the partials are merged in split order. The partition depends only on the query's positions and
// the block size, never on the threads or the batch, and so do the bits. 512 positions: a
// split's fixed costs (its calls, partial state and share of the merge) stay small beside its
// work (a warm 3B turn's attention 5% faster than with 256), and a long context still gives one
// sequence several items per KV head.
inline constexpr int kAttentionSplitPositions = 512;
// Blocks per split, and the splits a query over `num_positions` positions uses (1 for short ones,
// which are attended in one pass as before).
int AttentionSplitBlocks(int block_size);
int AttentionSplits(int block_size, int num_positions);

// One split's partial state for the query rows of a run (as PagedAttentionTokens): acc rows not
// normalized (token t's at acc + t * acc_stride, [group][head_dim]), and each row's running max
// and sum at index t * group + g. A row whose query does not reach the split keeps acc 0,
// max -inf and sum 0.
struct AttentionPartial {
  float* acc = nullptr;
  int64_t acc_stride = 0;
  float* max = nullptr;  // [num_tokens * group]
  float* sum = nullptr;  // [num_tokens * group]
};
void PagedAttentionPartial(const PagedKv& kv, int layer, int kv_head, const float* q,
                           int64_t q_stride, int group, std::span<const int32_t> block_table,
                           int first_position, int num_tokens, float scale, int split,
                           const AttentionPartial& partial, const PreparedQueries& prepared = {});
void PagedAttentionPartialOnTarget(CpuTarget target, const PagedKv& kv, int layer, int kv_head,
                                   const float* q, int64_t q_stride, int group,
                                   std::span<const int32_t> block_table, int first_position,
                                   int num_tokens, float scale, int split,
                                   const AttentionPartial& partial,
                                   const PreparedQueries& prepared = {});

// Merges each row's partials (splits 0 .. AttentionSplits(its positions) - 1, in that order)
// into normalized out rows: exactly what PagedAttentionTokens writes for the run.
//   partials[s]: split s of the run; out: [num_tokens] rows out_stride apart, [group][head_dim]
void MergeAttentionPartials(const PagedKv& kv, int group, int first_position, int num_tokens,
                            std::span<const AttentionPartial> partials, float* out,
                            int64_t out_stride);
// The same on one target (every target's merge gives the same bits).
void MergeAttentionPartialsOnTarget(CpuTarget target, const PagedKv& kv, int group,
                                    int first_position, int num_tokens,
                                    std::span<const AttentionPartial> partials, float* out,
                                    int64_t out_stride);

}  // namespace reprise::kernels
