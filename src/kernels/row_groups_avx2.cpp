// Decode tiles (1 to 4 tokens) for AVX2 over rows in the row-streams layout (row_groups.h): Q4_0,
// Q5_0 and Q8_0 (Q4_K and Q5_K: k_quant_streams_avx2.cpp), F16 and BF16 (and their widening for
// the prefill panel), and the layout's reader. Q5_0 is the
// type small models keep most of their matrices in where their widths are not multiples of 256 (a
// 135M model's Q4_K_M file holds 72% of its weight bytes in Q5_0).
//
// The row-by-row tile (decode_avx2.cpp) spent 19 instructions on a row's Q5_0 block of 32 codes,
// six of them testing the stored fifth bits with a byte shuffle and a compare, and, on rows as
// short as a small model's, a horizontal sum and a span set-up per few blocks. Here a 32-byte
// vector holds one code word of 8 rows (row r in 32-bit lane r), the fifth bits come recoded so
// that one shift and one mask place them, and a row's 8 chains stay in 8 registers, with no
// per-row work but the final tree of adds.
//
// The arithmetic is the other AVX2 tiles' (matmul_avx2.cpp's lane layout), so the same bits:
// block b's exact integer, (code - zero point) * x summed over its 32 elements, converted and
// fused into chain b % 8 with the product w_scale * x_scale; then BlockChainsSum's tree. Here
// chain j of row r is lane r of register j. Word u holds elements 4u..4u+3 in its low nibbles
// and 16 + 4u.. in its high ones: the block's four words' pairs add in 16 bits (Q5_0: two
// words') before one madd, one zero-point subtraction, one conversion and one multiply-add per
// block and 8 rows (Zen 1, one thread, 256 x 2048 from L2: Q4_0 9.2-9.4 -> 11.0-12.0 GB/s, Q5_0
// 8.7-8.8 -> 9.7, Q8_0 15.0 -> 15.8).
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "kernels/float_group_tile.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_reads_avx2.h"
#include "kernels/reduce_avx2.h"
#include "kernels/row_groups.h"
#include "kernels/simd.h"
#include "kernels/stream_ahead.h"

namespace reprise::kernels {

namespace {

using avx2::Broadcast4;
using avx2::FifthBitsAt;
using avx2::Load32;

// Where a stream of a group in kRowStreams keeps its pieces (row_groups.h): block b's code word u
// of the stream's 8 rows at words + b * kBlockBytes + 32 u, Q5_0's recoded qh words after the
// code words, then the 8 scales d.
template <typename Block>
struct StreamLayout {
  static constexpr bool kFifthBits = std::is_same_v<Block, BlockQ5_0>;
  static constexpr bool kEightBit = std::is_same_v<Block, BlockQ8_0>;
  static constexpr int kZeroPoint = kFifthBits ? 16 : 8;
  static constexpr int kWords = kEightBit ? 8 : 4;
  static constexpr int64_t kBlockBytes = kRowStreamRows * static_cast<int64_t>(sizeof(Block));
  static constexpr int64_t kQhAt = kWords * 4 * kRowStreamRows;
  static_assert(!kFifthBits || kQhAt == kQ5_0StreamQhAt);
  static constexpr int64_t kScalesAt = kQhAt + (kFifthBits ? 32 : 0);
  static_assert(kScalesAt + 2 * kRowStreamRows == kBlockBytes);
  const uint8_t* words;
  StreamLayout(const uint8_t* group, int64_t blocks, int stream)
      : words(group + stream * blocks * kBlockBytes) {}
  const uint8_t* Block0Qh() const { return words + kQhAt; }
  const uint8_t* Block0Scales() const { return words + kScalesAt; }
};

// Tokens a stream pass takes in prefill (the row-group tile's kRowGroupTokens): they share each
// code word's load and split into codes. Their chains live in memory, since one token's 8 chain
// registers leave no room for more, and the pass runs a rolled loop over blocks (Zen 1, one
// thread, 512 tokens, 1536 x 576: Q8_0 27.9 -> 30.1 GFLOP/s, Q4_0 35.0 -> 45.2; two tokens with
// the blocks unrolled as for one made Q8_0 slower, 26.6).
constexpr int kStreamTokens = kRowGroupTokens;

// A token's activations in the per-block form (QuantizedRows): its codes, scales and zero-point
// lane sums for the layout's zero point.
struct StreamToken {
  const int8_t* q;
  const float* d;
  const int32_t* zero;
};

// MT tokens over one stream of 8 rows: y[t * y_stride + r] = dot(token t, row r) for r < 8. The
// tokens share each code word's load and its split into codes (Q8_0: its magnitudes); with more
// than one, their chains live in the stack frame, a load and a store per block and token beside
// the block's 8 words of work.
template <typename Layout, int MT>
void StreamTile(const StreamToken (&tokens)[MT], int64_t blocks, const Layout& stream,
                StreamAhead<8192, 0>& ahead, float* y, int64_t y_stride) {
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 chains[MT][kBlockChains];
  for (auto& token_chains : chains) {
    for (__m256& chain : token_chains) chain = _mm256_setzero_ps();
  }
  // Block b into chain j = b % kBlockChains of each token (lane r: row r).
  const auto block = [&](int64_t b, int j) __attribute__((always_inline)) {
    const int64_t at = b * Layout::kBlockBytes;
    ahead.Upto(stream.words + at + Layout::kBlockBytes);
    const __m256 w_scale = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(stream.Block0Scales() + at)));
    __m256i sums[MT];
    if constexpr (Layout::kEightBit) {
      // Code word u: elements 4u..4u+3 of each row, signed: maddubs(|w|, sign(x, w)); their
      // pairs may reach 2 * 128 * 127, so they add in 32 bits.
      Unroll<8>([&](auto word_index) __attribute__((always_inline)) {
        constexpr int u = decltype(word_index)::value;
        const __m256i word = Load32(stream.words + at + 32 * u);
        const __m256i magnitude = _mm256_abs_epi8(word);
        for (int t = 0; t < MT; ++t) {
          const __m256i x = _mm256_sign_epi8(Broadcast4(tokens[t].q + b * kQk + 4 * u), word);
          const __m256i word_sums = _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, x), ones);
          sums[t] = u == 0 ? word_sums : _mm256_add_epi32(sums[t], word_sums);
          KeepChain(sums[t]);
        }
      });
    } else {
      __m256i qh = _mm256_setzero_si256();
      if constexpr (Layout::kFifthBits) qh = Load32(stream.Block0Qh() + at);
      // Code word u: elements 4u..4u+3 in its low nibbles, 16 + 4u.. in its high ones. A word's
      // pairs are at most 2 * 2 * 15 * 127 (Q4_0) or 2 * 2 * 31 * 127 (Q5_0), so all four words
      // (Q4_0) or two (Q5_0) add in 16 bits before a madd.
      __m256i pairs[MT];
      Unroll<4>([&](auto word_index) __attribute__((always_inline)) {
        constexpr int u = decltype(word_index)::value;
        const __m256i word = Load32(stream.words + at + 32 * u);
        __m256i low = _mm256_and_si256(word, low_nibbles);
        __m256i high = _mm256_and_si256(_mm256_srli_epi16(word, 4), low_nibbles);
        if constexpr (Layout::kFifthBits) {
          low = _mm256_or_si256(low, FifthBitsAt<2 * u>(qh));
          high = _mm256_or_si256(high, FifthBitsAt<2 * u + 1>(qh));
        }
        for (int t = 0; t < MT; ++t) {
          const int8_t* xb = tokens[t].q + b * kQk;
          const __m256i word_pairs =
              _mm256_add_epi16(_mm256_maddubs_epi16(low, Broadcast4(xb + 4 * u)),
                               _mm256_maddubs_epi16(high, Broadcast4(xb + 16 + 4 * u)));
          constexpr bool kFirstOfSum = Layout::kFifthBits ? u % 2 == 0 : u == 0;
          pairs[t] = kFirstOfSum ? word_pairs : _mm256_add_epi16(pairs[t], word_pairs);
          KeepChain(pairs[t]);
          if constexpr (Layout::kFifthBits && u == 1) sums[t] = _mm256_madd_epi16(pairs[t], ones);
        }
      });
      for (int t = 0; t < MT; ++t) {
        if constexpr (Layout::kFifthBits) {
          sums[t] = _mm256_add_epi32(sums[t], _mm256_madd_epi16(pairs[t], ones));
        } else {
          sums[t] = _mm256_madd_epi16(pairs[t], ones);
        }
        const int32_t* zb = tokens[t].zero + 4 * b;
        sums[t] = _mm256_sub_epi32(sums[t], _mm256_set1_epi32(zb[0] + zb[1] + zb[2] + zb[3]));
      }
    }
    for (int t = 0; t < MT; ++t) {
      const __m256 scale = _mm256_mul_ps(w_scale, _mm256_set1_ps(tokens[t].d[2 * b]));
      chains[t][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t]), scale, chains[t][j]);
    }
  };
  if constexpr (MT > 1) {
    // Chains in memory: a rolled loop (see kStreamTokens).
    for (int64_t b = 0; b < blocks; ++b) block(b, static_cast<int>(b % kBlockChains));
  } else {
    // One token's chains stay in registers, indexed by constants.
    for (int64_t b0 = 0; b0 < blocks; b0 += kBlockChains) {
      if (b0 + kBlockChains <= blocks) {
        Unroll<kBlockChains>([&](auto j) __attribute__((always_inline)) { block(b0 + j, j); });
      } else {
        Unroll<kBlockChains>([&](auto j) __attribute__((always_inline)) {
          if (b0 + j < blocks) block(b0 + j, j);
        });
      }
    }
  }
  for (int t = 0; t < MT; ++t) _mm256_storeu_ps(y + t * y_stride, BlockChainsSum(chains[t]));
}

// The tokens together, stream by stream: a stream's pass takes the registers, so the other
// stream reads the group again, from L1.
template <typename Layout>
void GroupTile(const QuantizedRows& x, int64_t t0, int mt, const uint8_t* group,
               const uint8_t* ahead_end, float* y, int64_t y_stride) {
  const int64_t cols = x.cols;
  const int64_t blocks = cols / kQk;
  StreamAhead<8192, 0> ahead(group, ahead_end);
  const auto token = [&](int t) {
    return StreamToken{x.q + (t0 + t) * cols, x.d + (t0 + t) * (cols / 16),
                       x.ZeroLanes(Layout::kZeroPoint, t0 + t)};
  };
  const auto pass = [&]<int kTokens>(int t) {
    StreamToken tokens[kTokens];
    for (int i = 0; i < kTokens; ++i) tokens[i] = token(t + i);
    for (int s = 0; s < kRowGroupRows / kRowStreamRows; ++s) {
      StreamTile(tokens, blocks, Layout(group, blocks, s), ahead,
                 y + t * y_stride + s * kRowStreamRows, y_stride);
    }
  };
  ForTokenPasses<kStreamTokens>(mt, pass);
}

// Row r of each stream block's code words, as stored: word vectors W[j] (dword r: row r's word j)
// transposed so that row r's words are contiguous, then stored at `offset` of the row's block.
template <int kWords>
inline void StoreRowWords(const __m256i (&w)[kWords], uint8_t* first_row, int64_t row_bytes,
                          int64_t offset) {
  const auto row = [&](int r) { return first_row + r * row_bytes + offset; };
  for (int half = 0; half < kWords / 4; ++half) {
    const __m256i* q = w + 4 * half;
    const __m256i t0 = _mm256_unpacklo_epi32(q[0], q[1]), t1 = _mm256_unpackhi_epi32(q[0], q[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(q[2], q[3]), t3 = _mm256_unpackhi_epi32(q[2], q[3]);
    // u[i], 128-bit lane L: words 4 half .. 4 half + 3 of row i + 4 L.
    const __m256i u[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                          _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
    for (int i = 0; i < 4; ++i) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row(i) + 16 * half),
                       _mm256_castsi256_si128(u[i]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row(i + 4) + 16 * half),
                       _mm256_extracti128_si256(u[i], 1));
    }
  }
}

// FloatRowsTokens' vector operations over an 8-row stream: a column is its 8 rows' elements side
// by side (16 bytes), widened to f32 exactly with row r in lane r.
struct StreamLanes {
  using Vec = __m256;
  static constexpr int kRows = kRowStreamRows;
  template <WeightType kType>
  static Vec Widen(const uint8_t* column) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(column));
    if constexpr (kType == WeightType::kF16) {
      return _mm256_cvtph_ps(bits);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
    }
  }
  static Vec Broadcast(const float* p) { return BroadcastFloat(p); }
  static Vec MultiplyAdd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec Load(const float* p) { return _mm256_load_ps(p); }
  static void Store(float* p, Vec v) { _mm256_store_ps(p, v); }
  static void StoreU(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  // HorizontalSum's tree across the registers (4 apart, 2 apart, then neighbours), after +0 in
  // the lanes past the last chunk's columns.
  static Vec SumsOfRows(Vec (&lanes)[kRows], int64_t cols) {
    if (cols % kRows != 0) {
      for (int64_t l = cols % kRows; l < kRows; ++l) {
        lanes[l] = _mm256_add_ps(lanes[l], _mm256_setzero_ps());
      }
    }
    const __m256 even =
        _mm256_add_ps(_mm256_add_ps(lanes[0], lanes[4]), _mm256_add_ps(lanes[2], lanes[6]));
    const __m256 odd =
        _mm256_add_ps(_mm256_add_ps(lanes[1], lanes[5]), _mm256_add_ps(lanes[3], lanes[7]));
    return _mm256_add_ps(even, odd);
  }
};

constexpr int64_t kStreamColumnBytes = 2 * kRowStreamRows;

// Both streams of a group for MT tokens.
template <WeightType kType, int MT, int kLanes>
void FloatGroupTokensAvx2(const float* x, int64_t x_stride, const uint8_t* group, int64_t cols,
                          const uint8_t* ahead_end, float* y, int64_t y_stride) {
  StreamAhead<8192, 0> ahead(group, ahead_end);
  const int64_t stream_bytes = kRowStreamRows * cols * 2;
  for (int s = 0; s < kRowGroupRows / kRowStreamRows; ++s) {
    FloatRowsTokens<StreamLanes, kType, MT, kLanes>(x, x_stride, group + s * stream_bytes, cols,
                                                    ahead, y + s * kRowStreamRows, y_stride);
  }
}

// Four tokens at a time (up to kFloatGroupTokens), with as many lanes per pass as leave
// registers for the rest (MT x kLanes accumulators at most 8 of the 16).
template <WeightType kType>
void FloatGroupTile(const float* x, int64_t x_stride, int mt, const uint8_t* group, int64_t cols,
                    const uint8_t* ahead_end, float* y, int64_t y_stride) {
  constexpr int kTile = 4;
  for (int t = 0; t < mt; t += kTile) {
    WithTokenCount<kTile>(std::min(kTile, mt - t), [&](auto tokens) {
      constexpr int kTokens = decltype(tokens)::value;
      FloatGroupTokensAvx2<kType, kTokens, LanesPerPass(kTokens, kRowStreamRows, 8)>(
          x + t * x_stride, x_stride, group, cols, ahead_end, y + t * y_stride, y_stride);
    });
  }
}

// Stores an 8 x 8 transposition of `in` (in[i] lane r: column i of row r) as rows: row r's
// columns 0 .. n - 1 at rows + r * stride.
inline void StoreTransposedRows(const __m256 (&in)[8], int n, float* rows, int64_t stride) {
  __m256 t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(in[2 * k], in[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(in[2 * k], in[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    u[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
    u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
    u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
    u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
  }
  const __m256i mask = LaneMask(n);
  for (int j = 0; j < 4; ++j) {
    _mm256_maskstore_ps(rows + j * stride, mask, _mm256_permute2f128_ps(u[j], u[4 + j], 0x20));
    _mm256_maskstore_ps(rows + (4 + j) * stride, mask,
                        _mm256_permute2f128_ps(u[j], u[4 + j], 0x31));
  }
}

// The group's 16 rows widened to f32: row r at panel + r * stride, 8 columns of a stream at a
// time.
template <WeightType kType>
void WidenGroup(const uint8_t* group, int64_t cols, float* panel, int64_t stride) {
  const int64_t stream_bytes = kRowStreamRows * cols * 2;
  for (int s = 0; s < kRowGroupRows / kRowStreamRows; ++s) {
    const uint8_t* stream = group + s * stream_bytes;
    float* rows = panel + s * kRowStreamRows * stride;
    for (int64_t c = 0; c < cols; c += 8) {
      const int n = static_cast<int>(std::min<int64_t>(8, cols - c));
      __m256 in[8];
      for (int i = 0; i < 8; ++i) {
        in[i] = i < n ? StreamLanes::Widen<kType>(stream + (c + i) * kStreamColumnBytes)
                      : _mm256_setzero_ps();
      }
      StoreTransposedRows(in, n, rows + c, stride);
    }
  }
}

}  // namespace

void UngroupRowStreamsAvx2(WeightType type, const uint8_t* group, int64_t cols, uint8_t* out) {
  const int64_t row_bytes = static_cast<int64_t>(RowBytes(type, cols));
  const int64_t blocks = cols / kQk;
  const auto ungroup = [&]<typename Block>(Block*) {
    using Layout = StreamLayout<Block>;
    constexpr int64_t kCodesAt = Layout::kFifthBits ? 6 : 2;  // the codes' offset in a block
    for (int s = 0; s < kRowGroupRows / kRowStreamRows; ++s) {
      const Layout stream(group, blocks, s);
      uint8_t* first_row = out + s * kRowStreamRows * row_bytes;
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t at = b * Layout::kBlockBytes;
        __m256i words[Layout::kWords];
        for (int u = 0; u < Layout::kWords; ++u) words[u] = Load32(stream.words + at + 32 * u);
        uint8_t* block = first_row + b * static_cast<int64_t>(sizeof(Block));
        StoreRowWords<Layout::kWords>(words, block, row_bytes, kCodesAt);
        for (int r = 0; r < kRowStreamRows; ++r) {
          std::memcpy(block + r * row_bytes, stream.Block0Scales() + at + 2 * r, 2);
          if constexpr (Layout::kFifthBits) {
            std::memcpy(block + r * row_bytes + 2, stream.Block0Qh() + at + 4 * r, 4);
          }
        }
      }
    }
  };
  switch (type) {
    case WeightType::kQ4_0:
      ungroup(static_cast<BlockQ4_0*>(nullptr));
      return;
    case WeightType::kQ5_0:
      ungroup(static_cast<BlockQ5_0*>(nullptr));
      StoreQ5_0FifthBits(out, cols);  // the recoded qh words copied above, as stored
      return;
    case WeightType::kQ8_0:
      ungroup(static_cast<BlockQ8_0*>(nullptr));
      return;
    default:
      return UngroupRows(type, WeightLayout::kRowStreams, group, cols, out);
  }
}

bool HasRowGroupTileAvx2(WeightType type) {
  return type == WeightType::kQ4_0 || type == WeightType::kQ5_0 || type == WeightType::kQ8_0 ||
         type == WeightType::kQ4_K || type == WeightType::kQ5_K || type == WeightType::kQ6_K ||
         type == WeightType::kF16 || type == WeightType::kBF16;
}

// Q4_0 and Q8_0 streams take any number of tokens: with kStreamTokens tokens a pass they outrun
// the prefill panels at every shape (Zen 1, one thread, 512 tokens: Q8_0 1536 x 576 30.1 against
// 20.7 GFLOP/s, 576 x 1536 30.7 against 28.8; Q4_0 45.2 against 28.9 and 46.3 against 41.5). So
// does Q5_0 where its rows end in a partial span of 8 blocks, which the panel tile computes
// whole (1536 x 576: 34.0 against 28.4), but not on rows of whole spans, where the two shifts
// per code word its fifth bits take on Zen 1's one shifting pipe cost more (576 x 1536: 34.7
// against 40.6).
bool RowGroupsPrefillAvx2(WeightType type, int64_t cols) {
  const bool partial_span = cols / kQk % kBlockChains != 0;
  return type == WeightType::kQ4_0 || type == WeightType::kQ8_0 ||
         (type == WeightType::kQ5_0 && partial_span);
}

void FloatGroupTileAvx2(WeightType type, const float* x, int64_t x_stride, int mt,
                        const uint8_t* group, int64_t cols, const uint8_t* ahead_end, float* y,
                        int64_t y_stride) {
  WithHalfType(type, [&](auto half) {
    FloatGroupTile<decltype(half)::value>(x, x_stride, mt, group, cols, ahead_end, y, y_stride);
  });
}

void WidenGroupAvx2(WeightType type, const uint8_t* group, int64_t cols, float* panel,
                    int64_t stride) {
  WithHalfType(type,
               [&](auto half) { WidenGroup<decltype(half)::value>(group, cols, panel, stride); });
}

void RowGroupTileAvx2(WeightType type, const QuantizedRows& x, int64_t t0, int mt,
                      const uint8_t* group, const uint8_t* ahead_end, float* y, int64_t y_stride) {
  switch (type) {
    case WeightType::kQ4_0:
      return GroupTile<StreamLayout<BlockQ4_0>>(x, t0, mt, group, ahead_end, y, y_stride);
    case WeightType::kQ5_0:
      return GroupTile<StreamLayout<BlockQ5_0>>(x, t0, mt, group, ahead_end, y, y_stride);
    case WeightType::kQ8_0:
      return GroupTile<StreamLayout<BlockQ8_0>>(x, t0, mt, group, ahead_end, y, y_stride);
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K:
      return KQuantStreamTileAvx2(type, x, t0, mt, group, ahead_end, y, y_stride);
    default:
      REPRISE_CHECK(false, "no AVX2 row-group tile for {}", WeightTypeName(type));
  }
}

}  // namespace reprise::kernels
