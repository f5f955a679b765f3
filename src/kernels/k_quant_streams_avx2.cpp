// Decode and prefill tiles for AVX2 over K-quant rows (Q4_K, Q5_K, Q6_K) in the row-streams layout
// (row_groups.h): a 32-byte vector holds one 4-byte word of a super-block of 8 rows, row r in
// 32-bit lane r. The row-by-row tile (k_quant_avx2.cpp) decodes each row's packed 6-bit scales,
// picks them out with byte shuffles and takes a madd per 32 codes. Here the scales of 8 rows are
// decoded in one pass of shifts and masks, each shuffle serves 8 rows, and since a lane holds one
// row, a sub-block's products add up in 16 bits over its words before one madd by its scale. The
// codes are in sub-block order (row_groups.h), so one sum per sub-block takes both nibbles'
// products, and prefill passes over a group's two streams at once (Q4_K), each broadcast of a
// token's activations serving 16 rows. Q6_K's codes are recoded into whole 6-bit codes
// (Q6KCodeByte) and take a tile of their own.
//
// The arithmetic is the row-by-row tile's (kKQuantChains, quant_reads_avx2.h), so the same
// bits: lane r of the codes' sum is row r's exact S for the super-block, of the mins' sum its M
// (Q6_K: none), and chain k of row r is lane r of register k.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_reads_avx2.h"
#include "kernels/row_groups.h"
#include "kernels/simd.h"
#include "kernels/stream_ahead.h"

namespace reprise::kernels {

namespace {

using avx2::Broadcast4;
using avx2::FifthBitsAt;
using avx2::kKQuantChains;
using avx2::KQuantChainsSum;
using avx2::Load32;

// Where a stream block keeps its words (row_groups.h: a K-quant block is all 4-byte pieces, in
// the block's order): d and dmin (word 0), the packed scales (1-3), Q5_K's qh (4-11), the codes.
template <bool kFifth>
struct KStream {
  using Block = std::conditional_t<kFifth, BlockQ5_K, BlockQ4_K>;
  static constexpr int64_t kBlockBytes = kRowStreamRows * static_cast<int64_t>(sizeof(Block));
  static constexpr int kScaleWord = 1;
  static constexpr int kQhWord = 4;
  static constexpr int kCodeWord = kFifth ? 12 : 4;
  static_assert(kCodeWord * 4 == offsetof(Block, qs));
};

// Byte kByte (0-3) of each 32-bit lane of v, zero-extended into both 16-bit words of the lane:
// row r's scale in lane r, for a madd.
template <int kByte>
inline __m256i LaneByteWords(__m256i v) {
  constexpr char a = kByte, b = 4 + kByte, c = 8 + kByte, d = 12 + kByte;
  return _mm256_shuffle_epi8(
      v, _mm256_setr_epi8(a, -1, a, -1, b, -1, b, -1, c, -1, c, -1, d, -1, d, -1, a, -1, a, -1, b,
                          -1, b, -1, c, -1, c, -1, d, -1, d, -1));
}

// Bytes kByte and kByte + 1 (kByte 0 or 2) of each 32-bit lane of v, zero-extended into the
// lane's two 16-bit words.
template <int kByte>
inline __m256i LaneBytePairWords(__m256i v) {
  constexpr char a = kByte, b = 4 + kByte, c = 8 + kByte, d = 12 + kByte;
  return _mm256_shuffle_epi8(
      v, _mm256_setr_epi8(a, -1, a + 1, -1, b, -1, b + 1, -1, c, -1, c + 1, -1, d, -1, d + 1, -1, a,
                          -1, a + 1, -1, b, -1, b + 1, -1, c, -1, c + 1, -1, d, -1, d + 1, -1));
}

// A token's sums of the eight sub-blocks of 32 of a super-block, as 16-bit words (each at most
// 32 * 127), from its 16 sums of 16.
inline __m128i SubBlockSums(const int16_t* sums_of_16) {
  const __m256i pairs = _mm256_madd_epi16(Load32(sums_of_16), _mm256_set1_epi16(1));
  return _mm_packs_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
}

// A token's activations in the super-block form (QuantizedRows): its codes, its scale per
// super-block and its sums of 16.
struct Token {
  const int8_t* q;
  const float* d;
  const int16_t* group_sums;
};

// MT tokens (1, 2 or 4) over NS streams (1 or 2) of 8 rows: y[t * y_stride + 8 u + r] =
// dot(token t, row r of stream u). Tokens share each word's split into codes and each
// super-block's scales; streams share each token's broadcasts and sub-block sums.
template <bool kFifth, int NS, int MT>
void KStreamTile(const Token (&tokens)[MT], int64_t supers, const uint8_t* const (&streams)[NS],
                 StreamAhead<8192, 0>& ahead, float* y, int64_t y_stride) {
  using Layout = KStream<kFifth>;
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  __m256 chains[NS][MT][kKQuantChains];
  for (auto& stream_chains : chains) {
    for (auto& token_chains : stream_chains) {
      for (__m256& chain : token_chains) chain = _mm256_setzero_ps();
    }
  }
  // Super-block s into chain k of each stream and token.
  const auto add_super_block = [&](int64_t s, int k) {
    const uint8_t* block[NS];
    for (int u = 0; u < NS; ++u) block[u] = streams[u] + s * Layout::kBlockBytes;
    ahead.Upto(block[NS - 1] + Layout::kBlockBytes);
    const auto word = [&block](int u, int index) { return Load32(block[u] + 32 * index); };
    // The 6-bit scales and mins (GetScaleMinK4), four to a lane: sc[0..3], sc[4..7], m[0..3],
    // m[4..7] from the packed s[0..3], s[4..7], s[8..11].
    const __m256i six_bits = _mm256_set1_epi8(63), top_bits = _mm256_set1_epi8(0x30);
    __m256i sc_low[NS], sc_high[NS];
    for (int u = 0; u < NS; ++u) {
      const __m256i s0 = word(u, Layout::kScaleWord), s2 = word(u, Layout::kScaleWord + 2);
      sc_low[u] = _mm256_and_si256(s0, six_bits);
      sc_high[u] = _mm256_or_si256(_mm256_and_si256(s2, low_nibbles),
                                   _mm256_and_si256(_mm256_srli_epi16(s0, 2), top_bits));
    }
    // S: the codes are in sub-block order (row_groups.h): words 4 j .. 4 j + 3 hold sub-block j,
    // elements 4 w .. 4 w + 3 of word w in its low nibbles and 16 + 4 w .. in its high ones. A
    // sub-block's products add up in 16 bits over its words (Q4_K: 4 words, at most
    // 4 * 2 * 2 * 15 * 127 = 30480; Q5_K's codes to 31: 2 at a time), then take its scale in one
    // madd.
    constexpr int kWordsPerSum = kFifth ? 2 : 4;
    __m256i codes_sum[NS][MT];
    for (auto& stream_sums : codes_sum) {
      for (__m256i& sum : stream_sums) sum = _mm256_setzero_si256();
    }
    Unroll<8>([&](auto sub_block_index) __attribute__((always_inline)) {
      constexpr int j = decltype(sub_block_index)::value;
      Unroll<4 / kWordsPerSum>([&](auto part_index) __attribute__((always_inline)) {
        constexpr int first = decltype(part_index)::value * kWordsPerSum;
        __m256i sum[NS][MT];
        for (auto& stream_sums : sum) {
          for (__m256i& v : stream_sums) v = _mm256_setzero_si256();
        }
        Unroll<kWordsPerSum>([&](auto word_index) __attribute__((always_inline)) {
          constexpr int w = first + decltype(word_index)::value;
          __m256i low[NS], high[NS];
          for (int u = 0; u < NS; ++u) {
            const __m256i packed = word(u, Layout::kCodeWord + 4 * j + w);
            low[u] = _mm256_and_si256(packed, low_nibbles);
            high[u] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles);
            if constexpr (kFifth) {
              low[u] = _mm256_or_si256(low[u], FifthBitsAt<j>(word(u, Layout::kQhWord + w)));
              high[u] = _mm256_or_si256(high[u], FifthBitsAt<j>(word(u, Layout::kQhWord + 4 + w)));
            }
          }
          for (int t = 0; t < MT; ++t) {
            const int8_t* const x = tokens[t].q + s * kQkK + 32 * j + 4 * w;
            const __m256i x_low = Broadcast4(x), x_high = Broadcast4(x + 16);
            for (int u = 0; u < NS; ++u) {
              sum[u][t] = _mm256_add_epi16(sum[u][t], _mm256_maddubs_epi16(low[u], x_low));
              KeepChain(sum[u][t]);
              sum[u][t] = _mm256_add_epi16(sum[u][t], _mm256_maddubs_epi16(high[u], x_high));
              KeepChain(sum[u][t]);
            }
          }
        });
        for (int u = 0; u < NS; ++u) {
          const __m256i scale = LaneByteWords<j % 4>(j < 4 ? sc_low[u] : sc_high[u]);
          for (int t = 0; t < MT; ++t) {
            codes_sum[u][t] =
                _mm256_add_epi32(codes_sum[u][t], _mm256_madd_epi16(sum[u][t], scale));
            KeepChain(codes_sum[u][t]);
          }
        }
      });
    });
    // M: sum_j m[j] * (the token's sum of sub-block j), two sub-blocks per madd: words
    // (m[2k], m[2k + 1]) of each lane against the sums of sub-blocks 2k and 2k + 1.
    __m128i sub_block_sums[MT];
    for (int t = 0; t < MT; ++t) sub_block_sums[t] = SubBlockSums(tokens[t].group_sums + s * 16);
    for (int u = 0; u < NS; ++u) {
      const __m256i s1 = word(u, Layout::kScaleWord + 1), s2 = word(u, Layout::kScaleWord + 2);
      const __m256i m_low = _mm256_and_si256(s1, six_bits);
      const __m256i m_high =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(s2, 4), low_nibbles),
                          _mm256_and_si256(_mm256_srli_epi16(s1, 2), top_bits));
      __m256i mins_sum[MT];
      for (__m256i& sum : mins_sum) sum = _mm256_setzero_si256();
      Unroll<4>([&](auto pair_index) __attribute__((always_inline)) {
        constexpr int p = decltype(pair_index)::value;
        const __m256i mins = LaneBytePairWords<2 * p % 4>(p < 2 ? m_low : m_high);
        for (int t = 0; t < MT; ++t) {
          const __m256i sums = _mm256_broadcastd_epi32(_mm_srli_si128(sub_block_sums[t], 4 * p));
          mins_sum[t] = _mm256_add_epi32(mins_sum[t], _mm256_madd_epi16(mins, sums));
        }
      });
      // d (low half of each lane) and dmin (high half) of the 8 rows, times each token's scale.
      const __m256i halves = _mm256_permute4x64_epi64(
          _mm256_shuffle_epi8(
              word(u, 0), _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0,
                                           1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15)),
          0xD8);
      const __m256 d = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
      const __m256 dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1));
      for (int t = 0; t < MT; ++t) {
        const __m256 x_scale = _mm256_set1_ps(tokens[t].d[s]);
        __m256& acc = chains[u][t][k];
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(codes_sum[u][t]), _mm256_mul_ps(d, x_scale), acc);
        acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins_sum[t]), _mm256_mul_ps(dmin, x_scale), acc);
      }
    }
  };
  // A rolled loop, the chains in memory: unrolled over the chains (in registers), the loop ran
  // slower (Zen 1, one thread, 2048 columns: 512-token prefill Q4_K 48.3 against 53.5 GFLOP/s,
  // Q5_K 34.8 against 39.0; decode Q5_K 8.5 against 9.2 GB/s, Q4_K the same).
  for (int64_t s = 0; s < supers; ++s) add_super_block(s, static_cast<int>(s % kKQuantChains));
  for (int u = 0; u < NS; ++u) {
    for (int t = 0; t < MT; ++t) {
      _mm256_storeu_ps(y + t * y_stride + kRowStreamRows * u, KQuantChainsSum(chains[u][t]));
    }
  }
}

// Where a Q6_K stream block keeps its words (row_groups.h): its codes in triplets
// (Q6KCodeByte), the scales (words 48-51), then the 8 rows' d (16 bytes).
struct Q6KStream {
  static constexpr int64_t kBlockBytes = kRowStreamRows * static_cast<int64_t>(sizeof(BlockQ6_K));
  static constexpr int kScaleWord = offsetof(BlockQ6_K, scales) / 4;
  static constexpr int64_t kDAt = kRowStreamRows * static_cast<int64_t>(offsetof(BlockQ6_K, d));
  static_assert(Q6KCodeByte(15, 2, 4) == offsetof(BlockQ6_K, scales));
};

// Signed byte kByte (0-3) of each 32-bit lane of v, sign-extended into both 16-bit words of the
// lane: row r's scale in lane r, for a madd.
template <int kByte>
inline __m256i LaneSignedWords(__m256i v) {
  constexpr char a = kByte, b = 4 + kByte, c = 8 + kByte, d = 12 + kByte;
  const __m256i high_bytes = _mm256_shuffle_epi8(
      v, _mm256_setr_epi8(-1, a, -1, a, -1, b, -1, b, -1, c, -1, c, -1, d, -1, d, -1, a, -1, a, -1,
                          b, -1, b, -1, c, -1, c, -1, d, -1, d));
  return _mm256_srai_epi16(high_bytes, 8);
}

// MT tokens (1-4) over a stream of 8 Q6_K rows: y[t * y_stride + r] = dot(token t, row r), with
// the row-by-row tile's S and chains (k_quant_avx2.cpp). Per group of 16 a lane takes a row's
// four words of codes (three masked, one put together), their products added in 16 bits two at
// a time (at most 2 * 2 * 63 * 128) before one madd by the group's scale each.
template <int MT>
void Q6KStreamTile(const Token (&tokens)[MT], int64_t supers, const uint8_t* stream,
                   StreamAhead<8192, 0>& ahead, float* y, int64_t y_stride) {
  const __m256i six_bits = _mm256_set1_epi8(0x3F);
  const __m256i top_bits = _mm256_set1_epi8(static_cast<char>(0xC0));
  __m256 chains[MT][kKQuantChains];
  for (auto& token_chains : chains) {
    for (__m256& chain : token_chains) chain = _mm256_setzero_ps();
  }
  const auto add_super_block = [&](int64_t s, int k) {
    const uint8_t* const block = stream + s * Q6KStream::kBlockBytes;
    ahead.Upto(block + Q6KStream::kBlockBytes);
    const auto word = [block](int index) { return Load32(block + 32 * index); };
    // The codes' products and, apart, the zero point: 32 * sum_g sc[g] * (the token's sum of
    // group g), two groups per madd (their scales blended from the groups' own).
    __m256i sums[MT], zero[MT];
    for (__m256i& sum : sums) sum = _mm256_setzero_si256();
    for (__m256i& sum : zero) sum = _mm256_setzero_si256();
    __m256i even_scale;
    Unroll<kQkK / 16>([&](auto group_index) __attribute__((always_inline)) {
      constexpr int g = decltype(group_index)::value;
      const __m256i a = word(3 * g), b = word(3 * g + 1), c = word(3 * g + 2);
      // The fourth code from the top pairs: ((a_top >> 2 | b_top) >> 2 | c_top) >> 2, each
      // shift within a byte since the pairs above have no bits below bit 6.
      const __m256i a_b = _mm256_or_si256(_mm256_srli_epi16(_mm256_and_si256(a, top_bits), 2),
                                          _mm256_and_si256(b, top_bits));
      const __m256i fourth = _mm256_srli_epi16(
          _mm256_or_si256(_mm256_srli_epi16(a_b, 2), _mm256_and_si256(c, top_bits)), 2);
      const __m256i codes[4] = {_mm256_and_si256(a, six_bits), _mm256_and_si256(b, six_bits),
                                _mm256_and_si256(c, six_bits), fourth};
      const __m256i scale = LaneSignedWords<g % 4>(word(Q6KStream::kScaleWord + g / 4));
      for (int t = 0; t < MT; ++t) {
        const int8_t* const x = tokens[t].q + s * kQkK + 16 * g;
        const __m256i first = _mm256_add_epi16(_mm256_maddubs_epi16(codes[0], Broadcast4(x)),
                                               _mm256_maddubs_epi16(codes[1], Broadcast4(x + 4)));
        const __m256i second = _mm256_add_epi16(_mm256_maddubs_epi16(codes[2], Broadcast4(x + 8)),
                                                _mm256_maddubs_epi16(codes[3], Broadcast4(x + 12)));
        sums[t] = _mm256_add_epi32(sums[t], _mm256_madd_epi16(first, scale));
        KeepChain(sums[t]);
        sums[t] = _mm256_add_epi32(sums[t], _mm256_madd_epi16(second, scale));
        KeepChain(sums[t]);
      }
      if constexpr (g % 2 == 0) {
        even_scale = scale;
      } else {
        const __m256i pair_scales = _mm256_blend_epi16(even_scale, scale, 0xAA);
        for (int t = 0; t < MT; ++t) {
          const __m256i group_sums = Broadcast4(tokens[t].group_sums + s * 16 + g - 1);
          zero[t] = _mm256_add_epi32(zero[t], _mm256_madd_epi16(pair_scales, group_sums));
        }
      }
    });
    const __m256 d =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + Q6KStream::kDAt)));
    for (int t = 0; t < MT; ++t) {
      const __m256i total = _mm256_sub_epi32(sums[t], _mm256_slli_epi32(zero[t], 5));
      __m256& acc = chains[t][k];
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total),
                            _mm256_mul_ps(d, _mm256_set1_ps(tokens[t].d[s])), acc);
    }
  };
  for (int64_t s = 0; s < supers; ++s) add_super_block(s, static_cast<int>(s % kKQuantChains));
  for (int t = 0; t < MT; ++t) _mm256_storeu_ps(y + t * y_stride, KQuantChainsSum(chains[t]));
}

// The stream tile of kType over NS streams (Q6_K: one) and MT tokens.
template <WeightType kType, int NS, int MT>
[[gnu::always_inline]] inline void StreamTile(const Token (&tokens)[MT], int64_t supers,
                                              const uint8_t* const (&streams)[NS],
                                              StreamAhead<8192, 0>& ahead, float* y,
                                              int64_t y_stride) {
  if constexpr (kType == WeightType::kQ6_K) {
    static_assert(NS == 1);
    Q6KStreamTile<MT>(tokens, supers, streams[0], ahead, y, y_stride);
  } else {
    KStreamTile<kType == WeightType::kQ5_K, NS, MT>(tokens, supers, streams, ahead, y, y_stride);
  }
}

// The stream tiles for prefill, kept out of line: inlined into KGroupTile, GCC allocated the
// two-token Q4_K pass's registers worse (Zen 1, one thread, 2048 x 2048, 512 tokens: 49 against
// 53 GFLOP/s), while the one-token pass runs faster inlined (out of line, Q5_K decode from L2
// fell from 9.1 to 6.7-7.4 GB/s).
template <WeightType kType, int NS, int MT>
__attribute__((noinline)) void KStreamPass(const Token (&tokens)[MT], int64_t supers,
                                           const uint8_t* const (&streams)[NS],
                                           StreamAhead<8192, 0>& ahead, float* y,
                                           int64_t y_stride) {
  StreamTile<kType, NS, MT>(tokens, supers, streams, ahead, y, y_stride);
}

// One token (decode) stream by stream, as the rows stream from memory (Q4_K over both at once
// was faster from L2 but slower from memory: `bench kernels`, 2 threads, k = 4096, 73-75 -> 59-62%
// of the read bandwidth). More tokens: Q4_K two at a time over both streams at once, Q5_K and
// Q6_K four at a time stream by stream (then two, then one for what remains). A word's split
// into codes serves every token of a pass, a token's broadcasts every stream of it, and the
// passes after the first read the group from L1 or L2. Q5_K's fifth bits leave too few
// registers for two streams at once, and its split takes more work, so more tokens share it
// (Zen 1, one thread, 2048 x 2048, 512 tokens: 38.7 -> 45.3 GFLOP/s with four; Q4_K 52.5 ->
// 50.2).
template <WeightType kType>
void KGroupTile(const QuantizedRows& x, int64_t t0, int mt, const uint8_t* group,
                const uint8_t* ahead_end, float* y, int64_t y_stride) {
  constexpr bool kQ4K = kType == WeightType::kQ4_K;
  constexpr int kTokens = kQ4K ? 2 : 4;
  using Layout = std::conditional_t<kType == WeightType::kQ6_K, Q6KStream,
                                    KStream<kType == WeightType::kQ5_K>>;
  const int64_t cols = x.cols;
  const int64_t supers = cols / kQkK;
  const auto token = [&](int t) {
    const int64_t row = t0 + t;
    return Token{x.q + row * cols, x.d + row * supers, x.group_sum + row * (cols / 16)};
  };
  const uint8_t* const streams[2] = {group, group + supers * Layout::kBlockBytes};
  StreamAhead<8192, 0> ahead(group, ahead_end);
  // Tokens t .. t + MT - 1 over the streams, kStreams at a time from the first.
  const auto pass = [&]<int MT>(int t) {
    constexpr int kStreams = kQ4K && MT > 1 ? 2 : 1;
    Token tokens[MT];
    for (int i = 0; i < MT; ++i) tokens[i] = token(t + i);
    for (int first = 0; first < 2; first += kStreams) {
      const uint8_t* pass_streams[kStreams];
      for (int u = 0; u < kStreams; ++u) pass_streams[u] = streams[first + u];
      float* const out = y + t * y_stride + first * kRowStreamRows;
      if constexpr (MT > 1) {
        KStreamPass<kType, kStreams, MT>(tokens, supers, pass_streams, ahead, out, y_stride);
      } else {
        StreamTile<kType, kStreams, 1>(tokens, supers, pass_streams, ahead, out, y_stride);
      }
    }
  };
  ForTokenPasses<kTokens>(mt, pass);
}

}  // namespace

void KQuantStreamTileAvx2(WeightType type, const QuantizedRows& x, int64_t t0, int mt,
                          const uint8_t* group, const uint8_t* ahead_end, float* y,
                          int64_t y_stride) {
  switch (type) {
    case WeightType::kQ4_K:
      return KGroupTile<WeightType::kQ4_K>(x, t0, mt, group, ahead_end, y, y_stride);
    case WeightType::kQ5_K:
      return KGroupTile<WeightType::kQ5_K>(x, t0, mt, group, ahead_end, y, y_stride);
    case WeightType::kQ6_K:
      return KGroupTile<WeightType::kQ6_K>(x, t0, mt, group, ahead_end, y, y_stride);
    default:
      REPRISE_CHECK(false, "no AVX2 K-quant stream tile for {}", WeightTypeName(type));
  }
}

}  // namespace reprise::kernels
