// Decode tiles (1 to 4 tokens) for AVX2 over rows in the row-streams layout (row_groups.h): Q4_0,
// Q5_0 and Q8_0 (Q4_K and Q5_K: k_quant_streams_avx2.cpp), and the layout's reader. Q5_0 is the
// type small models keep most of their matrices in where their widths are not multiples of 256 (a
// 135M model's Q4_K_M file holds 72% of its weight bytes in Q5_0).
//
// The row-by-row tile (decode_avx2.cpp) spent 19 instructions on a row's Q5_0 block of 32 codes,
// six of them testing the stored fifth bits with a byte shuffle and a compare, and, on rows as
// short as a small model's, a horizontal sum and a span set-up per few blocks. Here a 32-byte
// vector holds one code word of 8 rows (row r in 32-bit lane r), the fifth bits come recoded so
// that one shift and one mask place them, and a row's 8 lane sums stay in 8 registers, one per lane
// of the row-by-row tile: about 12.5 instructions per row's block, and no per-row work but the
// final tree of adds.
//
// The arithmetic is the row-by-row tile's, so the same bits: its lane i of block b holds the
// exact integer sum of (code - 16) * x over elements 4i..4i+3, converted and fused into lane i's
// chain with the product w_scale * x_scale; the chains in the order of the blocks; then
// HorizontalSum's tree. Here chain i of row r is lane r of register i, and the tree adds
// registers.
#include <cstring>
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

// Per 32-bit lane: the exact sum of (code - kZeroPoint) * x over its 4 codes, x the token's 4
// bytes at p.
template <int kZeroPoint>
inline __m256i LaneSums(__m256i codes, const int8_t* p) {
  const __m256i x = Broadcast4(p);
  const __m256i pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(codes, x),
                                         _mm256_maddubs_epi16(_mm256_set1_epi8(kZeroPoint), x));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// One token over one stream of 8 rows: y[r] = dot(x, row r) for r < 8. xq, xd: the token's codes
// and scales (QuantizedRows, per-block form).
template <typename Layout>
void StreamTile(const int8_t* xq, const float* xd, int64_t blocks, const Layout& stream,
                StreamAhead<8192, 0>& ahead, float* y) {
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  __m256 chains[8];
  for (__m256& chain : chains) chain = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t at = b * Layout::kBlockBytes;
    ahead.Upto(stream.words + at + Layout::kBlockBytes);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (Layout::kFifthBits) qh = Load32(stream.Block0Qh() + at);
    const __m256 scale = _mm256_mul_ps(
        _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(stream.Block0Scales() + at))),
        _mm256_set1_ps(xd[2 * b]));
    const int8_t* xb = xq + b * kQk;
    if constexpr (Layout::kEightBit) {
      // Code word u: elements 4u..4u+3 (chain u), signed: maddubs(|w|, sign(x, w)).
      Unroll<8>([&](auto word_index) {
        constexpr int u = decltype(word_index)::value;
        const __m256i word = Load32(stream.words + at + 32 * u);
        const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(word),
                                                   _mm256_sign_epi8(Broadcast4(xb + 4 * u), word));
        const __m256i sums = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
        chains[u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, chains[u]);
      });
      continue;
    }
    // Code word u: elements 4u..4u+3 in its low nibbles (chain u), 16 + 4u.. in its high ones
    // (chain u + 4).
    Unroll<4>([&](auto word_index) {
      constexpr int u = decltype(word_index)::value;
      const __m256i word = Load32(stream.words + at + 32 * u);
      __m256i low = _mm256_and_si256(word, low_nibbles);
      __m256i high = _mm256_and_si256(_mm256_srli_epi16(word, 4), low_nibbles);
      if constexpr (Layout::kFifthBits) {
        low = _mm256_or_si256(low, FifthBitsAt<2 * u>(qh));
        high = _mm256_or_si256(high, FifthBitsAt<2 * u + 1>(qh));
      }
      constexpr int kZero = Layout::kZeroPoint;
      chains[u] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(LaneSums<kZero>(low, xb + 4 * u)), scale, chains[u]);
      chains[u + 4] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(LaneSums<kZero>(high, xb + 16 + 4 * u)),
                                      scale, chains[u + 4]);
    });
  }
  // HorizontalSum's tree (reduce_avx2.h) over the chains.
  const __m256 even =
      _mm256_add_ps(_mm256_add_ps(chains[0], chains[4]), _mm256_add_ps(chains[2], chains[6]));
  const __m256 odd =
      _mm256_add_ps(_mm256_add_ps(chains[1], chains[5]), _mm256_add_ps(chains[3], chains[7]));
  _mm256_storeu_ps(y, _mm256_add_ps(even, odd));
}

// Token by token, stream by stream: 8 chains per row take every register a stream's pass has to
// spare, so a second stream or token reads the group again, from L1 or L2.
template <typename Layout>
void GroupTile(const QuantizedRows& x, int64_t t0, int mt, const uint8_t* group,
               const uint8_t* ahead_end, float* y, int64_t y_stride) {
  const int64_t cols = x.cols;
  const int64_t blocks = cols / kQk;
  StreamAhead<8192, 0> ahead(group, ahead_end);
  for (int t = 0; t < mt; ++t) {
    const int8_t* xq = x.q + (t0 + t) * cols;
    const float* xd = x.d + (t0 + t) * (cols / 16);
    for (int s = 0; s < kRowGroupRows / kRowStreamRows; ++s) {
      StreamTile(xq, xd, blocks, Layout(group, blocks, s), ahead,
                 y + t * y_stride + s * kRowStreamRows);
    }
  }
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
         type == WeightType::kQ4_K || type == WeightType::kQ5_K;
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
      return KQuantStreamTileAvx2(type, x, t0, mt, group, ahead_end, y, y_stride);
    default:
      REPRISE_CHECK(false, "no AVX2 row-group tile for {}", WeightTypeName(type));
  }
}

}  // namespace reprise::kernels
