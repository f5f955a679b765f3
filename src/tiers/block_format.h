// The one on-the-wire and on-disk form of a KV block, shared by every tier (local disk, a shared
// store): a little-endian header naming what the block is and what it belongs to, its token ids,
// then the block's exact bytes. Decoding verifies everything a reader can check, so a block from
// any tier is used only when it is provably the block its key names. A block of another format
// version (version 1 had no owner) is foreign: never used, counted as foreign.
//
// Layout (all integers little-endian):
//   u32 magic "RKVB"          u32 format version      u32 header bytes (to the payload)
//   u32 block size            u32 token count         u32 flags (0)
//   32  root fingerprint      32  layout digest       32  key
//   32  parent key            32  extras digest       32  owner
//   u64 payload bytes
//   u32 payload CRC32C        u32 header CRC32C (of every header byte before it and the tokens)
//   i32 tokens[token count]
//   payload bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/sha256.h"

namespace reprise {

inline constexpr uint32_t kBlockMagic = 0x42564B52;  // "RKVB" read as little-endian bytes
inline constexpr uint32_t kBlockFormatVersion = 2;
// Bytes of the header before the token ids.
inline constexpr size_t kBlockHeaderFixedBytes = 6 * 4 + 6 * 32 + 8 + 4 + 4;

// What every block of one cache shares: blocks of another identity are foreign and never used.
struct TierIdentity {
  Digest root_fingerprint{};  // model weights, KV dtype, block size, ... (the block-key root)
  Digest layout_digest{};     // how the payload's bytes are laid out (layers, heads, dtype...)
  uint32_t block_size = 0;    // token positions per block
  uint64_t block_bytes = 0;   // payload bytes per block
};

// What names one block: its key is BlockKey(parent_key, extras_digest, tokens, full) where the
// parent key of a sequence's first block is the root fingerprint.
struct BlockMeta {
  Digest key{};
  Digest parent_key{};
  Digest extras_digest{};
  std::vector<int32_t> tokens;
  // Whose block it is (TenantSaltDigest of its tenant, zero: nobody's), so that one tenant's
  // blocks can be cleared from a tier. Not checked at load: the key already isolates tenants.
  Digest owner{};
};

// Why a block was refused; kOk when it may be used.
enum class BlockCheck {
  kOk,
  kTruncated,    // fewer bytes than the header says
  kBadMagic,     // not a block at all
  kBadVersion,   // another format version
  kBadHeader,    // header checksum or sizes wrong
  kForeign,      // another root fingerprint, layout, block size or payload size
  kWrongBlock,   // a valid block, but not the one asked for (key, parent, extras or tokens)
  kBadKey,       // the key is not BlockKey(parent, extras, tokens)
  kBadChecksum,  // the payload's CRC32C differs
};
const char* BlockCheckName(BlockCheck check);
// Whether a refused block belongs to another cache or format (counted as foreign) rather than
// being damaged (counted as corrupt).
inline bool IsForeign(BlockCheck check) {
  return check == BlockCheck::kForeign || check == BlockCheck::kBadVersion;
}

// CRC32C (Castagnoli) of `data`, continuing from `crc` (0 to start): SSE4.2 when the CPU has it
// (several GB/s), a table otherwise.
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

// Header bytes of a block with `num_tokens` tokens.
inline size_t BlockHeaderBytes(size_t num_tokens) {
  return kBlockHeaderFixedBytes + 4 * num_tokens;
}

// The header of `meta` for a payload of identity.block_bytes bytes with CRC32C `payload_crc`.
std::vector<uint8_t> EncodeBlockHeader(const TierIdentity& identity, const BlockMeta& meta,
                                       uint32_t payload_crc);
// Header followed by payload, in one buffer (for stores that take one value per block).
std::vector<uint8_t> EncodeBlock(const TierIdentity& identity, const BlockMeta& meta,
                                 std::span<const uint8_t> payload);

// A header decoded and checked on its own (magic, version, header checksum, identity, sizes, and
// that the key is BlockKey of the rest): what an index rebuild needs without the payload.
struct DecodedHeader {
  BlockCheck check = BlockCheck::kOk;
  BlockMeta meta;
  uint64_t payload_bytes = 0;
  uint32_t payload_crc = 0;
  size_t header_bytes = 0;
};
// `bytes` holds at least the header (more is ignored). A short buffer reads as kTruncated, and
// header_bytes then says how many are needed when the fixed part was readable.
DecodedHeader DecodeBlockHeader(const TierIdentity& identity, std::span<const uint8_t> bytes);

// Checks a decoded header against the block the caller asked for (key, parent key, extras and
// tokens), and the payload against the header's checksum and size.
BlockCheck VerifyBlock(const DecodedHeader& header, const BlockMeta& expected,
                       std::span<const uint8_t> payload);

// Decodes and verifies a whole encoded block (header then payload) against `expected`; on kOk
// copies the payload into `dest` (identity.block_bytes bytes).
BlockCheck DecodeBlock(const TierIdentity& identity, std::span<const uint8_t> encoded,
                       const BlockMeta& expected, std::span<uint8_t> dest);

}  // namespace reprise
