// The row-group layout (row_groups.h): the pieces of each type's block and the moves between the
// stored rows and a group. Portable: it runs once per matrix at load, and per group of a panel
// where prefill or a target without row-group tiles reads a grouped matrix.
#include "kernels/row_groups.h"

#include <array>
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/quant_blocks.h"

namespace reprise::kernels {

namespace {

// A piece of a block: `bytes` (2 or 4) at `offset`. The pieces cover the block exactly.
struct Piece {
  uint8_t offset;
  uint8_t bytes;
};

constexpr int kMaxPieces = 53;  // Q6_K's 52 words and d

struct BlockPieces {
  Piece pieces[kMaxPieces] = {};
  int count = 0;
};

constexpr BlockPieces WordPieces(int words) {
  BlockPieces p;
  for (int i = 0; i < words; ++i) p.pieces[p.count++] = {static_cast<uint8_t>(4 * i), 4};
  return p;
}

// A legacy block (Block's d first): its words of codes, then Q5_0's qh (recoded in place,
// Q5_0FifthBit), then the 16-bit scale d.
template <typename Block>
constexpr BlockPieces CodeWordPieces() {
  BlockPieces p;
  for (size_t at = offsetof(Block, qs); at < sizeof(Block); at += 4) {
    p.pieces[p.count++] = {static_cast<uint8_t>(at), 4};
  }
  if constexpr (std::is_same_v<Block, BlockQ5_0>) p.pieces[p.count++] = {offsetof(Block, qh), 4};
  p.pieces[p.count++] = {offsetof(Block, d), 2};
  return p;
}

constexpr BlockPieces kQ4_0 = CodeWordPieces<BlockQ4_0>();
constexpr BlockPieces kQ5_0 = CodeWordPieces<BlockQ5_0>();
constexpr BlockPieces kQ8_0 = CodeWordPieces<BlockQ8_0>();
constexpr BlockPieces kQ4_K = WordPieces(36);
constexpr BlockPieces kQ5_K = WordPieces(44);
// Q6_K: its words of low code bits (ql), high bits (qh) and scales, then d.
constexpr BlockPieces kQ6_K = [] {
  BlockPieces p = WordPieces(offsetof(BlockQ6_K, d) / 4);
  p.pieces[p.count++] = {offsetof(BlockQ6_K, d), 2};
  return p;
}();
// F16 and BF16: each element a piece, so that a column of the group is its 16 rows' elements.
constexpr BlockPieces kHalf = [] {
  BlockPieces p;
  p.pieces[p.count++] = {0, 2};
  return p;
}();

// The pieces of `type`'s block in `layout`, or null where the type lacks the layout.
const BlockPieces* PiecesOf(WeightType type, WeightLayout layout) {
  if (layout == WeightLayout::kRowStreams) {
    if (type == WeightType::kQ4_0) return &kQ4_0;
    if (type == WeightType::kQ5_0) return &kQ5_0;
    if (type == WeightType::kQ8_0) return &kQ8_0;
    if (type == WeightType::kQ4_K) return &kQ4_K;
    if (type == WeightType::kQ5_K) return &kQ5_K;
    if (type == WeightType::kQ6_K) return &kQ6_K;
    if (type == WeightType::kF16 || type == WeightType::kBF16) return &kHalf;
    return nullptr;
  }
  if (layout != WeightLayout::kRowGroups) return nullptr;
  switch (type) {
    case WeightType::kQ4_0:
      return &kQ4_0;
    case WeightType::kQ8_0:
      return &kQ8_0;
    case WeightType::kQ4_K:
      return &kQ4_K;
    case WeightType::kQ5_K:
      return &kQ5_K;
    case WeightType::kQ6_K:
      return &kQ6_K;
    case WeightType::kF16:
    case WeightType::kBF16:
      return &kHalf;
    default:
      return nullptr;
  }
}

// Calls move(row, offset in the row, offset in the group, bytes) for every piece of a group:
// stream by stream, each block by block, each piece by piece, the stream's rows side by side.
template <typename Move>
void ForEachPiece(WeightType type, WeightLayout layout, int64_t cols, const Move& move) {
  const BlockPieces* pieces = PiecesOf(type, layout);
  REPRISE_CHECK(pieces != nullptr, "{} has no such row-group layout", WeightTypeName(type));
  const auto block_bytes = static_cast<int64_t>(BlockBytes(type));
  const int64_t blocks = cols / static_cast<int64_t>(BlockElements(type));
  const int stream_rows = StreamRows(layout);
  int64_t at = 0;
  for (int first = 0; first < kRowGroupRows; first += stream_rows) {
    for (int64_t b = 0; b < blocks; ++b) {
      for (const Piece& piece : std::span(pieces->pieces, static_cast<size_t>(pieces->count))) {
        for (int r = first; r < first + stream_rows; ++r) {
          move(r, b * block_bytes + piece.offset, at, piece.bytes);
          at += piece.bytes;
        }
      }
    }
  }
}

// Q5_0's qh words in a group, recoded (Q5_0FifthBit) in place.
// The recoded bits of byte m of a stored qh word: its bit i is element 8m + i's.
constexpr std::array<std::array<uint32_t, 256>, 4> kQ5_0RecodedBits = [] {
  std::array<std::array<uint32_t, 256>, 4> table{};
  for (int m = 0; m < 4; ++m) {
    for (int byte = 0; byte < 256; ++byte) {
      for (int bit = 0; bit < 8; ++bit) {
        if ((byte >> bit) & 1) table[m][byte] |= 1u << Q5_0FifthBit(8 * m + bit);
      }
    }
  }
  return table;
}();

void RecodeQ5_0FifthBits(uint8_t* group, int64_t cols) {
  const int64_t stream_block_bytes = kRowStreamRows * static_cast<int64_t>(sizeof(BlockQ5_0));
  for (int64_t b = 0; b < kRowGroupRows / kRowStreamRows * (cols / kQk); ++b) {
    for (int r = 0; r < kRowStreamRows; ++r) {
      uint8_t* word = group + b * stream_block_bytes + kQ5_0StreamQhAt + 4 * r;
      uint32_t stored, recoded = 0;
      std::memcpy(&stored, word, sizeof(stored));
      for (int m = 0; m < 4; ++m) recoded |= kQ5_0RecodedBits[m][(stored >> (8 * m)) & 255];
      std::memcpy(word, &recoded, sizeof(recoded));
    }
  }
}

// A piece's bytes (2 or 4): copies of a constant size, which compile to moves.
inline void MovePiece(uint8_t* to, const uint8_t* from, int bytes) {
  if (bytes == 4) {
    std::memcpy(to, from, 4);
  } else {
    std::memcpy(to, from, 2);
  }
}

// Q5_K's fifth bits in a group block: the 8 words of qh of its 16 rows, laid out as pieces at
// kQ5KFifthBitsAt (vector u: byte 4 r + i = qh[4 u + i] of row r), turned into the masks at
// Q5KFifthBitMask and back.
constexpr int kQ5KQhWords = 8;

void Q5KWordsToMasks(uint8_t* block) {
  uint8_t words[kQ5KQhWords * 64];
  std::memcpy(words, block + kQ5KFifthBitsAt, sizeof(words));
  for (int j = 0; j < 4; ++j) {
    for (int u = 0; u < kQ5KQhWords; ++u) {
      for (int half = 0; half < 2; ++half) {
        uint64_t mask = 0;
        for (int p = 0; p < 64; ++p) {
          mask |= static_cast<uint64_t>((words[64 * u + p] >> (2 * j + half)) & 1) << p;
        }
        std::memcpy(block + Q5KFifthBitMask(j, u, half), &mask, sizeof(mask));
      }
    }
  }
}

void Q5KMasksToWords(uint8_t* block) {
  uint8_t words[kQ5KQhWords * 64] = {};
  for (int j = 0; j < 4; ++j) {
    for (int u = 0; u < kQ5KQhWords; ++u) {
      for (int half = 0; half < 2; ++half) {
        uint64_t mask;
        std::memcpy(&mask, block + Q5KFifthBitMask(j, u, half), sizeof(mask));
        for (int p = 0; p < 64; ++p) {
          words[64 * u + p] |= static_cast<uint8_t>(((mask >> p) & 1) << (2 * j + half));
        }
      }
    }
  }
  std::memcpy(block + kQ5KFifthBitsAt, words, sizeof(words));
}

// A K-quant super-block's 256 4-bit codes (qs, 128 bytes) from stored order (byte 32 p + b:
// element 64 p + b, low nibble; 64 p + 32 + b, high) to sub-block order (byte 16 j + n: element
// 32 j + n, low; 32 j + 16 + n, high), or back: within each 32 bytes, halves A and B become
// (A & 15) | (B & 15) << 4 and A >> 4 | (B & 0xF0), a swap that undoes itself. In sub-block
// order a 4-byte word holds codes of one sub-block only, so a stream tile adds both nibbles'
// products into one sum per sub-block.
void SwapSuperBlockNibbles(uint8_t* qs) {
  for (int p = 0; p < kQkK / 64; ++p) {
    uint8_t* const a = qs + 32 * p;
    uint8_t* const b = a + 16;
    for (int n = 0; n < 16; ++n) {
      const uint8_t low = static_cast<uint8_t>((a[n] & 15) | (b[n] & 15) << 4);
      b[n] = static_cast<uint8_t>(a[n] >> 4 | (b[n] & 0xF0));
      a[n] = low;
    }
  }
}

// A Q6_K super-block's 192 bytes of codes (ql, then qh) recoded as Q6KCodeByte places them, and
// back.
void Q6KCodesToTriplets(uint8_t* ql) {
  uint8_t codes[kQkK];
  ReadQ6KCodes(ql, ql + kQkK / 2, codes);
  for (int g = 0; g < kQkK / 16; ++g) {
    for (int k = 0; k < 3; ++k) {
      for (int i = 0; i < 4; ++i) {
        const int fourth = codes[16 * g + 12 + i];
        ql[Q6KCodeByte(g, k, i)] =
            static_cast<uint8_t>(codes[16 * g + 4 * k + i] | ((fourth >> (2 * k)) & 3) << 6);
      }
    }
  }
}

void Q6KTripletsToCodes(uint8_t* ql) {
  uint8_t codes[kQkK];
  for (int g = 0; g < kQkK / 16; ++g) {
    for (int i = 0; i < 4; ++i) {
      int fourth = 0;
      for (int k = 0; k < 3; ++k) {
        const uint8_t byte = ql[Q6KCodeByte(g, k, i)];
        codes[16 * g + 4 * k + i] = byte & 63;
        fourth |= (byte >> 6) << (2 * k);
      }
      codes[16 * g + 12 + i] = static_cast<uint8_t>(fourth);
    }
  }
  WriteQ6KCodes(codes, ql, ql + kQkK / 2);
}

// Whether `type`'s codes are recoded in `layout`: the AVX2 K-quant stream tiles' (Q4_K, Q5_K
// in sub-block order, Q6_K in triplets).
bool RecodedCodes(WeightType type, WeightLayout layout) {
  return layout == WeightLayout::kRowStreams &&
         (type == WeightType::kQ4_K || type == WeightType::kQ5_K || type == WeightType::kQ6_K);
}

// Whether `type`'s groups in `layout` keep Q5_K's fifth bits as masks (Q5KWordsToMasks).
bool FifthBitMasks(WeightType type, WeightLayout layout) {
  return type == WeightType::kQ5_K && layout == WeightLayout::kRowGroups;
}

// Whether `type`'s groups in `layout` hold its stored bytes only moved, none recoded (Q5_0's qh
// words, Q5_K's fifth-bit masks and the K-quant streams' codes are).
bool OnlyMoved(WeightType type, WeightLayout layout) {
  return type != WeightType::kQ5_0 && !RecodedCodes(type, layout) && !FifthBitMasks(type, layout);
}

// The codes of every super-block of a stored row of a K-quant recoded for the streams layout
// (`to_streams`), or back.
void RecodeRowCodes(WeightType type, uint8_t* row, int64_t cols, bool to_streams) {
  const int64_t block_bytes = static_cast<int64_t>(BlockBytes(type));
  const int64_t codes_at = type == WeightType::kQ6_K   ? offsetof(BlockQ6_K, ql)
                           : type == WeightType::kQ5_K ? offsetof(BlockQ5_K, qs)
                                                       : offsetof(BlockQ4_K, qs);
  for (int64_t b = 0; b < cols / kQkK; ++b) {
    uint8_t* const codes = row + b * block_bytes + codes_at;
    if (type != WeightType::kQ6_K) {
      SwapSuperBlockNibbles(codes);
    } else if (to_streams) {
      Q6KCodesToTriplets(codes);
    } else {
      Q6KTripletsToCodes(codes);
    }
  }
}

// RecodeRowCodes for 16 stored rows.
void RecodeGroupCodes(WeightType type, uint8_t* rows, int64_t cols, bool to_streams) {
  const int64_t row_bytes = static_cast<int64_t>(RowBytes(type, cols));
  for (int r = 0; r < kRowGroupRows; ++r) {
    RecodeRowCodes(type, rows + r * row_bytes, cols, to_streams);
  }
}

}  // namespace

// Byte k of a recoded qh word back in place, before a shift by k: its bit 2u + h is the stored
// word's bit 4u + k + 16h (Q5_0FifthBit). Prefill reads groups back per panel, so this is a
// table rather than a loop over the bits.
constexpr std::array<uint32_t, 256> kQ5_0StoredBits = [] {
  std::array<uint32_t, 256> table{};
  for (int byte = 0; byte < 256; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      if ((byte >> bit) & 1) table[byte] |= 1u << (4 * (bit / 2) + 16 * (bit % 2));
    }
  }
  return table;
}();

void StoreQ5_0FifthBits(uint8_t* rows, int64_t cols) {
  const int64_t row_bytes = static_cast<int64_t>(RowBytes(WeightType::kQ5_0, cols));
  for (int r = 0; r < kRowGroupRows; ++r) {
    for (int64_t b = 0; b < cols / kQk; ++b) {
      uint8_t* word = rows + r * row_bytes + b * static_cast<int64_t>(sizeof(BlockQ5_0)) +
                      offsetof(BlockQ5_0, qh);
      uint32_t recoded, stored = 0;
      std::memcpy(&recoded, word, sizeof(recoded));
      for (int k = 0; k < 4; ++k) stored |= kQ5_0StoredBits[(recoded >> (8 * k)) & 255] << k;
      std::memcpy(word, &stored, sizeof(stored));
    }
  }
}

bool HasGroupedLayout(WeightType type, WeightLayout layout) {
  return PiecesOf(type, layout) != nullptr;
}

void GroupRows(WeightType type, WeightLayout layout, const uint8_t* rows, int64_t cols,
               uint8_t* out) {
  const int64_t row_bytes = static_cast<int64_t>(RowBytes(type, cols));
  std::vector<uint8_t> recoded;  // K-quant streams: the rows with their codes recoded
  if (RecodedCodes(type, layout)) {
    recoded.assign(rows, rows + kRowGroupRows * row_bytes);
    RecodeGroupCodes(type, recoded.data(), cols, true);
    rows = recoded.data();
  }
  if (type == WeightType::kF16 || type == WeightType::kBF16) {
    // Pieces of one element: a transposition of each stream's rows, written out in order (piece
    // by piece through ForEachPiece: 1.6 GB/s; so: 5.2 GB/s, one core).
    const int stream_rows = StreamRows(layout);
    uint8_t* at = out;
    for (int first = 0; first < kRowGroupRows; first += stream_rows) {
      for (int64_t c = 0; c < cols; ++c) {
        for (int r = first; r < first + stream_rows; ++r, at += 2) {
          std::memcpy(at, rows + r * row_bytes + 2 * c, 2);
        }
      }
    }
    return;
  }
  ForEachPiece(type, layout, cols, [&](int r, int64_t in_row, int64_t in_group, int bytes) {
    MovePiece(out + in_group, rows + r * row_bytes + in_row, bytes);
  });
  if (FifthBitMasks(type, layout)) {
    for (int64_t b = 0; b < cols / kQkK; ++b) {
      Q5KWordsToMasks(out + b * kRowGroupRows * sizeof(BlockQ5_K));
    }
  }
  if (type == WeightType::kQ5_0) RecodeQ5_0FifthBits(out, cols);
}

void UngroupRows(WeightType type, WeightLayout layout, const uint8_t* group, int64_t cols,
                 uint8_t* out) {
  const int64_t row_bytes = static_cast<int64_t>(RowBytes(type, cols));
  std::vector<uint8_t> words;  // Q5_K: the group with its fifth bits as words again
  if (FifthBitMasks(type, layout)) {
    words.assign(group, group + kRowGroupRows * row_bytes);
    for (int64_t b = 0; b < cols / kQkK; ++b) {
      Q5KMasksToWords(words.data() + b * kRowGroupRows * sizeof(BlockQ5_K));
    }
    group = words.data();
  }
  ForEachPiece(type, layout, cols, [&](int r, int64_t in_row, int64_t in_group, int bytes) {
    MovePiece(out + r * row_bytes + in_row, group + in_group, bytes);
  });
  if (RecodedCodes(type, layout)) RecodeGroupCodes(type, out, cols, false);
  if (type == WeightType::kQ5_0) StoreQ5_0FifthBits(out, cols);
}

void UngroupRow(WeightType type, WeightLayout layout, const uint8_t* data, int64_t rows,
                int64_t cols, int64_t row, uint8_t* out) {
  const int64_t row_bytes = static_cast<int64_t>(RowBytes(type, cols));
  const int64_t group = row / kRowGroupRows;
  if ((group + 1) * kRowGroupRows > rows) {  // past the last whole group: as stored
    std::memcpy(out, data + row * row_bytes, static_cast<size_t>(row_bytes));
    return;
  }
  const uint8_t* group_bytes = data + group * kRowGroupRows * row_bytes;
  const bool recoded_codes = RecodedCodes(type, layout);
  if (!OnlyMoved(type, layout) && !recoded_codes) {  // the whole group back, then the row
    std::vector<uint8_t> stored(static_cast<size_t>(kRowGroupRows * row_bytes));
    UngroupRows(type, layout, group_bytes, cols, stored.data());
    std::memcpy(out, stored.data() + (row % kRowGroupRows) * row_bytes,
                static_cast<size_t>(row_bytes));
    return;
  }
  // The row's own pieces only (an embedding lookup reads one row of a tied output matrix): its
  // stream's blocks in order, each piece at the row's place among the stream's copies; then
  // K-quant streams' codes back as stored.
  const BlockPieces& pieces = *PiecesOf(type, layout);
  const int stream_rows = StreamRows(layout);
  const int in_group = static_cast<int>(row % kRowGroupRows);
  const int in_stream = in_group % stream_rows;
  const auto block_bytes = static_cast<int64_t>(BlockBytes(type));
  const uint8_t* at = group_bytes + static_cast<int64_t>(in_group - in_stream) * row_bytes;
  for (int64_t b = 0; b < cols / static_cast<int64_t>(BlockElements(type)); ++b) {
    for (const Piece& piece : std::span(pieces.pieces, static_cast<size_t>(pieces.count))) {
      MovePiece(out + b * block_bytes + piece.offset, at + in_stream * piece.bytes, piece.bytes);
      at += stream_rows * piece.bytes;
    }
  }
  if (recoded_codes) RecodeRowCodes(type, out, cols, false);
}

}  // namespace reprise::kernels
