// Decode tiles (1 to 4 tokens) for AVX-512 over rows in the row-group layout (row_groups.h):
// Q4_0, Q8_0, Q4_K, Q5_K and Q6_K, the types whose four-row decode tiles stayed below the speed
// memory answers at, and F16 and BF16 (1 to 8 tokens, and the prefill panel's widening); and the
// AVX-512 reader of groups back into stored rows.
//
// A 64-byte vector of a group holds 4 codes of each of 16 rows (row r in lane r), so one dot
// product with the token's 4 bytes broadcast adds 4 products to each of 16 rows, and 4 of them
// make each row's exact 16-group sum in its own lane: no lanes to add across rows, no shuffles.
// The arithmetic is that of every quantized tile (quant_reads_avx512.h): a register per chain
// c_j, row r in lane r; the same products w_scale * x_scale; for Q4_K and Q5_K, MinsDot's 16
// partial sums and its tree, in registers whose lane r is row r's. So the same bits as the
// four-row tiles on the stored rows.
//
// On an Emerald Rapids core the shift port limited them, as it limits the four-row tiles: the
// K-quants' 6-bit scales are taken apart by byte shuffles, Q4_K's high nibbles are used in place
// (16 x their sum, divided once per group) and Q5_K's fifth bits set by masks the layout keeps
// ready (loaded, where testing qh's bits took two shuffle-port operations per code vector: 84.7%
// -> 85.6% of the bandwidth, means of three paired runs). Measured by `reprise bench kernels -t 2`
// (2 threads, share of the streaming-read bandwidth), against the four-row tiles: Q4_0 83% ->
// 91%, Q4_K 79% -> 86-88%, Q5_K 80% -> 85-86.5%.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "kernels/float_group_tile.h"
#include "kernels/k_group_avx512.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/reduce_avx512.h"
#include "kernels/row_groups.h"
#include "kernels/simd.h"
#include "kernels/stream_ahead.h"

namespace reprise::kernels {

namespace {

inline __m512i Vec(const uint8_t* p) { return _mm512_loadu_si512(p); }

// Vec(p) for a vector that two operations take apart (its low and its high codes), read once
// into a register: GCC folds the load into each of them, reading the bytes twice (groups in L2,
// one thread, Zen 5: Q4_0 one token 67 -> 80 GB/s, four and eight tokens 1.1x; Q4_K two and
// four tokens 1.08x; from memory, one token, Q4_K and Q5_K 1.03x, Q4_0 even).
inline __m512i VecOnce(const uint8_t* p) {
  __m512i v = Vec(p);
  asm("" : "+v"(v));
  return v;
}

// The token's 4 bytes at p in every lane.
inline __m512i Bytes4(const int8_t* p) {
  int32_t word;
  std::memcpy(&word, p, sizeof(word));
  return _mm512_set1_epi32(word);
}

// -kZeroPoint times the sum of a token's codes over group g (`negated_sums`, the token's
// QuantizedRows::negated_group_sums): what codes with that zero point, made unsigned, take off
// the group's sum. In every lane.
template <int kZeroPoint>
inline __m512i ZeroPointSum(const int32_t* negated_sums, int64_t g) {
  static_assert(kZeroPoint > 0 && (kZeroPoint & (kZeroPoint - 1)) == 0, "a power of two");
  return _mm512_slli_epi32(_mm512_set1_epi32(negated_sums[g]),
                           std::countr_zero(unsigned{kZeroPoint}));
}

// Each row's four chains (row r in lane r) added as ChainTotalsOfRows adds them: (c0 + c1) +
// (c2 + c3).
inline __m512 ChainTotals(const __m512 (&chains)[4]) {
  return _mm512_add_ps(_mm512_add_ps(chains[0], chains[1]), _mm512_add_ps(chains[2], chains[3]));
}

// Each token's four chains of a tile (row r in lane r): in registers, with the tile's token loop
// unrolled so that every chain is named at compile time; or in memory, each read and written
// around its update, with the token loop left a loop. The chains' values and the order of their
// additions are the same either way. Which one is faster depends on what else the tile keeps in
// registers (LegacyGroupTile and Q6KGroupTile say).
// Tokens from which the Q4_0, Q8_0 and Q6_K tiles keep their chains in memory (their own
// comments give the measurements).
inline constexpr int kMemoryChainTokens = 3;

template <int MT, bool kInMemory>
class TileChains {
 public:
  TileChains() {
    for (int t = 0; t < MT; ++t) {
      for (int k = 0; k < 4; ++k) Set(t, k, _mm512_setzero_ps());
    }
  }
  __m512 Get(int t, int k) const {
    if constexpr (kInMemory) {
      return _mm512_load_ps(memory_[t][k]);
    } else {
      return registers_[t][k];
    }
  }
  void Set(int t, int k, __m512 value) {
    if constexpr (kInMemory) {
      _mm512_store_ps(memory_[t][k], value);
    } else {
      registers_[t][k] = value;
    }
  }
  // chain k of token t += sum * scale, as every tile adds a group: one fused multiply-add.
  void Add(int t, int k, __m512 sum, __m512 scale) {
    Set(t, k, _mm512_fmadd_ps(sum, scale, Get(t, k)));
  }
  __m512 Totals(int t) const {
    const __m512 chains[4] = {Get(t, 0), Get(t, 1), Get(t, 2), Get(t, 3)};
    return ChainTotals(chains);
  }

 private:
  [[maybe_unused]] __m512 registers_[kInMemory ? 1 : MT][4];
  [[maybe_unused]] alignas(64) float memory_[kInMemory ? MT : 1][4][16];
};

// body(t) for each token t < MT, as TileChains<MT, kInMemory> wants it: unrolled (t a constant
// once inlined) for chains in registers, else a loop.
template <int MT, bool kInMemory, typename Body>
__attribute__((always_inline)) inline void ForEachToken(const Body& body) {
  if constexpr (kInMemory) {
    for (int t = 0; t < MT; ++t) body(t);
  } else {
    Unroll<MT>([&](auto token) { body(static_cast<int>(decltype(token)::value)); });
  }
}

// Each tile computes MT tokens (1 to kRowGroupTokens) per read of the group: per block, the
// codes are taken apart once and each token's sums made from them.

// Q4_0 and Q8_0: per block, the words of codes of the 16 rows (Q4_0: four, each holding codes
// of both groups in its nibbles; Q8_0: eight, four per group), then their 16 scales d. The codes
// are made unsigned (Q4_0's nibbles are; Q8_0's bytes + 128) and each group's sum starts at
// -zero point x the token's sum over the group, as the four-row tiles do: exact integers.
template <typename Block>
struct LegacyGroupBlock {
  static constexpr bool kBytes = std::is_same_v<Block, BlockQ8_0>;
  static constexpr int kZeroPoint = kBytes ? 128 : 8;
  static constexpr int64_t kBytesInGroup = kRowGroupRows * sizeof(Block);

  // The block of the group at `p`, taken apart.
  __attribute__((always_inline)) explicit LegacyGroupBlock(const uint8_t* p) {
    constexpr int64_t kScalesAt = kRowGroupRows * sizeof(Block::qs);
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int q = 0; q < 4; ++q) {
      if constexpr (kBytes) {
        low_codes[q] = _mm512_xor_si512(Vec(p + 64 * q), bias);
        high_codes[q] = _mm512_xor_si512(Vec(p + 64 * (4 + q)), bias);
      } else {
        const __m512i v = VecOnce(p + 64 * q);
        low_codes[q] = _mm512_and_si512(v, nibble);
        high_codes[q] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
      }
    }
    d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kScalesAt)));
  }

  // Token `token`'s sums over the block (block b of its row) added to chains kLow and kLow + 1
  // of chain set t.
  template <int kLow, int MT, bool kInMemory>
  __attribute__((always_inline)) void AddTo(const QuantizedRows& x, int64_t token, int64_t b, int t,
                                            TileChains<MT, kInMemory>& chains) const {
    const int64_t cols = x.cols;
    const int8_t* xb = x.q + token * cols + kQk * b;
    const float* xd = x.d + token * (cols / 16) + 2 * b;
    const int32_t* sums = x.negated_group_sums + token * (cols / 16);
    __m512i low = ZeroPointSum<kZeroPoint>(sums, 2 * b);
    __m512i high = ZeroPointSum<kZeroPoint>(sums, 2 * b + 1);
    for (int q = 0; q < 4; ++q) {
      low = _mm512_dpbusd_epi32(low, low_codes[q], Bytes4(xb + 4 * q));
      high = _mm512_dpbusd_epi32(high, high_codes[q], Bytes4(xb + 16 + 4 * q));
    }
    chains.Add(t, kLow, _mm512_cvtepi32_ps(low), _mm512_mul_ps(d, _mm512_set1_ps(xd[0])));
    chains.Add(t, kLow + 1, _mm512_cvtepi32_ps(high), _mm512_mul_ps(d, _mm512_set1_ps(xd[1])));
  }

  __m512i low_codes[4], high_codes[4];  // word q of each group, elements 4q .. 4q + 3
  __m512 d;
};

// block(b, kLow) over a row's `blocks` blocks, kLow a constant: block b's groups 2b and 2b + 1
// go to chains 2 (b % 2) and 2 (b % 2) + 1.
template <typename BlockFn>
__attribute__((always_inline)) inline void ForEachLegacyBlock(int64_t blocks,
                                                              const BlockFn& block) {
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    block(b, std::integral_constant<int, 0>{});
    block(b + 1, std::integral_constant<int, 2>{});
  }
  if (b < blocks) block(b, std::integral_constant<int, 0>{});  // a lone last block: groups 0, 1
}

template <typename Block, int MT>
void LegacyGroupTile(const QuantizedRows& x, int64_t t0, const uint8_t* group,
                     const uint8_t* ahead_end, float* y, int64_t y_stride) {
  using GroupBlock = LegacyGroupBlock<Block>;
  // Q8_0's blocks are twice Q4_0's, yet it streamed faster asking half as far ahead (2 threads,
  // Zen 5: 78-81 against 74-75 GB/s).
  StreamAhead<GroupBlock::kBytes ? 4096 : 8192, 0> ahead(group, ahead_end);
  // From 3 tokens, chains in memory: unrolled, the tokens' chains and a block's eight code
  // vectors outgrew the registers and GCC spilled them about the loop (2 threads, Zen 5, 128 MiB
  // from memory, tokens 3 / 4 / 8: Q4_0 1.29x / 1.37x / 1.32x, Q8_0 1.11x / 1.17x / 1.28x as
  // fast; 2 tokens, 0.96x both, stay in registers). The K-quant tiles, whose codes take more
  // registers still, measured 0.9-1.07x so: they keep theirs in registers.
  constexpr bool kChainsInMemory = MT >= kMemoryChainTokens;
  TileChains<MT, kChainsInMemory> chains;
  ForEachLegacyBlock(x.cols / kQk, [&](int64_t b, auto low) {
    const uint8_t* p = group + b * GroupBlock::kBytesInGroup;
    ahead.Upto(p + GroupBlock::kBytesInGroup);
    const GroupBlock codes(p);
    ForEachToken<MT, kChainsInMemory>(
        [&](int t) { codes.template AddTo<decltype(low)::value>(x, t0 + t, b, t, chains); });
  });
  for (int t = 0; t < MT; ++t) _mm512_storeu_ps(y + t * y_stride, chains.Totals(t));
}

// One token over two groups, block by block in turn, each group's chains and arithmetic as
// LegacyGroupTile's (so its bits).
template <typename Block>
void LegacyGroupPairTile(const QuantizedRows& x, int64_t t0, const GroupRead (&reads)[2]) {
  using GroupBlock = LegacyGroupBlock<Block>;
  PairAhead ahead(reads);
  TileChains<1, false> chains[2];
  ForEachLegacyBlock(x.cols / kQk, [&](int64_t b, auto low) {
    Unroll<2>([&](auto read) {
      constexpr int s = decltype(read)::value;
      const uint8_t* p = reads[s].group + b * GroupBlock::kBytesInGroup;
      ahead.Along(s).Upto(p + GroupBlock::kBytesInGroup);
      const GroupBlock codes(p);
      codes.template AddTo<decltype(low)::value>(x, t0, b, 0, chains[s]);
    });
  });
  for (int s = 0; s < 2; ++s) _mm512_storeu_ps(reads[s].y, chains[s].Totals(0));
}

// Q4_K and Q5_K: each super-block's 36 or 44 words, 16 rows each. What does not depend on the
// token is made once and serves every token: each sub-block's d x scale and dmin x min, and
// each chunk's codes split into nibbles (with Q5_K's fifth bits). Made per token, 2-4 tokens had
// cost 2-4 times one; shared, they run 1.2x (2 tokens), 1.35x (3) and 1.3x (4) as fast (1 GiB
// Q4_K, 2 threads, Zen 5). Each token's float products and their order are as before.
//
// A super-block of a group as every token takes it: each sub-block's d x scale (the products of
// UnpackBlocks), and, made on the way, dmin x min of each sub-block times each token's sum over
// it, taken off the tokens' MinsDot partial sums (min_sums[t][l] holds sub-blocks l, l + 16, ...).
template <typename Block>
struct KGroupSuperBlock {
  static_assert(offsetof(Block, d) == 0 && offsetof(Block, scales) == 4 && kKScaleBytes == 12);
  static constexpr int64_t kBytesInGroup = kRowGroupRows * sizeof(Block);

  template <int MT>
  __attribute__((always_inline))
  KGroupSuperBlock(const uint8_t* p, const QuantizedRows& x, int64_t t0, int64_t sb,
                   __m512 (&min_sums)[MT][16]) {
    const auto word = [&](int i) { return Vec(p + 64 * i); };
    const __m512i head = word(0);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
    const PackedScales packed = UnpackScaleBytes(word(1), word(2), word(3));
    __m512 dmin_mins[8];
    Unroll<8>([&](auto sub) {
      constexpr int s = decltype(sub)::value;
      d_scales[s] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(ByteOfWords(packed.scales[s / 4], s % 4)));
      dmin_mins[s] =
          _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(ByteOfWords(packed.mins[s / 4], s % 4)));
    });
    Unroll<MT>([&](auto token) {
      constexpr int t = decltype(token)::value;
      const float* span_sums = x.sum + (t0 + t) * (x.cols / 32) + sb * 8;
      __m512* span_min_sums = min_sums[t] + 8 * (sb & 1);
      // fma(-(dmin m), x_sum, acc) as MinsDot makes it: the negation is exact.
      for (int s = 0; s < 8; ++s) {
        span_min_sums[s] =
            _mm512_fnmadd_ps(dmin_mins[s], _mm512_set1_ps(span_sums[s]), span_min_sums[s]);
      }
    });
  }

  __m512 d_scales[8];
};

// Half h of chunk j of a group's super-block (at p): sub-block 2j + h, the code words' low
// nibbles (h = 0: groups 4j, 4j + 1) or high ones (h = 1: 4j + 2, 4j + 3), split once for every
// token. Q4_K's high nibbles stay in place: 16 x their sum, divided in AddTo (exact).
template <typename Block, int j, int h>
struct KGroupHalf {
  static constexpr bool kFifthBits = std::is_same_v<Block, BlockQ5_K>;

  // The half's codes from code word u's vector v.
  __attribute__((always_inline)) static __m512i Codes(const uint8_t* p, int u, __m512i v) {
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    if constexpr (kFifthBits) {
      // Bit 2j + h of qh[l] as bit 4, by the masks the layout keeps (no shifts: the shift port
      // is the busiest; no tests: the shuffle port the next).
      const __m512i nibbles =
          h == 0 ? _mm512_and_si512(v, nibble) : _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
      return _mm512_mask_add_epi8(nibbles, FifthBits(p, j, u, h), nibbles, _mm512_set1_epi8(0x10));
    } else {
      return h == 0 ? _mm512_and_si512(v, nibble) : _mm512_andnot_si512(nibble, v);
    }
  }

  static const uint8_t* Word(const uint8_t* p, int u) {
    return p + 64 * (offsetof(Block, qs) / 4 + 8 * j + u);
  }

  __attribute__((always_inline)) explicit KGroupHalf(const uint8_t* p) {
    for (int u = 0; u < 8; ++u) codes[u] = Codes(p, u, Vec(Word(p, u)));
  }

  // Token `token`'s sums over the half (of super-block sb) from `half_codes`, times the
  // sub-block's d x scale and the token's scale, added to its chains 2h and 2h + 1.
  __attribute__((always_inline)) static void AddTo(const __m512i (&half_codes)[8],
                                                   const QuantizedRows& x, int64_t token,
                                                   int64_t sb, const __m512 (&d_scales)[8],
                                                   __m512 (&chains)[4]) {
    const int64_t cols = x.cols;
    const int8_t* xc = x.q + token * cols + sb * kQkK + 64 * j + 32 * h;
    const float* span_xd = x.d + token * (cols / 16) + sb * 16;
    __m512i sums[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    for (int u = 0; u < 8; ++u) {
      sums[u / 4] = DotBytes(sums[u / 4], half_codes[u], Bytes4(xc + 4 * u));
    }
    if constexpr (!kFifthBits && h == 1) {
      sums[0] = _mm512_srai_epi32(sums[0], 4);
      sums[1] = _mm512_srai_epi32(sums[1], 4);
    }
    constexpr int s = 2 * j + h;
    const __m512 scale = _mm512_mul_ps(d_scales[s], _mm512_set1_ps(span_xd[2 * s]));
    for (int k = 0; k < 2; ++k) {
      chains[2 * h + k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[k]), scale, chains[2 * h + k]);
    }
  }
  __attribute__((always_inline)) void AddTo(const QuantizedRows& x, int64_t token, int64_t sb,
                                            const __m512 (&d_scales)[8],
                                            __m512 (&chains)[4]) const {
    AddTo(codes, x, token, sb, d_scales, chains);
  }

  __m512i codes[8];
};

// Chunk j of a group's super-block (at p): both its halves (KGroupHalf), each code word loaded
// once for both.
template <typename Block, int j>
struct KGroupChunk {
  using Low = KGroupHalf<Block, j, 0>;
  using High = KGroupHalf<Block, j, 1>;

  __attribute__((always_inline)) explicit KGroupChunk(const uint8_t* p) {
    for (int u = 0; u < 8; ++u) {
      const __m512i v = VecOnce(Low::Word(p, u));
      low[u] = Low::Codes(p, u, v);
      high[u] = High::Codes(p, u, v);
    }
  }

  // Token `token`'s sums over the chunk (of super-block sb), times each sub-block's d x scale
  // and the token's scale, added to its four chains.
  __attribute__((always_inline)) void AddTo(const QuantizedRows& x, int64_t token, int64_t sb,
                                            const __m512 (&d_scales)[8],
                                            __m512 (&chains)[4]) const {
    Low::AddTo(low, x, token, sb, d_scales, chains);
    High::AddTo(high, x, token, sb, d_scales, chains);
  }

  __m512i low[8], high[8];
};

// A group's outputs from its chains and MinsDot's partial sums (which MinsDotOfRows adds up in
// place).
inline __m512 KGroupTotals(const __m512 (&chains)[4], __m512 (&min_sums)[16], int64_t cols) {
  return _mm512_add_ps(ChainTotals(chains), MinsDotOfRows(min_sums, cols / 32));
}

template <typename Block, int MT>
void KGroupTile(const QuantizedRows& x, int64_t t0, const uint8_t* group, const uint8_t* ahead_end,
                float* y, int64_t y_stride) {
  using SuperBlock = KGroupSuperBlock<Block>;
  StreamAhead<8192, 0> ahead(group, ahead_end);
  __m512 chains[MT][4];
  __m512 min_sums[MT][16];
  for (int t = 0; t < MT; ++t) {
    for (__m512& chain : chains[t]) chain = _mm512_setzero_ps();
    for (__m512& sum : min_sums[t]) sum = _mm512_setzero_ps();
  }
  for (int64_t sb = 0; sb < x.cols / kQkK; ++sb) {
    const uint8_t* p = group + sb * SuperBlock::kBytesInGroup;
    const SuperBlock scales(p, x, t0, sb, min_sums);
    Unroll<4>([&](auto chunk) {
      constexpr int j = decltype(chunk)::value;
      // A quarter of a block's lines at a time: asked for all at once, they wait for fill
      // buffers (Q5_K: 85% -> 89% of the read bandwidth, Q4_K: 87-88% -> 89%).
      ahead.Upto(p + (j + 1) * (SuperBlock::kBytesInGroup / 4));
      if constexpr (MT == 1) {
        const KGroupChunk<Block, j> codes(p);
        codes.AddTo(x, t0, sb, scales.d_scales, chains[0]);
      } else {
        // Several tokens take a half at a time: its 8 code registers beside their chains,
        // where both halves' 16 had made GCC spill (4 tokens: 370 -> 259 stack accesses).
        // 1B layer matrices, 2 threads, Zen 5, 3-16 tokens: Q4_K 1.06-1.27x, Q5_K 1.08-1.23x
        // as fast (medians of runs alternated), one token unchanged.
        Unroll<2>([&](auto half) {
          const KGroupHalf<Block, j, decltype(half)::value> codes(p);
          Unroll<MT>([&](auto token) {
            constexpr int t = decltype(token)::value;
            codes.AddTo(x, t0 + t, sb, scales.d_scales, chains[t]);
          });
        });
      }
    });
  }
  for (int t = 0; t < MT; ++t) {
    _mm512_storeu_ps(y + t * y_stride, KGroupTotals(chains[t], min_sums[t], x.cols));
  }
}

// One token over two Q4_K groups, chunk by chunk in turn (each super-block's scales of both
// groups first), each group's arithmetic KGroupTile's (so its bits). On a 1B model's layer matrices
// (2 threads, Zen 5, in process against one group at a time) 1.03-1.15x as fast, the most in the
// memory's slower spells; super-block by super-block in turn it was 0.8x. Q5_K, which splits its
// codes with more work, measured 0.98-1.01x as a pair and stays one group at a time.
template <typename Block>
void KGroupPairTile(const QuantizedRows& x, int64_t t0, const GroupRead (&reads)[2]) {
  using SuperBlock = KGroupSuperBlock<Block>;
  PairAhead ahead(reads);
  __m512 chains[2][4];
  __m512 min_sums[2][1][16];
  for (int g = 0; g < 2; ++g) {
    for (__m512& chain : chains[g]) chain = _mm512_setzero_ps();
    for (__m512& sum : min_sums[g][0]) sum = _mm512_setzero_ps();
  }
  for (int64_t sb = 0; sb < x.cols / kQkK; ++sb) {
    const uint8_t* p[2] = {reads[0].group + sb * SuperBlock::kBytesInGroup,
                           reads[1].group + sb * SuperBlock::kBytesInGroup};
    const SuperBlock scales[2] = {SuperBlock(p[0], x, t0, sb, min_sums[0]),
                                  SuperBlock(p[1], x, t0, sb, min_sums[1])};
    Unroll<4>([&](auto chunk) {
      constexpr int j = decltype(chunk)::value;
      Unroll<2>([&](auto read) {
        constexpr int g = decltype(read)::value;
        ahead.Along(g).Upto(p[g] + (j + 1) * (SuperBlock::kBytesInGroup / 4));
        const KGroupChunk<Block, j> codes(p[g]);
        codes.AddTo(x, t0, sb, scales[g].d_scales, chains[g]);
      });
    });
  }
  for (int g = 0; g < 2; ++g) {
    _mm512_storeu_ps(reads[g].y, KGroupTotals(chains[g], min_sums[g][0], x.cols));
  }
}

// Q6_K: each super-block's 52 words of 16 rows, then their 16 d (Q6KGroupCodes says where each
// element is). Codes 0-63 against a zero point of 32: each group's sum starts at -32 x the
// token's sum over it (exact integers). Group 8 n + 2 k + h goes to chain (2 k + h) % 4, each
// chain's groups in ascending order, as in the four-row tiles. A half n's groups of one h are
// taken together: its four ql words of each parity and its four qh words (twelve registers, each
// read once) serve its four quarters k, where a pass per quarter had read every qh word four
// times and every ql word twice. Chains as the legacy tile keeps them: registers up to 2 tokens,
// memory from 3 (beside the twelve words, 4 tokens' chains in registers spilled). Against the
// pass per quarter (Zen 5, 2 threads, from memory, alternated): one token 38.6 -> 39.7 and
// 60.8 -> 65.0 GB/s (a slow and a fast spell); 2048 columns at 2 / 4 / 8 / 16 tokens 1.19x /
// 1.07x / 1.23x / 1.26x; 4096 and 8192 columns even at 2 tokens, 1.14-1.23x at 16.
template <int MT>
void Q6KGroupTile(const QuantizedRows& x, int64_t t0, const uint8_t* group,
                  const uint8_t* ahead_end, float* y, int64_t y_stride) {
  constexpr int64_t kBlockBytes = kRowGroupRows * sizeof(BlockQ6_K);
  constexpr int kQh = offsetof(BlockQ6_K, qh) / 4;
  constexpr bool kChainsInMemory = MT >= kMemoryChainTokens;
  const int64_t cols = x.cols;
  const int64_t supers = cols / kQkK;
  StreamAhead<8192, 0> ahead(group, ahead_end);
  TileChains<MT, kChainsInMemory> chains;
  for (int64_t sb = 0; sb < supers; ++sb) {
    const uint8_t* p = group + sb * kBlockBytes;
    const __m512 d = Q6KGroupD(p);
    Unroll<4>([&](auto half) {
      constexpr int n = decltype(half)::value / 2, h = decltype(half)::value % 2;
      ahead.Upto(p + (decltype(half)::value + 1) * (kBlockBytes / 4));
      __m512i ql[2][4], qh[4];  // ql words of quarters 0 and 2, of 1 and 3; qh words
      for (int w = 0; w < 4; ++w) {
        ql[0][w] = VecOnce(p + 64 * (16 * n + 4 * h + w));
        ql[1][w] = VecOnce(p + 64 * (16 * n + 8 + 4 * h + w));
        qh[w] = VecOnce(p + 64 * (kQh + 8 * n + 4 * h + w));
      }
      Unroll<4>([&](auto quarter) {
        constexpr int k = decltype(quarter)::value;
        __m512i codes[4];
        for (int w = 0; w < 4; ++w) codes[w] = Q6KCodesOf(ql[k % 2][w], qh[w], k);
        const __m512 scale = Q6KGroupScale(p, d, 8 * n + 2 * k + h);
        const int64_t first = sb * kQkK + 128 * n + 32 * k + 16 * h;  // the group's first element
        ForEachToken<MT, kChainsInMemory>([&](int t) {
          const int8_t* xq = x.q + (t0 + t) * cols;
          __m512i sum = ZeroPointSum<32>(x.negated_group_sums + (t0 + t) * (cols / 16), first / 16);
          for (int w = 0; w < 4; ++w) sum = DotBytes(sum, codes[w], Bytes4(xq + first + 4 * w));
          chains.Add(
              t, (2 * k + h) % 4, _mm512_cvtepi32_ps(sum),
              _mm512_mul_ps(scale, _mm512_set1_ps(x.d[(t0 + t) * (cols / 16) + first / 16])));
        });
      });
    });
  }
  for (int t = 0; t < MT; ++t) _mm512_storeu_ps(y + t * y_stride, chains.Totals(t));
}

template <int MT>
void GroupTile(WeightType type, const QuantizedRows& x, int64_t t0, const uint8_t* group,
               const uint8_t* ahead_end, float* y, int64_t y_stride) {
  switch (type) {
    case WeightType::kQ4_0:
      return LegacyGroupTile<BlockQ4_0, MT>(x, t0, group, ahead_end, y, y_stride);
    case WeightType::kQ8_0:
      return LegacyGroupTile<BlockQ8_0, MT>(x, t0, group, ahead_end, y, y_stride);
    case WeightType::kQ4_K:
      return KGroupTile<BlockQ4_K, MT>(x, t0, group, ahead_end, y, y_stride);
    case WeightType::kQ6_K:
      return Q6KGroupTile<MT>(x, t0, group, ahead_end, y, y_stride);
    default:
      return KGroupTile<BlockQ5_K, MT>(x, t0, group, ahead_end, y, y_stride);
  }
}

// Transposes 16 rows' words: in[i] lane r holds word i of row r (i < n, the rest taken as 0);
// writes words 0 .. n - 1 of row r to rows + r * row_bytes. Three stages of in-lane and lane
// shuffles, 64 operations for 16 x 16 words.
inline void StoreTransposed(const __m512i (&in)[16], int n, uint8_t* rows, int64_t row_bytes) {
  __m512i t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(in[2 * k], in[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(in[2 * k], in[2 * k + 1]);
  }
  // u[4k + j], 128-bit lane L: words 4k .. 4k + 3 of row 4L + j.
  for (int k = 0; k < 4; ++k) {
    u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  const auto mask = static_cast<__mmask16>((1u << n) - 1);
  for (int j = 0; j < 4; ++j) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
    const __m512i v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    _mm512_mask_storeu_epi32(rows + j * row_bytes, mask, _mm512_shuffle_i32x4(v0, v2, 0x88));
    _mm512_mask_storeu_epi32(rows + (4 + j) * row_bytes, mask, _mm512_shuffle_i32x4(v0, v2, 0xDD));
    _mm512_mask_storeu_epi32(rows + (8 + j) * row_bytes, mask, _mm512_shuffle_i32x4(v1, v3, 0x88));
    _mm512_mask_storeu_epi32(rows + (12 + j) * row_bytes, mask, _mm512_shuffle_i32x4(v1, v3, 0xDD));
  }
}

// FloatRowsTokens' vector operations over a 16-row group: a column is its 16 rows' elements
// side by side (32 bytes), widened to f32 exactly with row r in lane r.
struct GroupLanes {
  using Vec = __m512;
  static constexpr int kRows = kRowGroupRows;
  template <WeightType kType>
  static Vec Widen(const uint8_t* column) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(column));
    if constexpr (kType == WeightType::kF16) {
      return _mm512_cvtph_ps(bits);
    } else {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
    }
  }
  static Vec Broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static Vec MultiplyAdd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec Load(const float* p) { return _mm512_load_ps(p); }
  static void Store(float* p, Vec v) { _mm512_store_ps(p, v); }
  static void StoreU(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static Vec SumsOfRows(Vec (&lanes)[kRows], int64_t cols) {
    return HorizontalSumsOfRows(lanes, cols);
  }
};

constexpr int64_t kHalfColumnBytes = 2 * kRowGroupRows;

template <WeightType kType, int MT, int kLanes>
void FloatGroupTokens(const float* x, int64_t x_stride, const uint8_t* group, int64_t cols,
                      const uint8_t* ahead_end, float* y, int64_t y_stride) {
  if constexpr (MT == 1) {
    // A single token's pass streams faster left to the hardware prefetcher than with hints 4
    // KiB ahead, where the hints stall (perf puts the samples on them): 1 GiB F16 and BF16
    // matrices, 2 threads, Zen 5, each run after a 256 MiB pass over other memory, alternated,
    // 42-43 against 45 GB/s, BF16 51-59 against 63; `bench kernels` F16 41-43 against 41-50.
    // With more tokens the hints still pay (2 tokens: 30 against 35 GB/s without them).
    NoStreamAhead ahead;
    FloatRowsTokens<GroupLanes, kType, MT, kLanes>(x, x_stride, group, cols, ahead, y, y_stride);
  } else {
    StreamAhead<4096, 0> ahead(group, ahead_end);
    FloatRowsTokens<GroupLanes, kType, MT, kLanes>(x, x_stride, group, cols, ahead, y, y_stride);
  }
}

// FloatGroupTokens with as many lanes per pass as leave registers for the rest (MT x kLanes
// accumulators at most 24 of the 32).
template <WeightType kType>
void FloatGroupTile(const float* x, int64_t x_stride, int mt, const uint8_t* group, int64_t cols,
                    const uint8_t* ahead_end, float* y, int64_t y_stride) {
  WithTokenCount<kFloatGroupTokens>(mt, [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    FloatGroupTokens<kType, kTokens, LanesPerPass(kTokens, kRowGroupRows, 24)>(
        x, x_stride, group, cols, ahead_end, y, y_stride);
  });
}

// The group's 16 rows widened to f32: row r at panel + r * stride. 16 columns at a time, a
// transposition of their widened vectors.
template <WeightType kType>
void WidenGroup(const uint8_t* group, int64_t cols, float* panel, int64_t stride) {
  for (int64_t c = 0; c < cols; c += 16) {
    const int n = static_cast<int>(std::min<int64_t>(16, cols - c));
    __m512i in[16];
    for (int i = 0; i < 16; ++i) {
      in[i] =
          i < n ? _mm512_castps_si512(GroupLanes::Widen<kType>(group + (c + i) * kHalfColumnBytes))
                : _mm512_setzero_si512();
    }
    StoreTransposed(in, n, reinterpret_cast<uint8_t*>(panel + c),
                    stride * static_cast<int64_t>(sizeof(float)));
  }
}

// The 16 rows' 16-bit scales a group block keeps side by side at `scales`, to offset `at` of each
// row's block (rows row_bytes apart from `first`).
inline void StoreRowScales(const uint8_t* scales, uint8_t* first, size_t at, int64_t row_bytes) {
  for (int r = 0; r < kRowGroupRows; ++r)
    std::memcpy(first + r * row_bytes + at, scales + 2 * r, 2);
}

}  // namespace

void NegatedGroupSumsRowAvx512(const int8_t* q, int64_t cols, int32_t* sums) {
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t c = 0; c < cols; c += 64) {
    const int64_t n = std::min<int64_t>(64, cols - c);
    const __mmask64 mask = n == 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
    // Lane 4 g + i: the sum of the 4 codes at 16 g + 4 i; then each group's four lanes added.
    __m512i s =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_maskz_loadu_epi8(mask, q + c));
    s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
    s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
    s = _mm512_sub_epi32(_mm512_setzero_si512(), s);
    const auto groups = static_cast<int>((n + 15) / 16);
    _mm_mask_storeu_epi32(sums + c / 16, static_cast<__mmask8>((1 << groups) - 1),
                          _mm512_castsi512_si128(_mm512_maskz_compress_epi32(0x1111, s)));
  }
}

void UngroupRowsAvx512(WeightType type, const uint8_t* group, int64_t cols, uint8_t* out) {
  if (type == WeightType::kF16 || type == WeightType::kBF16) {
    // Prefill widens float groups straight into its panel (WidenGroupAvx512); nothing reads them
    // back to stored rows often.
    UngroupRows(type, WeightLayout::kRowGroups, group, cols, out);
    return;
  }
  const auto row_bytes = static_cast<int64_t>(RowBytes(type, cols));
  const auto block_bytes = static_cast<int64_t>(BlockBytes(type));
  const int64_t blocks = cols / static_cast<int64_t>(BlockElements(type));
  if (type == WeightType::kQ4_0) {
    // Per block: the four code words of 16 rows (to bytes 2-17 of each row's block), then their
    // 16 scales (bytes 0-1).
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* p = group + b * kRowGroupRows * block_bytes;
      const __m512i t0 = _mm512_unpacklo_epi32(Vec(p), Vec(p + 64));
      const __m512i t1 = _mm512_unpackhi_epi32(Vec(p), Vec(p + 64));
      const __m512i t2 = _mm512_unpacklo_epi32(Vec(p + 128), Vec(p + 192));
      const __m512i t3 = _mm512_unpackhi_epi32(Vec(p + 128), Vec(p + 192));
      // u[j], 128-bit lane L: the code words of row 4L + j.
      const __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                            _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
      uint8_t* first = out + b * block_bytes;
      for (int j = 0; j < 4; ++j) {
        const __m128i lanes[4] = {_mm512_castsi512_si128(u[j]), _mm512_extracti32x4_epi32(u[j], 1),
                                  _mm512_extracti32x4_epi32(u[j], 2),
                                  _mm512_extracti32x4_epi32(u[j], 3)};
        for (int lane = 0; lane < 4; ++lane) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(first + (4 * lane + j) * row_bytes + 2),
                           lanes[lane]);
        }
      }
      StoreRowScales(p + 256, first, offsetof(BlockQ4_0, d), row_bytes);
    }
    return;
  }
  // Q8_0, Q4_K, Q5_K, Q6_K: every block's words a transposition, 16 at a time, into the row's
  // bytes from words_at; then Q8_0's and Q6_K's 16-bit d, which the group keeps after the words.
  const int words = static_cast<int>(block_bytes / 4);
  const bool has_d = block_bytes % 4 != 0;
  const size_t words_at = type == WeightType::kQ8_0 ? offsetof(BlockQ8_0, qs) : 0;
  const size_t d_at = type == WeightType::kQ8_0 ? offsetof(BlockQ8_0, d) : offsetof(BlockQ6_K, d);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = group + b * kRowGroupRows * block_bytes;
    // Q5_K's words 4-11 (qh) from the fifth-bit masks: bit k of byte 4 r + i of word 4 + u is
    // mask (j, u, half) bit 4 r + i, k = 2 j + half.
    const auto word = [&](int i) {
      if (type != WeightType::kQ5_K || i < 4 || i >= 12) return Vec(p + 64 * i);
      __m512i qh = _mm512_setzero_si512();
      for (int k = 0; k < 8; ++k) {
        qh =
            _mm512_or_si512(qh, _mm512_maskz_mov_epi8(FifthBits(p, k / 2, i - 4, k % 2),
                                                      _mm512_set1_epi8(static_cast<char>(1 << k))));
      }
      return qh;
    };
    uint8_t* first_row = out + b * block_bytes;
    for (int first = 0; first < words; first += 16) {
      const int n = std::min(16, words - first);
      __m512i in[16];
      for (int i = 0; i < 16; ++i) in[i] = i < n ? word(first + i) : _mm512_setzero_si512();
      StoreTransposed(in, n, first_row + words_at + 4 * first, row_bytes);
    }
    if (has_d) StoreRowScales(p + 64 * words, first_row, d_at, row_bytes);
  }
}

bool HasRowGroupPairTileAvx512(WeightType type) {
  return type == WeightType::kQ4_0 || type == WeightType::kQ8_0 || type == WeightType::kQ4_K;
}

void RowGroupPairTileAvx512(WeightType type, const QuantizedRows& x, int64_t t0,
                            const GroupRead (&reads)[2]) {
  if (type == WeightType::kQ8_0) return LegacyGroupPairTile<BlockQ8_0>(x, t0, reads);
  if (type == WeightType::kQ4_K) return KGroupPairTile<BlockQ4_K>(x, t0, reads);
  LegacyGroupPairTile<BlockQ4_0>(x, t0, reads);  // the other type HasRowGroupPairTileAvx512 names
}

bool HasRowGroupTileAvx512(WeightType type) {
  return type == WeightType::kQ4_0 || type == WeightType::kQ8_0 || type == WeightType::kQ4_K ||
         type == WeightType::kQ5_K || type == WeightType::kQ6_K || type == WeightType::kF16 ||
         type == WeightType::kBF16;
}

void FloatGroupTileAvx512(WeightType type, const float* x, int64_t x_stride, int mt,
                          const uint8_t* group, int64_t cols, const uint8_t* ahead_end, float* y,
                          int64_t y_stride) {
  WithHalfType(type, [&](auto half) {
    FloatGroupTile<decltype(half)::value>(x, x_stride, mt, group, cols, ahead_end, y, y_stride);
  });
}

void FloatGroupPairTileAvx512(WeightType type, const float* x, int64_t cols,
                              const GroupRead (&reads)[2]) {
  WithHalfType(
      type, [&](auto half) { FloatRowsPair<GroupLanes, decltype(half)::value>(x, cols, reads); });
}

void WidenGroupAvx512(WeightType type, const uint8_t* group, int64_t cols, float* panel,
                      int64_t stride) {
  WithHalfType(type,
               [&](auto half) { WidenGroup<decltype(half)::value>(group, cols, panel, stride); });
}

void RowGroupTileAvx512(WeightType type, const QuantizedRows& x, int64_t t0, int mt,
                        const uint8_t* group, const uint8_t* ahead_end, float* y,
                        int64_t y_stride) {
  switch (mt) {
    case 1:
      return GroupTile<1>(type, x, t0, group, ahead_end, y, y_stride);
    case 2:
      return GroupTile<2>(type, x, t0, group, ahead_end, y, y_stride);
    case 3:
      return GroupTile<3>(type, x, t0, group, ahead_end, y, y_stride);
    default:
      return GroupTile<4>(type, x, t0, group, ahead_end, y, y_stride);
  }
}

}  // namespace reprise::kernels
