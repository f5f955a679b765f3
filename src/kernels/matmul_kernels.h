// The per-target inner kernels of MatMul (one table per CPU target) and the operand layouts they
// share. Internal to kernels/; matmul.cpp drives them.
//
// Exactness: a tile function computes every output (t, r) of its tile with the same sequence of
// operations whatever the tile's size (mt x nr), so an output's bits depend only on its own
// activation row, its weight row and the target.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/weight_type.h"

namespace reprise::kernels {

// How activations are quantized to int8 for a matrix's integer kernels (see
// TargetKernels::activation_form).
enum class ActivationForm {
  // One scale per block of 32 (QuantizeActivationRow): every target's default.
  kPerBlock,
  // One scale per super-block of 256 and the integer sum of each 16
  // (QuantizeActivationRowPerSuperBlock): a K-quant super-block's sub-blocks then add up in
  // integers, with one float multiply-add per super-block instead of one per block.
  kPerSuperBlock,
};

// Activation rows quantized for the integer kernels, in one of the two forms.
struct QuantizedRows {
  const int8_t* q = nullptr;  // [tokens][cols]   values in [-127, 127]
  // kPerBlock: scale of each 16, both of a block's equal: [tokens][cols / 16];
  // kPerSuperBlock: scale of each 256: [tokens][cols / 256].
  const float* d = nullptr;
  const float* sum = nullptr;          // kPerBlock: [tokens][cols / 32] d * sum of the block's q
  const int16_t* group_sum = nullptr;  // kPerSuperBlock: [tokens][cols / 16] sum of each 16's q
  // kPerBlock, where the target reads them (TargetKernels::zero_point_lanes): [tokens][cols / 8]
  // at 4b + i, z * the sum of q over elements 4i..4i+3 and 16 + 4i..16 + 4i + 3 of block b (lane
  // i of the tiles' lane sums): what codes with a zero point z (8: Q4_0, 16: Q5_0) take off a
  // lane's sum of codes * q, formed once per token instead of once per row, and taken off once
  // per lane of 8 products instead of once per pair.
  const int32_t* zero8_lanes = nullptr;
  const int32_t* zero16_lanes = nullptr;
  // kPerBlock, where the target reads them (TargetKernels::negated_group_sums_row):
  // [tokens][cols / 16] minus the sum of q over each 16 elements, which a tile of codes with a
  // zero point z (a power of two) shifts into the start of each group's sum: formed once per
  // token, not once per row group.
  const int32_t* negated_group_sums = nullptr;
  int64_t cols = 0;
  ActivationForm form = ActivationForm::kPerBlock;

  // Token t's lane sums for codes with zero point z: null where they are not there (another zero
  // point, or a target that does not read them).
  const int32_t* ZeroLanes(int z, int64_t t) const {
    const int32_t* lanes = z == 8 ? zero8_lanes : z == 16 ? zero16_lanes : nullptr;
    return lanes != nullptr ? lanes + t * (cols / 8) : nullptr;
  }
};

// Weight rows in the unpacked integer form (see unpacked.h).
struct UnpackedRows {
  const uint8_t* q = nullptr;    // [rows][cols]
  const float* scale = nullptr;  // [rows][cols / 16]
  const float* min = nullptr;    // [rows][cols / 32], or null for types without a min
  int64_t cols = 0;
  int zero_point = 0;
  // Both 16-groups of each block of 32 have one scale (ScalesPer32): a tile may read one per
  // block. False is always correct.
  bool scales_per_32 = false;
};

// Weight rows as stored (quantized blocks), for tiles that unpack as they go.
struct RawRows {
  WeightType type = WeightType::kQ4_0;
  const uint8_t* data = nullptr;  // first row of the matrix
  size_t row_bytes = 0;
  int zero_point = 0;
  bool has_min = false;
  // A tile at row r asks for rows [r + prefetch_rows, r + prefetch_rows + its rows) ahead of
  // their use (about as many bytes ahead as memory needs to answer, whatever the row length),
  // but none from prefetch_end on: those are another thread's, or past the matrix.
  int64_t prefetch_rows = 0;
  int64_t prefetch_end = 0;
};

// The most columns a raw tile accepts (it keeps a row's mins on the stack); wider matrices use
// the panel path.
inline constexpr int64_t kMaxRawCols = 65536;

// Rows per block and most tokens per call of the interleaved prefill tiles (TargetKernels).
inline constexpr int kInterleavedRows = 16;
inline constexpr int kInterleavedTokenTile = 4;

// Most tokens per call of a row-group tile (TargetKernels::row_group_tile), and most tokens of
// a product over a matrix in row groups computed by those tiles (several calls per group).
inline constexpr int kRowGroupTokens = 4;
inline constexpr int kRowGroupMaxTokens = 32;
// One group of a matrix in row groups as a pair tile reads it (TargetKernels::row_group_pair_tile):
// its bytes, where its prefetch stops, and its 16 outputs.
struct GroupRead {
  const uint8_t* group = nullptr;
  const uint8_t* ahead_end = nullptr;
  float* y = nullptr;
};

// Most tokens per call of a float row-group tile (TargetKernels::float_group_tile).
inline constexpr int kFloatGroupTokens = 8;

// Floats of one output's lane sums carried by TargetKernels::float_span_tile (the widest lanes).
inline constexpr int kFloatSpanSums = 16;

struct TargetKernels {
  // Largest tile (mt tokens x nr rows) each tile function accepts.
  int float_token_tile = 1;
  int float_row_tile = 1;
  int quant_token_tile = 1;
  int quant_row_tile = 1;
  // Rows per quant_tile_raw call, where they differ from quant_row_tile (0: the same).
  int raw_row_tile = 0;

  // y[t * y_stride + r] = sum_c x[t * x_stride + c] * w[r * w_stride + c], t < mt, r < nr;
  // w holds elements of `type` (F32, F16 or BF16), w_stride counts elements. The result does not
  // depend on `type` beyond the weights' values: widening is exact.
  void (*float_tile)(WeightType type, const float* x, int64_t x_stride, int mt, const void* w,
                     int64_t w_stride, int nr, int64_t cols, float* y, int64_t y_stride) = nullptr;

  // float_tile on f32 rows over columns [c_begin, c_end) only, carrying each output's lane sums
  // between calls in `sums` (kFloatSpanSums floats per output, output (t, r) at
  // (t * nr + r) * kFloatSpanSums): from zero where c_begin is 0, and summed into y as float_tile
  // sums them where c_end is cols. A prefill panel's long rows are reduced in spans, so that a
  // token tile's span of activations stays in L1 while every row tile of the panel reads it.
  // Each lane's chain runs over its columns in order however they are cut, so the bits are
  // float_tile's. c_begin is a multiple of 16. Null: float_tile over whole rows.
  void (*float_span_tile)(const float* x, int64_t x_stride, int mt, const float* w,
                          int64_t w_stride, int nr, int64_t c_begin, int64_t c_end, int64_t cols,
                          float* sums, float* y, int64_t y_stride) = nullptr;

  // y[t * y_stride + r] = dot(x row t0 + t, w row r0 + r), t < mt, r < nr: nr is any count (a
  // panel's rows, quant_row_tile at a time inside, so that a token tile is set up once per
  // panel). Null where interleaved_tile serves instead.
  void (*quant_tile)(const QuantizedRows& x, int64_t t0, int mt, const UnpackedRows& w, int64_t r0,
                     int nr, float* y, int64_t y_stride) = nullptr;

  // As quant_tile, reading rows r0 .. r0 + nr - 1 of `w` in their stored blocks; gives the same
  // bits as the target's panel tile on the same rows unpacked. Optional (null: the driver
  // unpacks a panel). For the types activation_form puts in kPerSuperBlock it is the only tile:
  // it serves prefill too, and x comes in that form.
  void (*quant_tile_raw)(const QuantizedRows& x, int64_t t0, int mt, const RawRows& w, int64_t r0,
                         int nr, float* y, int64_t y_stride) = nullptr;

  // Prefill over rows rearranged once per panel for the target (optional; null: quant_tile on the
  // unpacked panel). interleave writes rows [r0, r0 + nr) of an unpacked panel (nr <=
  // kInterleavedRows) as one block of interleaved_block_bytes(cols) bytes (64-byte aligned), their
  // mins included where the panel has them; interleaved_tile computes tokens t0 .. t0 + mt - 1
  // (mt <= kInterleavedTokenTile) over a block's nr rows, adding the mins' products where `mins`
  // (types with mins). The same bits as the target's quant_tile_raw on the same rows.
  size_t (*interleaved_block_bytes)(int64_t cols) = nullptr;
  void (*interleave)(const UnpackedRows& w, int64_t r0, int nr, uint8_t* out) = nullptr;
  void (*interleaved_tile)(const QuantizedRows& x, int64_t t0, int mt, const uint8_t* block,
                           bool mins, int nr, float* y, int64_t y_stride) = nullptr;
  // Optional, for the types and layouts interleaves_weights names: writes nr rows of the matrix
  // (`rows`, row_bytes apart; a whole row group for WeightLayout::kRowGroups) as one interleaved
  // block, the bytes interleave writes from the same rows unpacked, without the unpacked panel in
  // between.
  bool (*interleaves_weights)(WeightType type, WeightLayout layout) = nullptr;
  void (*interleave_weights)(WeightType type, WeightLayout layout, const uint8_t* rows,
                             size_t row_bytes, int64_t cols, int nr, uint8_t* out) = nullptr;

  // The activation form quant_tile_raw takes for `type`, for row-major matrices of at most
  // kMaxRawCols columns (others, and every type where this is null, take kPerBlock).
  ActivationForm (*activation_form)(WeightType type) = nullptr;

  // dst[i] = value of src[i] (F16 or BF16), exact.
  void (*widen)(WeightType type, const void* src, int64_t n, float* dst) = nullptr;

  // Whether the tiles read QuantizedRows::zero8_lanes and zero16_lanes, and ZeroPointLanesRow or
  // a faster equivalent with identical output (null: that function) to form them.
  bool zero_point_lanes = false;
  void (*zero_point_lanes_row)(const int8_t* q, int64_t cols, int32_t* eights,
                               int32_t* sixteens) = nullptr;

  // Forms QuantizedRows::negated_group_sums (sums[g] = -(sum of q[16 g .. 16 g + 15])) where
  // the tiles read them (null: they do not).
  void (*negated_group_sums_row)(const int8_t* q, int64_t cols, int32_t* sums) = nullptr;

  // QuantizeActivationRow, or a faster equivalent with identical output (null: that function).
  void (*quantize_row)(const float* x, int64_t cols, int8_t* q, float* d, float* sum) = nullptr;
  // The same for QuantizeActivationRowPerSuperBlock.
  void (*quantize_row_per_super_block)(const float* x, int64_t cols, int8_t* q, float* d,
                                       int16_t* group_sum) = nullptr;

  // UnpackBlocks (unpacked.h), or a faster equivalent with byte-identical output.
  void (*unpack)(WeightType type, const void* row, int64_t first_block, int64_t num_blocks,
                 uint8_t* q, float* scale, float* min) = nullptr;

  // Decode over row groups (row_groups.h) in the grouped layout group_layout, for the types
  // has_row_group_tile names (optional: elsewhere grouped rows, and groups of the other grouped
  // layout, are read back through the panel path). row_group_tile computes
  // y[t * y_stride + r] = dot(x row t0 + t, row r of the group), t < mt (<= kRowGroupTokens),
  // r < 16, with the bits of the target's other tiles, reading the group once; it asks for the
  // bytes after the group's, up to ahead_end, as it goes.
  WeightLayout group_layout = WeightLayout::kRowMajor;
  // The matrices (type, columns) whose row_group_tile serves products of any token count, not
  // only up to kRowGroupMaxTokens, since it outruns the prefill panels (optional: none).
  bool (*row_groups_prefill)(WeightType type, int64_t cols) = nullptr;
  bool (*has_row_group_tile)(WeightType type) = nullptr;
  void (*row_group_tile)(WeightType type, const QuantizedRows& x, int64_t t0, int mt,
                         const uint8_t* group, const uint8_t* ahead_end, float* y,
                         int64_t y_stride) = nullptr;
  // One token over two groups at once, each group's outputs row_group_tile's (the same bits):
  // a decode step then reads its matrix as two streams, which memory answers faster than one
  // (optional: the types has_row_group_pair_tile names; elsewhere a group at a time).
  bool (*has_row_group_pair_tile)(WeightType type) = nullptr;
  void (*row_group_pair_tile)(WeightType type, const QuantizedRows& x, int64_t t0,
                              const GroupRead (&reads)[2]) = nullptr;

  // UngroupRows (row_groups.h) for group_layout, or a faster equivalent with byte-identical
  // output (null: that function).
  void (*ungroup_rows)(WeightType type, const uint8_t* group, int64_t cols, uint8_t* out) = nullptr;

  // F16 and BF16 row groups in group_layout (optional: elsewhere they are read back to stored
  // rows). float_group_tile computes y[t * y_stride + r] = dot(x row t, row r of the group),
  // t < mt (<= kFloatGroupTokens), r < 16, with float_tile's bits, reading the group once; it
  // asks for the bytes after the group's, up to ahead_end, as it goes. widen_group writes the
  // group's rows widened to f32, row r at panel + r * stride, for the prefill panel.
  void (*float_group_tile)(WeightType type, const float* x, int64_t x_stride, int mt,
                           const uint8_t* group, int64_t cols, const uint8_t* ahead_end, float* y,
                           int64_t y_stride) = nullptr;
  void (*widen_group)(WeightType type, const uint8_t* group, int64_t cols, float* panel,
                      int64_t stride) = nullptr;
  // One token over two groups at once, each group's outputs float_group_tile's (the same bits),
  // as row_group_pair_tile (optional: elsewhere a group at a time).
  void (*float_group_pair_tile)(WeightType type, const float* x, int64_t cols,
                                const GroupRead (&reads)[2]) = nullptr;
};

// The decode tile of the AVX2 target (decode_avx2.cpp): TargetKernels::quant_tile_raw for every
// quantized type, mt <= 4 tokens, nr <= 4 rows; K-quants (k_quant_avx2.cpp) take activations
// in the super-block form (ActivationFormAvx2).
void DecodeTileAvx2(const QuantizedRows& x, int64_t t0, int mt, const RawRows& w, int64_t r0,
                    int nr, float* y, int64_t y_stride);
void KQuantTileAvx2(const QuantizedRows& x, int64_t t0, int mt, const RawRows& w, int64_t r0,
                    int nr, float* y, int64_t y_stride);
ActivationForm ActivationFormAvx2(WeightType type);

// The row-group tile of the AVX2 target (row_groups_avx2.cpp), over WeightLayout::kRowStreams:
// Q4_0, Q5_0, Q8_0, Q4_K and Q5_K, else none. K-quants take activations in the super-block form
// (their tile: k_quant_streams_avx2.cpp).
bool HasRowGroupTileAvx2(WeightType type);
bool RowGroupsPrefillAvx2(WeightType type, int64_t cols);
void RowGroupTileAvx2(WeightType type, const QuantizedRows& x, int64_t t0, int mt,
                      const uint8_t* group, const uint8_t* ahead_end, float* y, int64_t y_stride);
void KQuantStreamTileAvx2(WeightType type, const QuantizedRows& x, int64_t t0, int mt,
                          const uint8_t* group, const uint8_t* ahead_end, float* y,
                          int64_t y_stride);
// UngroupRows for kRowStreams with AVX2 (8 x 8 word transposes), the same bytes.
void UngroupRowStreamsAvx2(WeightType type, const uint8_t* group, int64_t cols, uint8_t* out);
// TargetKernels::float_group_tile and widen_group of the AVX2 target: F16 and BF16 streams.
void FloatGroupTileAvx2(WeightType type, const float* x, int64_t x_stride, int mt,
                        const uint8_t* group, int64_t cols, const uint8_t* ahead_end, float* y,
                        int64_t y_stride);
void WidenGroupAvx2(WeightType type, const uint8_t* group, int64_t cols, float* panel,
                    int64_t stride);

// UnpackBlocks with AVX2 + F16C (unpack_avx2.cpp), shared by the AVX2 and AVX-512 targets.
// The first prefetches ahead along the row (for reading a row from start to end); the second
// leaves prefetching to its caller.
void UnpackBlocksAvx2(WeightType type, const void* row, int64_t first_block, int64_t num_blocks,
                      uint8_t* q, float* scale, float* min);
void UnpackBlocksAvx2NoPrefetch(WeightType type, const void* row, int64_t first_block,
                                int64_t num_blocks, uint8_t* q, float* scale, float* min);
// As UnpackBlocksAvx2NoPrefetch, with AVX-512 for Q4_0, Q4_1 and Q8_0 (matmul_avx512.cpp).
void UnpackBlocksAvx512NoPrefetch(WeightType type, const void* row, int64_t first_block,
                                  int64_t num_blocks, uint8_t* q, float* scale, float* min);

// FloatsToHalves with F16C (unpack_avx2.cpp).
void FloatsToHalvesF16c(const float* src, int64_t n, uint16_t* dst);

// A one-token tile: y[r] = dot(x row t0, w row r0 + r) for its rows (see DecodeTileAvx512).
using QuantTileRawFn = void (*)(const QuantizedRows& x, int64_t t0, const RawRows& w, int64_t r0,
                                float* y, int64_t y_stride);

// How a one-token AVX-512 tile splits bytes of packed 4-bit codes: by shifts and masks, or by
// GFNI byte affine transforms (fewer operations). The same codes, so the same bits.
enum class NibbleSplit { kShift, kGfni };

// kGfni where this CPU has GFNI (every AVX-512 CPU since Ice Lake and Zen 4), else kShift.
NibbleSplit BestNibbleSplit();

// The one-token AVX-512 tile of `nr` rows (1 .. 4) for `type`, or null where the general tile
// serves (decode_avx512.cpp). Same bits as the general tiles, whatever `split`; kGfni only where
// BestNibbleSplit() says so.
QuantTileRawFn DecodeTileAvx512(WeightType type, int nr, NibbleSplit split);

// The row-group tiles of the AVX-512 target (row_groups_avx512.cpp), over
// WeightLayout::kRowGroups: Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, else none.
bool HasRowGroupTileAvx512(WeightType type);
void RowGroupTileAvx512(WeightType type, const QuantizedRows& x, int64_t t0, int mt,
                        const uint8_t* group, const uint8_t* ahead_end, float* y, int64_t y_stride);
// Its pair tiles: Q4_0, Q8_0 and Q4_K.
bool HasRowGroupPairTileAvx512(WeightType type);
void RowGroupPairTileAvx512(WeightType type, const QuantizedRows& x, int64_t t0,
                            const GroupRead (&reads)[2]);
void UngroupRowsAvx512(WeightType type, const uint8_t* group, int64_t cols, uint8_t* out);
void NegatedGroupSumsRowAvx512(const int8_t* q, int64_t cols, int32_t* sums);
// TargetKernels::float_group_tile, float_group_pair_tile and widen_group of the AVX-512 target:
// F16 and BF16.
void FloatGroupPairTileAvx512(WeightType type, const float* x, int64_t cols,
                              const GroupRead (&reads)[2]);
void FloatGroupTileAvx512(WeightType type, const float* x, int64_t x_stride, int mt,
                          const uint8_t* group, int64_t cols, const uint8_t* ahead_end, float* y,
                          int64_t y_stride);
void WidenGroupAvx512(WeightType type, const uint8_t* group, int64_t cols, float* panel,
                      int64_t stride);

// The interleaved prefill tiles of the AVX-512 target (interleaved_avx512.cpp).
size_t InterleavedBlockBytesAvx512(int64_t cols);
void InterleaveRowsAvx512(const UnpackedRows& w, int64_t r0, int nr, uint8_t* out);
// Straight from the matrix: Q8_0 rows as stored; Q8_0, Q4_K, Q5_K and Q6_K row groups.
bool InterleavesWeightsAvx512(WeightType type, WeightLayout layout);
void InterleaveWeightsAvx512(WeightType type, WeightLayout layout, const uint8_t* rows,
                             size_t row_bytes, int64_t cols, int nr, uint8_t* out);
void InterleavedTileAvx512(const QuantizedRows& x, int64_t t0, int mt, const uint8_t* block,
                           bool mins, int nr, float* y, int64_t y_stride);

// The activation form MatMulOnTarget quantizes x in for w on `target`.
ActivationForm ActivationFormFor(CpuTarget target, const WeightView& w);

const TargetKernels& ScalarKernels();
const TargetKernels& Avx2Kernels();
const TargetKernels& Avx512Kernels();

// QuantizeActivationRow with AVX-512: the same operations per element, so the same output
// (matmul_avx512.cpp).
void QuantizeActivationRowAvx512(const float* x, int64_t cols, int8_t* q, float* d, float* sum);

// QuantizeActivationRow and QuantizeActivationRowPerSuperBlock with AVX2: the same operations per
// element, so the same output for finite activations (matmul_avx2.cpp; a NaN, which no
// quantizer makes meaningful, may give other codes).
void QuantizeActivationRowAvx2(const float* x, int64_t cols, int8_t* q, float* d, float* sum);
void QuantizeActivationRowPerSuperBlockAvx2(const float* x, int64_t cols, int8_t* q, float* d,
                                            int16_t* group_sum);

// Quantizes one activation row per block of 32: d = max|x| / 127, q = round_even(x * 127 / max|x|)
// (q = 0 when max|x| <= 1e-30).
// Shared by every target, so all targets see the same quantized activations.
//   x: [cols], q: [cols], d: [cols / 16], sum: [cols / 32]
void QuantizeActivationRow(const float* x, int64_t cols, int8_t* q, float* d, float* sum);

// The zero-point lane sums of one quantized activation row (QuantizedRows::zero8_lanes and
// zero16_lanes): lane 4b + i gets 8 and 16 times the sum of q over elements 4i..4i+3 and
// 16 + 4i..16 + 4i + 3 of block b.   q: [cols], eights, sixteens: [cols / 8]
void ZeroPointLanesRow(const int8_t* q, int64_t cols, int32_t* eights, int32_t* sixteens);
void ZeroPointLanesRowAvx2(const int8_t* q, int64_t cols, int32_t* eights, int32_t* sixteens);

// The same per super-block of 256 (cols a multiple of 256): d = max|x| / 127 over the 256, q as
// above, and the sum of each 16 of q (ActivationForm::kPerSuperBlock).
//   x: [cols], q: [cols], d: [cols / 256], group_sum: [cols / 16]
void QuantizeActivationRowPerSuperBlock(const float* x, int64_t cols, int8_t* q, float* d,
                                        int16_t* group_sum);

}  // namespace reprise::kernels
