#include "tiers/tier_set.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "test_support.h"
#include "tier_test_util.h"
#include "tiers/disk_tier.h"

namespace reprise {
namespace {

namespace fs = std::filesystem;
using testing::Keys;
using testing::TestChain;
using testing::TestIdentity;
using testing::TestPayload;

class TierSetTest : public ::testing::Test {
 protected:
  std::string Dir(const std::string& suffix) {
    std::string dir = testing::ScratchPath(
        std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + suffix);
    fs::remove_all(dir);
    return dir;
  }

  TierIdentity identity_ = TestIdentity(2048);
};

TEST_F(TierSetTest, OfferedBlocksAreWrittenAndLoadedBack) {
  std::vector<std::unique_ptr<KvTier>> tiers;
  tiers.push_back(std::make_unique<DiskTier>(identity_, DiskTierConfig{Dir("")}));
  TierSet set(identity_, std::move(tiers), {.staging_bytes = 1 << 20, .load_threads = 2});
  auto chain = TestChain(identity_, 40);
  for (const auto& meta : chain) set.Offer(meta, TestPayload(identity_, meta), true);
  set.Flush();
  EXPECT_EQ(set.ProbablyHeld(Keys(chain)), 40u);

  std::vector<std::vector<uint8_t>> buffers(40, std::vector<uint8_t>(identity_.block_bytes));
  std::vector<uint8_t*> dests;
  for (auto& buffer : buffers) dests.push_back(buffer.data());
  // The wakeup runs on the loader thread after the load is published, so it may come a moment
  // after WaitForLoad returns.
  std::atomic<int> woken{0};
  set.SetWakeup([&] { ++woken; });
  set.StartLoad(7, chain, dests);
  EXPECT_EQ(set.LoadsInFlight(), 1u);
  set.WaitForLoad();
  std::vector<TierLoad> done = set.TakeFinished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].ticket, 7u);
  EXPECT_EQ(done[0].loaded, 40u);
  EXPECT_EQ(done[0].bytes, 40 * identity_.block_bytes);
  for (int waited_ms = 0; woken.load() == 0 && waited_ms < 5000; ++waited_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(woken.load(), 1);
  EXPECT_EQ(set.LoadsInFlight(), 0u);
  for (size_t i = 0; i < 40; ++i) EXPECT_EQ(buffers[i], TestPayload(identity_, chain[i]));
  TierSetStats stats = set.Stats();
  EXPECT_EQ(stats.loads, 1u);
  EXPECT_EQ(stats.tiers[0].blocks_written, 40u);
}

TEST_F(TierSetTest, ALoadContinuesInTheNextTierAndStopsAtTheFirstGap) {
  auto chain = TestChain(identity_, 30);
  auto near = std::make_unique<DiskTier>(identity_, DiskTierConfig{Dir("-near")});
  auto far = std::make_unique<DiskTier>(identity_, DiskTierConfig{Dir("-far")});
  for (size_t i = 0; i < 30; ++i) {
    if (i < 10) near->Store(chain[i], TestPayload(identity_, chain[i]));
    if (i >= 5 && i != 25) far->Store(chain[i], TestPayload(identity_, chain[i]));
  }
  std::vector<std::unique_ptr<KvTier>> tiers;
  tiers.push_back(std::move(near));
  tiers.push_back(std::move(far));
  TierSet set(identity_, std::move(tiers), {.staging_bytes = 1 << 20, .load_threads = 3});
  std::vector<std::vector<uint8_t>> buffers(30, std::vector<uint8_t>(identity_.block_bytes));
  std::vector<uint8_t*> dests;
  for (auto& buffer : buffers) dests.push_back(buffer.data());
  set.StartLoad(1, chain, dests);
  set.WaitForLoad();
  std::vector<TierLoad> done = set.TakeFinished();
  ASSERT_EQ(done.size(), 1u);
  ASSERT_EQ(done[0].loaded, 25u);
  for (size_t i = 0; i < 25; ++i) {
    EXPECT_EQ(buffers[i], TestPayload(identity_, chain[i])) << i;
    EXPECT_EQ(done[0].sources[i], i < 10 ? 0 : 1) << i;
  }
}

TEST_F(TierSetTest, AFullStagingAreaDropsWriteBacksInsteadOfWaiting) {
  std::vector<std::unique_ptr<KvTier>> tiers;
  tiers.push_back(std::make_unique<DiskTier>(identity_, DiskTierConfig{Dir("")}));
  // Room for one block: offers that find it taken are dropped and counted.
  TierSet set(identity_, std::move(tiers), {.staging_bytes = 2048, .load_threads = 1});
  auto chain = TestChain(identity_, 200);
  for (const auto& meta : chain) set.Offer(meta, TestPayload(identity_, meta), false);
  set.Flush();
  TierSetStats stats = set.Stats();
  EXPECT_EQ(stats.writes_dropped + stats.tiers[0].blocks_written, 200u);
  EXPECT_GE(stats.tiers[0].blocks_written, 1u);
  EXPECT_EQ(stats.writes_pending, 0u);
  // Waiting for room loses nothing.
  for (const auto& meta : chain) set.Offer(meta, TestPayload(identity_, meta), true);
  set.Flush();
  EXPECT_EQ(set.Stats().tiers[0].blocks, 200);
}

TEST_F(TierSetTest, ClearDropsOneTierByName) {
  std::vector<std::unique_ptr<KvTier>> tiers;
  tiers.push_back(std::make_unique<DiskTier>(identity_, DiskTierConfig{Dir("")}));
  TierSet set(identity_, std::move(tiers));
  auto chain = TestChain(identity_, 5);
  auto owned = TestChain(identity_, 3, 100, "salt-alpha");
  for (const auto& meta : chain) set.Offer(meta, TestPayload(identity_, meta), true);
  // Offered and not yet written when the clear comes: the clear waits for them.
  for (const auto& meta : owned) set.Offer(meta, TestPayload(identity_, meta), true);
  size_t dropped = 0;
  EXPECT_TRUE(set.Clear("disk", TenantSaltDigest("salt-alpha"), &dropped));
  EXPECT_EQ(dropped, 3u);
  EXPECT_EQ(set.ProbablyHeld(Keys(owned)), 0u);
  EXPECT_EQ(set.ProbablyHeld(Keys(chain)), 5u);
  EXPECT_TRUE(set.Clear("disk", std::nullopt, &dropped));
  EXPECT_EQ(dropped, 5u);
  EXPECT_EQ(set.ProbablyHeld(Keys(chain)), 0u);
  EXPECT_FALSE(set.Clear("remote"));
}

}  // namespace
}  // namespace reprise
