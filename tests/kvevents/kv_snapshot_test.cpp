// The JSON form of a cache's block list (GET /v1/cache/blocks): what is written reads back the
// same, in pieces or whole, and anything else is refused with a reason.
#include "kvevents/kv_snapshot.h"

#include <gtest/gtest.h>

#include "core/sha256.h"

namespace reprise::kvevents {
namespace {

BlockDigest Filled(uint8_t value) {
  BlockDigest digest{};
  digest.fill(value);
  return digest;
}

bool Same(const std::vector<CacheBlockRef>& a, const std::vector<CacheBlockRef>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].key != b[i].key || a[i].parent != b[i].parent ||
        a[i].salt_digest != b[i].salt_digest || a[i].tenant_digest != b[i].tenant_digest) {
      return false;
    }
  }
  return true;
}

TEST(KvSnapshot, ReadsBackWhatItWritesInPieces) {
  CacheBlockList list;
  list.replica_id = "replica-one";
  list.root = Filled(1);
  list.kv_events = true;
  list.instance = "0123456789abcdef";
  list.next_seq = 12345678901234ull;
  for (int i = 0; i < 25; ++i) {
    // Two tenants' blocks: their (salt, tenant) pairs are written once each.
    const auto tag = static_cast<uint8_t>(i);
    CacheBlockRef block{Filled(tag), Filled(static_cast<uint8_t>(tag + 100)),
                        Filled(i % 2 == 0 ? 200 : 201), Filled(i % 2 == 0 ? 0 : 210)};
    (i < 10 ? list.memory : i < 20 ? list.disk : list.remote).push_back(block);
  }
  std::vector<std::string> pieces;
  WriteCacheBlocksJson(
      list, [&](std::string_view piece) { pieces.emplace_back(piece); }, 4);
  EXPECT_GT(pieces.size(), 5u);
  std::string text;
  for (const std::string& piece : pieces) text += piece;
  EXPECT_EQ(text, CacheBlocksJson(list));
  EXPECT_EQ(text.find(ToHex(Filled(200))), text.rfind(ToHex(Filled(200))));

  std::string why;
  std::optional<CacheBlockList> read = ParseCacheBlocksJson(text, &why);
  ASSERT_TRUE(read) << why;
  EXPECT_EQ(read->replica_id, "replica-one");
  EXPECT_EQ(read->root, list.root);
  EXPECT_TRUE(read->kv_events);
  EXPECT_EQ(read->instance, list.instance);
  EXPECT_EQ(read->next_seq, list.next_seq);
  EXPECT_TRUE(Same(read->memory, list.memory));
  EXPECT_TRUE(Same(read->disk, list.disk));
  EXPECT_TRUE(Same(read->remote, list.remote));

  // Without events, and empty.
  CacheBlockList empty;
  empty.replica_id = "r";
  read = ParseCacheBlocksJson(CacheBlocksJson(empty), &why);
  ASSERT_TRUE(read) << why;
  EXPECT_FALSE(read->kv_events);
  EXPECT_TRUE(read->memory.empty() && read->disk.empty() && read->remote.empty());
}

TEST(KvSnapshot, RefusesWhatIsNotABlockList) {
  CacheBlockList list;
  list.replica_id = "r";
  list.memory.push_back({Filled(1), Filled(2), Filled(3), Filled(4)});
  const std::string good = CacheBlocksJson(list);
  auto refused = [](const std::string& text) {
    std::string why;
    bool ok = ParseCacheBlocksJson(text, &why).has_value();
    EXPECT_FALSE(why.empty() && !ok);
    return !ok;
  };
  EXPECT_FALSE(refused(good));
  EXPECT_TRUE(refused("{}"));
  EXPECT_TRUE(refused("not json"));
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  EXPECT_TRUE(refused(replaced(ToHex(Filled(1)), "zz")));  // a key that is not hex
  EXPECT_TRUE(refused(replaced("\",0]", "\",1]")));        // no such digest pair
  EXPECT_TRUE(refused(replaced("\"kv_events\":null", "\"kv_events\":3")));
  EXPECT_TRUE(refused(replaced("\"disk\":[]", "\"disk\":{}")));
}

}  // namespace
}  // namespace reprise::kvevents
