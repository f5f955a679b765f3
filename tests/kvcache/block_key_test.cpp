#include "kvcache/block_key.h"

#include <gtest/gtest.h>

#include <vector>

namespace reprise {
namespace {

Digest Root() {
  Digest digest{};
  digest.fill(1);
  return digest;
}

TEST(BlockKeyTest, DeterministicAndSensitiveToEveryInput) {
  const Digest extras = ExtrasDigest({});
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const Digest key = BlockKey(Root(), extras, tokens, true);
  EXPECT_EQ(key, BlockKey(Root(), extras, tokens, true));

  Digest other_root = Root();
  other_root[31] ^= 1;
  EXPECT_NE(key, BlockKey(other_root, extras, tokens, true));
  EXPECT_NE(key, BlockKey(Root(), ExtrasDigest({"salt", ""}), tokens, true));
  EXPECT_NE(key, BlockKey(Root(), ExtrasDigest({"", "lora:7"}), tokens, true));
  const std::vector<int32_t> changed = {1, 2, 3, 5};
  EXPECT_NE(key, BlockKey(Root(), extras, changed, true));
}

TEST(BlockKeyTest, ExtrasAreLengthPrefixed) {
  EXPECT_NE(ExtrasDigest({"ab", "c"}), ExtrasDigest({"a", "bc"}));
  EXPECT_NE(ExtrasDigest({"abc", ""}), ExtrasDigest({"", "abc"}));
  EXPECT_EQ(ExtrasDigest({"a", "b"}), ExtrasDigest({"a", "b"}));
}

TEST(BlockKeyTest, TailKeysNeverEqualFullKeys) {
  const Digest extras = ExtrasDigest({});
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  EXPECT_NE(BlockKey(Root(), extras, tokens, true), BlockKey(Root(), extras, tokens, false));
  const std::vector<int32_t> shorter = {1, 2, 3};
  EXPECT_NE(BlockKey(Root(), extras, shorter, false), BlockKey(Root(), extras, tokens, false));
}

TEST(BlockKeyTest, TokensHashAsInt32LittleEndian) {
  // Pins the byte format so that keys (and the disk tier built on them) stay stable.
  const std::vector<int32_t> tokens = {0x01020304};
  Sha256 hasher;
  hasher.Update("reprise.kv.full.v1");
  const Digest root = Root();
  const Digest extras = ExtrasDigest({});
  hasher.Update(root.data(), root.size());
  hasher.Update(extras.data(), extras.size());
  const uint8_t length[8] = {1, 0, 0, 0, 0, 0, 0, 0};
  hasher.Update(length, sizeof(length));
  const uint8_t bytes[4] = {4, 3, 2, 1};
  hasher.Update(bytes, sizeof(bytes));
  EXPECT_EQ(BlockKey(root, extras, tokens, true), hasher.Finish());
}

}  // namespace
}  // namespace reprise
