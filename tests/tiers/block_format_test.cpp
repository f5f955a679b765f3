#include "tiers/block_format.h"

#include <gtest/gtest.h>

#include <string>

#include "tier_test_util.h"

namespace reprise {
namespace {

using testing::TestChain;
using testing::TestIdentity;
using testing::TestPayload;

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  const std::string text = "123456789";
  EXPECT_EQ(Crc32c(text.data(), text.size()), 0xE3069283u);
  // Continuing a CRC over two pieces equals one pass over both.
  EXPECT_EQ(Crc32c(text.data() + 4, 5, Crc32c(text.data(), 4)), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
}

class BlockFormatTest : public ::testing::Test {
 protected:
  TierIdentity identity_ = TestIdentity(1000);
  std::vector<BlockMeta> chain_ = TestChain(identity_, 2);
  std::vector<uint8_t> payload_ = TestPayload(identity_, chain_[1]);
  std::vector<uint8_t> encoded_ = EncodeBlock(identity_, chain_[1], payload_);

  BlockCheck Decode(const std::vector<uint8_t>& encoded, const BlockMeta& expected) {
    std::vector<uint8_t> dest(identity_.block_bytes, 0);
    return DecodeBlock(identity_, encoded, expected, dest);
  }
};

TEST_F(BlockFormatTest, RoundTripsTheExactBytes) {
  ASSERT_EQ(encoded_.size(), BlockHeaderBytes(identity_.block_size) + identity_.block_bytes);
  std::vector<uint8_t> dest(identity_.block_bytes, 0);
  ASSERT_EQ(DecodeBlock(identity_, encoded_, chain_[1], dest), BlockCheck::kOk);
  EXPECT_EQ(dest, payload_);
  DecodedHeader header = DecodeBlockHeader(identity_, encoded_);
  ASSERT_EQ(header.check, BlockCheck::kOk);
  EXPECT_EQ(header.meta.key, chain_[1].key);
  EXPECT_EQ(header.meta.parent_key, chain_[0].key);
  EXPECT_EQ(header.meta.tokens, chain_[1].tokens);
  EXPECT_EQ(header.payload_bytes, identity_.block_bytes);
}

TEST_F(BlockFormatTest, TheOwnerTravelsInTheHeader) {
  std::vector<BlockMeta> owned = TestChain(identity_, 1, 1, "tenant-salt");
  EXPECT_EQ(owned[0].owner, TenantSaltDigest("tenant-salt"));
  DecodedHeader header = DecodeBlockHeader(
      identity_, EncodeBlock(identity_, owned[0], TestPayload(identity_, owned[0])));
  ASSERT_EQ(header.check, BlockCheck::kOk);
  EXPECT_EQ(header.meta.owner, TenantSaltDigest("tenant-salt"));
  EXPECT_EQ(DecodeBlockHeader(identity_, encoded_).meta.owner, Digest{});  // nobody's
}

TEST_F(BlockFormatTest, AFlippedPayloadByteFailsTheChecksum) {
  encoded_[encoded_.size() - 10] ^= 0x01;
  EXPECT_EQ(Decode(encoded_, chain_[1]), BlockCheck::kBadChecksum);
}

TEST_F(BlockFormatTest, AFlippedHeaderByteFailsTheHeaderChecksum) {
  for (size_t at : {size_t{20}, size_t{30}, size_t{100}, BlockHeaderBytes(4) - 3}) {
    std::vector<uint8_t> bad = encoded_;
    bad[at] ^= 0x40;
    EXPECT_NE(Decode(bad, chain_[1]), BlockCheck::kOk) << "byte " << at;
  }
  std::vector<uint8_t> bad = encoded_;
  bad[kBlockHeaderFixedBytes + 1] ^= 0x01;  // a token
  EXPECT_EQ(Decode(bad, chain_[1]), BlockCheck::kBadHeader);
}

TEST_F(BlockFormatTest, TruncatedBlocksAreRefused) {
  for (size_t size :
       {size_t{0}, size_t{5}, size_t{40}, kBlockHeaderFixedBytes + 3, encoded_.size() - 1}) {
    std::vector<uint8_t> cut(encoded_.begin(), encoded_.begin() + static_cast<ptrdiff_t>(size));
    EXPECT_EQ(Decode(cut, chain_[1]), BlockCheck::kTruncated) << size << " bytes";
  }
}

TEST_F(BlockFormatTest, MagicAndVersionAreChecked) {
  std::vector<uint8_t> bad = encoded_;
  bad[0] = 'X';
  EXPECT_EQ(Decode(bad, chain_[1]), BlockCheck::kBadMagic);
  bad = encoded_;
  bad[4] = 9;
  EXPECT_EQ(Decode(bad, chain_[1]), BlockCheck::kBadVersion);
  // The format before owners were recorded: another version, counted as foreign.
  bad[4] = 1;
  EXPECT_EQ(Decode(bad, chain_[1]), BlockCheck::kBadVersion);
  EXPECT_TRUE(IsForeign(BlockCheck::kBadVersion));
  EXPECT_FALSE(IsForeign(BlockCheck::kBadChecksum));
}

TEST_F(BlockFormatTest, BlocksOfAnotherIdentityAreForeign) {
  std::vector<uint8_t> dest(identity_.block_bytes);
  TierIdentity other_model = TestIdentity(1000, 4, "model-b");
  EXPECT_EQ(DecodeBlock(other_model, encoded_, chain_[1], dest), BlockCheck::kForeign);
  TierIdentity other_layout = identity_;
  other_layout.layout_digest = testing::TestDigest("layout-f32");
  EXPECT_EQ(DecodeBlock(other_layout, encoded_, chain_[1], dest), BlockCheck::kForeign);
  TierIdentity other_size = identity_;
  other_size.block_size = 8;
  EXPECT_EQ(DecodeBlock(other_size, encoded_, chain_[1], dest), BlockCheck::kForeign);
  TierIdentity other_bytes = identity_;
  other_bytes.block_bytes = 2000;
  EXPECT_EQ(DecodeBlock(other_bytes, encoded_, chain_[1], dest), BlockCheck::kForeign);
}

TEST_F(BlockFormatTest, AnotherBlockIsNotTheOneAskedFor) {
  EXPECT_EQ(Decode(encoded_, chain_[0]), BlockCheck::kWrongBlock);
  BlockMeta other_tokens = chain_[1];
  other_tokens.tokens[0] += 1;
  EXPECT_EQ(Decode(encoded_, other_tokens), BlockCheck::kWrongBlock);
  BlockMeta other_salt = testing::TestChain(identity_, 2, 1, "tenant-b")[1];
  EXPECT_EQ(Decode(encoded_, other_salt), BlockCheck::kWrongBlock);
}

TEST_F(BlockFormatTest, AKeyThatIsNotTheHashOfItsContentsIsRefused) {
  // A well-formed header (valid header checksum) whose key does not follow from its parent,
  // extras and tokens: what a buggy or hostile writer could produce.
  BlockMeta forged = chain_[1];
  forged.tokens[2] = 999;
  std::vector<uint8_t> bad = EncodeBlock(identity_, forged, payload_);
  EXPECT_EQ(DecodeBlockHeader(identity_, bad).check, BlockCheck::kBadKey);
  EXPECT_EQ(Decode(bad, forged), BlockCheck::kBadKey);
}

TEST_F(BlockFormatTest, TailBlocksKeepTheirOwnKeyDomain) {
  BlockMeta tail;
  tail.parent_key = chain_[0].key;
  tail.extras_digest = chain_[0].extras_digest;
  tail.tokens = {7, 8};
  tail.key = BlockKey(tail.parent_key, tail.extras_digest, tail.tokens, false);
  std::vector<uint8_t> encoded = EncodeBlock(identity_, tail, payload_);
  EXPECT_EQ(Decode(encoded, tail), BlockCheck::kOk);
  BlockMeta as_full = tail;
  as_full.key = BlockKey(tail.parent_key, tail.extras_digest, tail.tokens, true);
  EXPECT_EQ(Decode(EncodeBlock(identity_, as_full, payload_), as_full), BlockCheck::kBadKey);
}

}  // namespace
}  // namespace reprise
