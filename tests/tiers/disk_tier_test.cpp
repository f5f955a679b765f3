#include "tiers/disk_tier.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_support.h"
#include "tier_test_util.h"

namespace reprise {
namespace {

namespace fs = std::filesystem;
using testing::Keys;
using testing::TestChain;
using testing::TestIdentity;
using testing::TestPayload;

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::ScratchPath(::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }

  // Stores the chain's blocks; returns how many were stored.
  size_t StoreAll(DiskTier& tier, const std::vector<BlockMeta>& chain) {
    size_t stored = 0;
    for (const auto& meta : chain) stored += tier.Store(meta, TestPayload(identity_, meta)) ? 1 : 0;
    return stored;
  }

  // Loads the chain into fresh buffers and checks the bytes of what it loaded.
  size_t LoadAll(DiskTier& tier, const std::vector<BlockMeta>& chain) {
    std::vector<std::vector<uint8_t>> buffers(chain.size(),
                                              std::vector<uint8_t>(identity_.block_bytes, 0));
    std::vector<uint8_t*> dests;
    for (auto& buffer : buffers) dests.push_back(buffer.data());
    const size_t loaded = tier.LoadPrefix(chain, dests);
    for (size_t i = 0; i < loaded; ++i) {
      EXPECT_EQ(buffers[i], TestPayload(identity_, chain[i])) << "block " << i;
    }
    return loaded;
  }

  static void FlipByte(const std::string& path, size_t from_end) {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(-static_cast<std::streamoff>(from_end), std::ios::end);
    char byte = 0;
    file.read(&byte, 1);
    file.seekp(-static_cast<std::streamoff>(from_end), std::ios::end);
    byte = static_cast<char>(byte ^ 0x10);
    file.write(&byte, 1);
  }

  std::string dir_;
  TierIdentity identity_ = TestIdentity(4096);
};

TEST_F(DiskTierTest, StoresAndLoadsTheExactBytes) {
  DiskTier tier(identity_, {dir_});
  auto chain = TestChain(identity_, 6);
  EXPECT_EQ(tier.ProbablyHeld(Keys(chain)), 0u);
  EXPECT_TRUE(tier.ShouldStore(chain[0].key));
  ASSERT_EQ(StoreAll(tier, chain), 6u);
  EXPECT_FALSE(tier.ShouldStore(chain[0].key));
  EXPECT_FALSE(tier.Store(chain[0], TestPayload(identity_, chain[0])));  // held already
  EXPECT_EQ(tier.ProbablyHeld(Keys(chain)), 6u);
  EXPECT_EQ(LoadAll(tier, chain), 6u);
  TierStats stats = tier.Stats();
  EXPECT_EQ(stats.name, "disk");
  EXPECT_TRUE(stats.available);
  EXPECT_EQ(stats.blocks, 6);
  EXPECT_EQ(stats.blocks_written, 6u);
  EXPECT_EQ(stats.blocks_read, 6u);
  EXPECT_EQ(stats.bytes, 6 * (BlockHeaderBytes(4) + identity_.block_bytes));
  EXPECT_TRUE(fs::exists(tier.BlockPath(chain[3].key)));
}

TEST_F(DiskTierTest, LoadsStopAtTheFirstMissingBlock) {
  DiskTier tier(identity_, {dir_});
  auto chain = TestChain(identity_, 5);
  std::vector<BlockMeta> first_two(chain.begin(), chain.begin() + 2);
  StoreAll(tier, first_two);
  StoreAll(tier, {chain[3]});
  EXPECT_EQ(tier.ProbablyHeld(Keys(chain)), 2u);
  EXPECT_EQ(LoadAll(tier, chain), 2u);
}

TEST_F(DiskTierTest, TheIndexIsRebuiltAfterARestart) {
  auto chain = TestChain(identity_, 8);
  {
    DiskTier tier(identity_, {dir_});
    StoreAll(tier, chain);
  }
  DiskTier tier(identity_, {dir_});
  EXPECT_EQ(tier.rebuild().blocks, 8);
  EXPECT_EQ(tier.rebuild().corrupt, 0);
  EXPECT_EQ(tier.ProbablyHeld(Keys(chain)), 8u);
  EXPECT_EQ(LoadAll(tier, chain), 8u);
}

TEST_F(DiskTierTest, AFlippedByteIsDetectedCountedDeletedAndNeverUsed) {
  DiskTier tier(identity_, {dir_});
  auto chain = TestChain(identity_, 4);
  StoreAll(tier, chain);
  const std::string path = tier.BlockPath(chain[2].key);
  FlipByte(path, 100);  // in the payload
  EXPECT_EQ(LoadAll(tier, chain), 2u);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(tier.Stats().corrupt_blocks, 1u);
  EXPECT_EQ(tier.ProbablyHeld(Keys(chain)), 2u);
  // Stored again (recomputed), it loads.
  StoreAll(tier, {chain[2]});
  EXPECT_EQ(LoadAll(tier, chain), 4u);
}

TEST_F(DiskTierTest, ATruncatedFileIsRefusedAtLoadAndAtRestart) {
  auto chain = TestChain(identity_, 3);
  std::string path_0;
  std::string path_1;
  {
    DiskTier tier(identity_, {dir_});
    StoreAll(tier, chain);
    path_0 = tier.BlockPath(chain[0].key);
    path_1 = tier.BlockPath(chain[1].key);
    fs::resize_file(path_1, fs::file_size(path_1) - 1);
    EXPECT_EQ(LoadAll(tier, chain), 1u);
    EXPECT_EQ(tier.Stats().corrupt_blocks, 1u);
    EXPECT_FALSE(fs::exists(path_1));
    fs::resize_file(path_0, 50);  // now cut inside the header
  }
  DiskTier tier(identity_, {dir_});
  EXPECT_EQ(tier.rebuild().corrupt, 1);
  EXPECT_EQ(tier.rebuild().blocks, 1);  // chain[2]: no parent here, but a block of its own
  EXPECT_FALSE(fs::exists(path_0));
  EXPECT_EQ(LoadAll(tier, chain), 0u);
}

TEST_F(DiskTierTest, AnotherModelsFileUnderTheRightNameIsForeign) {
  TierIdentity other = TestIdentity(4096, 4, "model-b");
  auto chain = TestChain(identity_, 2);
  const std::string other_dir = dir_ + "-other";
  std::string other_path;
  {
    DiskTier other_tier(other, {other_dir});
    // The other model's block with our key: a file that names the right block but is not ours.
    BlockMeta impostor = TestChain(other, 1)[0];
    ASSERT_TRUE(other_tier.Store(impostor, TestPayload(other, impostor)));
    other_path = other_tier.BlockPath(impostor.key);
  }
  DiskTier tier(identity_, {dir_});
  StoreAll(tier, chain);
  const std::string path = tier.BlockPath(chain[1].key);
  fs::copy_file(other_path, path, fs::copy_options::overwrite_existing);
  EXPECT_EQ(LoadAll(tier, chain), 1u);
  EXPECT_EQ(tier.Stats().foreign_blocks, 1u);
  EXPECT_FALSE(fs::exists(path));

  // At start-up too: counted and deleted.
  StoreAll(tier, {chain[1]});
  fs::copy_file(other_path, path, fs::copy_options::overwrite_existing);
  DiskTier restarted(identity_, {dir_});
  EXPECT_EQ(restarted.rebuild().foreign, 1);
  EXPECT_EQ(restarted.rebuild().blocks, 1);
  EXPECT_FALSE(fs::exists(path));
}

// One tenant's clear drops its files and nothing of the others, before and after a restart (the
// owners come back from the headers).
TEST_F(DiskTierTest, ClearOwnedDropsOnlyThatOwnersFiles) {
  auto alpha = TestChain(identity_, 3, 1, "salt-alpha");
  auto beta = TestChain(identity_, 2, 1, "salt-beta");
  auto nobody = TestChain(identity_, 2, 1);
  {
    DiskTier tier(identity_, {dir_});
    ASSERT_EQ(StoreAll(tier, alpha) + StoreAll(tier, beta) + StoreAll(tier, nobody), 7u);
    EXPECT_EQ(tier.ClearOwned(TenantSaltDigest("salt-alpha")), 3u);
    for (const auto& meta : alpha) EXPECT_FALSE(fs::exists(tier.BlockPath(meta.key)));
    EXPECT_EQ(tier.ProbablyHeld(Keys(alpha)), 0u);
    EXPECT_EQ(LoadAll(tier, beta), 2u);
    EXPECT_EQ(tier.Stats().blocks, 4);
    EXPECT_EQ(tier.ClearOwned(TenantSaltDigest("salt-gamma")), 0u);
  }
  DiskTier tier(identity_, {dir_});
  EXPECT_EQ(tier.rebuild().blocks, 4);
  EXPECT_EQ(tier.ClearOwned(TenantSaltDigest("salt-beta")), 2u);
  for (const auto& meta : beta) EXPECT_FALSE(fs::exists(tier.BlockPath(meta.key)));
  EXPECT_EQ(LoadAll(tier, nobody), 2u);
  EXPECT_EQ(tier.Stats().bytes, 2 * (BlockHeaderBytes(4) + identity_.block_bytes));
}

// A file of the previous format version (no owner) is foreign: counted, deleted, never used.
TEST_F(DiskTierTest, AnOlderFormatVersionIsForeign) {
  auto chain = TestChain(identity_, 2);
  std::string path;
  {
    DiskTier tier(identity_, {dir_});
    StoreAll(tier, chain);
    path = tier.BlockPath(chain[1].key);
  }
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(4);
    const char version_1[4] = {1, 0, 0, 0};
    file.write(version_1, 4);
  }
  DiskTier tier(identity_, {dir_});
  EXPECT_EQ(tier.rebuild().foreign, 1);
  EXPECT_EQ(tier.rebuild().corrupt, 0);
  EXPECT_EQ(tier.rebuild().blocks, 1);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(LoadAll(tier, chain), 1u);
}

TEST_F(DiskTierTest, OtherFingerprintsFoldersAreCountedAndLeftAlone) {
  TierIdentity other = TestIdentity(4096, 8, "model-b");  // another model and block size
  {
    DiskTier other_tier(other, {dir_});
    auto chain = TestChain(other, 3);
    for (const auto& meta : chain) other_tier.Store(meta, TestPayload(other, meta));
  }
  auto chain = TestChain(identity_, 2);
  {
    DiskTier tier(identity_, {dir_});
    EXPECT_EQ(tier.rebuild().foreign, 3);
    EXPECT_EQ(tier.rebuild().blocks, 0);
    StoreAll(tier, chain);
  }
  DiskTier other_again(other, {dir_});
  EXPECT_EQ(other_again.rebuild().blocks, 3);
  EXPECT_EQ(other_again.rebuild().foreign, 2);
}

TEST_F(DiskTierTest, TheSizeCapEvictsLeastRecentlyUsed) {
  const uint64_t block_file = BlockHeaderBytes(4) + identity_.block_bytes;
  DiskTier tier(identity_, {dir_, 4 * block_file});
  auto chain = TestChain(identity_, 6);
  StoreAll(tier, {chain[0], chain[1], chain[2], chain[3]});
  std::vector<BlockMeta> first(chain.begin(), chain.begin() + 1);
  EXPECT_EQ(LoadAll(tier, first), 1u);   // block 0 is now the most recently used
  StoreAll(tier, {chain[4], chain[5]});  // evicts blocks 1 and 2
  TierStats stats = tier.Stats();
  EXPECT_EQ(stats.blocks, 4);
  EXPECT_LE(stats.bytes, 4 * block_file);
  EXPECT_EQ(stats.evictions, 2u);
  EXPECT_FALSE(tier.ShouldStore(chain[0].key));
  EXPECT_TRUE(tier.ShouldStore(chain[1].key));
  EXPECT_TRUE(tier.ShouldStore(chain[2].key));
  EXPECT_FALSE(fs::exists(tier.BlockPath(chain[1].key)));
  // A block larger than the whole cap is never stored.
  DiskTier tiny(identity_, {dir_ + "-tiny", block_file - 1});
  EXPECT_FALSE(tiny.Store(chain[0], TestPayload(identity_, chain[0])));
}

TEST_F(DiskTierTest, AnUnusableDirectoryIsReportedAndStoresNothing) {
  fs::create_directories(fs::path(dir_).parent_path());
  std::ofstream(dir_) << "a file where the folder should be";
  DiskTier tier(identity_, {dir_});
  auto chain = TestChain(identity_, 2);
  EXPECT_FALSE(tier.ShouldStore(chain[0].key));
  EXPECT_EQ(StoreAll(tier, chain), 0u);
  EXPECT_EQ(LoadAll(tier, chain), 0u);
  TierStats stats = tier.Stats();
  EXPECT_FALSE(stats.available);
  EXPECT_GE(stats.errors, 1u);
  EXPECT_NE(stats.last_error.find(dir_), std::string::npos) << stats.last_error;
}

TEST_F(DiskTierTest, AFolderRemovedUnderneathIsAnErrorNotACrash) {
  DiskTier tier(identity_, {dir_});
  auto chain = TestChain(identity_, 3);
  StoreAll(tier, {chain[0]});
  fs::remove_all(dir_);
  std::ofstream(dir_) << "the folder is now a file";  // nothing can be created under it
  EXPECT_EQ(StoreAll(tier, {chain[1]}), 0u);
  EXPECT_EQ(LoadAll(tier, chain), 0u);
  EXPECT_GE(tier.Stats().errors, 1u);
  EXPECT_EQ(tier.ProbablyHeld(Keys(chain)), 0u);  // the lost block was forgotten
}

// Start-up reads headers only. REPRISE_DISK_REBUILD_BLOCKS sets how many blocks (100000 to
// measure the figure quoted in the design notes); payloads are small since only headers are read.
TEST_F(DiskTierTest, RebuildsALargeIndexFromHeaders) {
  const char* env = std::getenv("REPRISE_DISK_REBUILD_BLOCKS");
  const size_t count = env ? std::strtoul(env, nullptr, 10) : 5000;
  TierIdentity small = TestIdentity(256);
  auto chain = TestChain(small, count);
  auto start = std::chrono::steady_clock::now();
  {
    DiskTier tier(small, {dir_});
    for (const auto& meta : chain) ASSERT_TRUE(tier.Store(meta, TestPayload(small, meta)));
  }
  const double write_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  DiskTier tier(small, {dir_});
  EXPECT_EQ(tier.rebuild().blocks, static_cast<int64_t>(count));
  EXPECT_EQ(tier.ProbablyHeld(Keys(chain)), count);
  std::printf("%zu blocks: written in %.2f s, index rebuilt in %.3f s\n", count, write_seconds,
              tier.rebuild().seconds);
}

}  // namespace
}  // namespace reprise
