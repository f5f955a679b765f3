#include "redis/cluster_slots.h"

#include <gtest/gtest.h>

namespace reprise::redis {
namespace {

TEST(ClusterSlots, Crc16MatchesTheReferenceValue) {
  // The check value of CRC16/XMODEM, the one given in the Redis Cluster specification.
  EXPECT_EQ(Crc16("123456789"), 0x31C3);
}

TEST(ClusterSlots, HashTagsPutKeysInOneSlot) {
  EXPECT_EQ(HashSlot("{user1000}.following"), HashSlot("{user1000}.followers"));
  EXPECT_EQ(HashSlot("{user1000}.following"), HashSlot("user1000"));
  // An empty tag hashes the whole key.
  EXPECT_EQ(HashSlot("foo{}{bar}"), Crc16("foo{}{bar}") % kClusterSlots);
  EXPECT_EQ(HashSlot("foo{{bar}}zap"), HashSlot("{bar"));
  EXPECT_EQ(HashSlot("foo"), 12182);  // CLUSTER KEYSLOT foo
}

TEST(ClusterSlots, ParsesRedirections) {
  auto moved = ParseRedirection("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(moved);
  EXPECT_FALSE(moved->ask);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->node.Address(), "127.0.0.1:6381");
  auto ask = ParseRedirection("ASK 12 10.0.0.2:7000");
  ASSERT_TRUE(ask);
  EXPECT_TRUE(ask->ask);
  EXPECT_FALSE(ParseRedirection("ERR unknown command"));
  EXPECT_FALSE(ParseRedirection("MOVED x 1:2"));
}

RedisReply Text(RedisReply::Type type, const std::string& text) {
  RedisReply r;
  r.type = type;
  r.text = text;
  return r;
}
RedisReply Integer(long long value) {
  RedisReply r;
  r.type = RedisReply::Type::kInteger;
  r.integer = value;
  return r;
}
RedisReply Array(std::vector<RedisReply> elements) {
  RedisReply r;
  r.type = RedisReply::Type::kArray;
  r.elements = std::move(elements);
  return r;
}

TEST(ClusterSlots, LoadsAClusterSlotsReply) {
  auto node = [](const std::string& host, long long port) {
    return Array({Text(RedisReply::Type::kString, host), Integer(port)});
  };
  RedisReply reply = Array({Array({Integer(0), Integer(8191), node("a", 1)}),
                            Array({Integer(8192), Integer(16383), node("b", 2)})});
  SlotMap map;
  ASSERT_TRUE(map.Load(reply));
  EXPECT_EQ(map.NodeFor(0)->Address(), "a:1");
  EXPECT_EQ(map.NodeFor(16383)->Address(), "b:2");
  EXPECT_EQ(map.Masters().size(), 2u);
  map.Move(5, {"c", 3});
  EXPECT_EQ(map.NodeFor(5)->Address(), "c:3");
  EXPECT_FALSE(map.Load(Text(RedisReply::Type::kError, "ERR")));
  EXPECT_EQ(map.NodeFor(5)->Address(), "c:3");
}

}  // namespace
}  // namespace reprise::redis
