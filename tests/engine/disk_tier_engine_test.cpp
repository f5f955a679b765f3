// The disk tier in the engine: blocks evicted or cleared from memory come back from disk (after a
// restart too) bit for bit, so answers equal those with reuse off; bad files are never used; an
// unusable folder leaves the engine answering from memory alone.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine_test_support.h"

namespace reprise {
namespace {

namespace fs = std::filesystem;
using testing::ExpectBitIdentical;
using testing::Greedy;
using testing::TestConfig;
using testing::TinyModelPath;

class DiskTierEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REPRISE_REQUIRE_FIXTURES();
    model_ = TinyModelPath();
    dir_ = testing::ScratchPath(std::string("kv-") +
                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    table_ = testing::ReadTestData("long_table_prompt.txt");
  }

  EngineConfig DiskConfig(size_t memory = size_t{64} << 20) {
    EngineConfig config = TestConfig(model_, /*reuse=*/true);
    config.kv_disk_path = dir_;
    config.kv_cache_memory_bytes = memory;
    return config;
  }

  static GenerationOutput Run(Engine& engine, const std::string& prompt) {
    std::vector<GenerationRequest> requests;
    requests.push_back(Greedy(prompt));
    return engine.Generate(std::move(requests))[0];
  }

  GenerationOutput Reference(const std::string& prompt) {
    Engine engine(TestConfig(model_, /*reuse=*/false));
    return Run(engine, prompt);
  }

  // Every .kvb file under the folder.
  std::vector<fs::path> BlockFiles() const {
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
      if (entry.path().extension() == ".kvb") files.push_back(entry.path());
    }
    return files;
  }

  std::string model_;
  std::string dir_;
  std::string table_;
};

TEST_F(DiskTierEngineTest, ClearedMemoryAndARestartLoadFromDiskBitForBit) {
  const std::string first = table_ + "Question: what is the age of John Doe? Answer: ";
  const std::string second = table_ + "Question: what is the age of Zack Blue? Answer: ";
  GenerationOutput reference = Reference(second);
  size_t memory_hit = 0;
  {
    Engine engine(DiskConfig());
    GenerationOutput cold = Run(engine, first);
    EXPECT_EQ(cold.cached_tokens, 0u);
    GenerationOutput warm = Run(engine, second);
    ExpectBitIdentical(reference, warm, "warm from memory");
    EXPECT_EQ(warm.cache_sources.memory, warm.cached_tokens);
    EXPECT_EQ(warm.cache_sources.disk, 0u);
    memory_hit = warm.cached_tokens;
    ASSERT_GT(memory_hit, 256u);

    EXPECT_GT(engine.ClearCache(), 0u);  // written back, then dropped from memory
    GenerationOutput from_disk = Run(engine, second);
    ExpectBitIdentical(reference, from_disk, "memory cleared, loaded from disk");
    EXPECT_EQ(from_disk.cache_sources.memory, 0u);
    // Full blocks come from disk; the tail block of the shared prefix is recomputed.
    EXPECT_GE(from_disk.cache_sources.disk, memory_hit / 16 * 16 - 16);
    EXPECT_EQ(from_disk.cached_tokens, from_disk.cache_sources.disk);
    EngineStats stats = testing::WaitForIdle(engine);
    ASSERT_EQ(stats.tiers.size(), 1u);
    EXPECT_EQ(stats.tiers[0].name, "disk");
    EXPECT_GT(stats.tiers[0].blocks_read, 0u);
    EXPECT_EQ(stats.tiers[0].corrupt_blocks, 0u);
    EXPECT_EQ(stats.prompt_tokens_cached.disk, from_disk.cache_sources.disk);
  }
  Engine restarted(DiskConfig());
  GenerationOutput after_restart = Run(restarted, second);
  ExpectBitIdentical(reference, after_restart, "after a restart on the same folder");
  EXPECT_GE(after_restart.cache_sources.disk, memory_hit / 16 * 16 - 16);
  EXPECT_EQ(after_restart.cache_sources.memory, 0u);
}

// q8 blocks (planes of codes and scales, of two sizes) go to disk and come back after a restart
// bit for bit; an f16 engine on the same folder finds none of them (the KV type is in the keys).
TEST_F(DiskTierEngineTest, Q8BlocksRestartFromDiskAndStayTheirTypes) {
  const std::string prompt = table_ + "Question: what is the age of John Doe? Answer: ";
  auto q8 = [&](EngineConfig config) {
    config.kv_type = "q8";
    return config;
  };
  Engine fresh(q8(TestConfig(model_, /*reuse=*/false)));
  GenerationOutput reference = Run(fresh, prompt);
  {
    Engine engine(q8(DiskConfig()));
    EXPECT_EQ(Run(engine, prompt).cached_tokens, 0u);
  }  // a clean stop writes memory back
  Engine restarted(q8(DiskConfig()));
  GenerationOutput from_disk = Run(restarted, prompt);
  ExpectBitIdentical(reference, from_disk, "q8 after a restart");
  EXPECT_GT(from_disk.cache_sources.disk, 256u);
  Engine other_type(DiskConfig());
  EXPECT_EQ(Run(other_type, prompt).cache_sources.disk, 0u);
}

TEST_F(DiskTierEngineTest, ACleanStopKeepsWhatMemoryHeld) {
  const std::string prompt = table_ + "Question: what is the age of John Doe? Answer: ";
  GenerationOutput reference = Reference(prompt);
  {
    Engine engine(DiskConfig());
    Run(engine, prompt);  // nothing evicted: the blocks are in memory only
  }
  Engine restarted(DiskConfig());
  GenerationOutput output = Run(restarted, prompt);
  ExpectBitIdentical(reference, output, "after a clean stop");
  EXPECT_GT(output.cache_sources.disk, output.prompt_tokens - 32);
}

TEST_F(DiskTierEngineTest, AWorkingSetLargerThanMemoryIsServedFromDisk) {
  // Memory for about one table's blocks; four different tables cycle through it.
  std::vector<std::string> prompts;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back("Table " + std::to_string(i) + ".\n" + table_ + "Question " +
                      std::to_string(i) + ": who is oldest? Answer: ");
  }
  EngineConfig probe = TestConfig(model_, true);
  Engine sizing(probe);
  const size_t block_bytes = sizing.Info().kv_cache_bytes / sizing.Info().kv_cache_blocks;
  const size_t table_blocks = sizing.Tokenize(prompts[0], true).size() / 16 + 2;
  Engine engine(DiskConfig(block_bytes * table_blocks * 3 / 2));
  std::vector<GenerationOutput> references;
  for (const auto& prompt : prompts) references.push_back(Reference(prompt));
  size_t disk_tokens = 0;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerationOutput output = Run(engine, prompts[i]);
      ExpectBitIdentical(references[i], output, fmt::format("round {} prompt {}", round, i));
      if (round == 1) {
        // Whatever memory no longer holds comes from disk.
        EXPECT_GT(output.cached_tokens, output.prompt_tokens / 2) << "prompt " << i;
        EXPECT_EQ(output.cache_sources.memory + output.cache_sources.disk, output.cached_tokens);
        disk_tokens += output.cache_sources.disk;
      }
    }
  }
  EXPECT_GT(disk_tokens, prompts.size() * 100);
  EngineStats stats = testing::WaitForIdle(engine);
  EXPECT_GT(stats.tiers[0].blocks_written, 0u);
  EXPECT_EQ(stats.blocks_in_use, 0);
}

// A tenant's clear of memory and disk drops its own blocks from both, and nothing of another's.
TEST_F(DiskTierEngineTest, AnOwnersClearReachesTheDiskAndSparesOthers) {
  const std::string prompt = table_ + "Question: what is the age of John Doe? Answer: ";
  auto as = [&](const char* salt) {
    GenerationRequest request = Greedy(prompt);
    request.cache.cache_salt = salt;
    request.cache.owner = salt;
    return request;
  };
  Engine engine(DiskConfig());
  auto run = [&](const char* salt) {
    std::vector<GenerationRequest> requests;
    requests.push_back(as(salt));
    return engine.Generate(std::move(requests))[0];
  };
  run("salt-alpha");
  run("salt-beta");
  engine.ClearCache(std::vector<std::string>{"memory"});  // both tenants' blocks go to disk
  const size_t files = BlockFiles().size();
  ASSERT_GT(files, 2 * (prompt.size() / 16 / 4));
  const size_t dropped =
      engine.ClearCache(std::vector<std::string>{"memory", "disk"}, std::string("salt-alpha"));
  EXPECT_EQ(dropped, files / 2);
  EXPECT_EQ(BlockFiles().size(), files - dropped);
  GenerationOutput alpha = run("salt-alpha");
  EXPECT_EQ(alpha.cached_tokens, 0u);
  GenerationOutput beta = run("salt-beta");
  EXPECT_GT(beta.cache_sources.disk, beta.prompt_tokens - 32);
}

// A fault while a request's blocks load from disk fails that request as an error (not as a
// cancellation), gives its blocks back, and the next request is served exactly.
TEST_F(DiskTierEngineTest, AFaultWhileLoadingIsAnErrorAndReleasesTheBlocks) {
  const std::string prompt = table_ + "Question: what is the age of John Doe? Answer: ";
  GenerationOutput reference = Reference(prompt);
  static constexpr uint64_t kFaultSeed =
      4242;  // marks the request to fail (greedy: the seed is unused)
  EngineConfig config = DiskConfig();
  auto loads = std::make_shared<std::atomic<int>>(0);
  config.fault_hook = [loads](EngineFaultSite site, const GenerationRequest& request) {
    if (site != EngineFaultSite::kLoad) return;
    loads->fetch_add(1);
    if (request.sampling.seed == kFaultSeed) throw std::runtime_error("injected load fault");
  };
  Engine engine(config);
  Run(engine, prompt);
  engine.ClearCache(std::vector<std::string>{"memory"});  // the prompt's blocks are on disk now

  GenerationRequest doomed = Greedy(prompt);
  doomed.sampling.seed = kFaultSeed;
  std::vector<GenerationRequest> requests;
  requests.push_back(std::move(doomed));
  GenerationOutput failed = engine.Generate(std::move(requests))[0];
  EXPECT_EQ(loads->load(), 1);
  EXPECT_EQ(failed.finish_reason, FinishReason::kError);
  EXPECT_NE(failed.error.find("injected load fault"), std::string::npos) << failed.error;
  EXPECT_TRUE(failed.token_ids.empty());
  EngineStats stats = testing::WaitForIdle(engine);
  EXPECT_EQ(stats.blocks_in_use, 0);
  EXPECT_EQ(stats.blocks_in_use + stats.blocks_cached + stats.blocks_free, stats.blocks_total);

  GenerationOutput again = Run(engine, prompt);
  EXPECT_EQ(again.finish_reason, FinishReason::kLength) << again.error;
  ExpectBitIdentical(reference, again, "after a fault while loading");
  EXPECT_GT(again.cached_tokens, again.prompt_tokens - 32);
  EXPECT_EQ(testing::WaitForIdle(engine).blocks_in_use, 0);
}

TEST_F(DiskTierEngineTest, BadFilesAreNeverUsedAndTheAnswerIsTheSame) {
  const std::string prompt = table_ + "Question: what is the age of John Doe? Answer: ";
  GenerationOutput reference = Reference(prompt);
  {
    Engine engine(DiskConfig());
    Run(engine, prompt);
    engine.ClearCache();
  }
  std::vector<fs::path> files = BlockFiles();
  ASSERT_GE(files.size(), 6u);
  // A flipped byte, a truncated file, and another block's file under this one's name.
  {
    std::fstream file(files[0], std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-20, std::ios::end);
    file.put('\x5a');
  }
  fs::resize_file(files[1], fs::file_size(files[1]) - 100);
  fs::copy_file(files[3], files[2], fs::copy_options::overwrite_existing);
  Engine engine(DiskConfig());
  GenerationOutput output = Run(engine, prompt);
  ExpectBitIdentical(reference, output, "with bad block files");
  EngineStats stats = testing::WaitForIdle(engine);
  EXPECT_GE(stats.tiers[0].corrupt_blocks, 1u);
  EXPECT_FALSE(fs::exists(files[0]) && fs::exists(files[1]) && fs::exists(files[2]));
  // Recomputed blocks are written again: a later run finds every block.
  engine.ClearCache();
  GenerationOutput again = Run(engine, prompt);
  ExpectBitIdentical(reference, again, "after the bad blocks were recomputed");
  EXPECT_GT(again.cache_sources.disk, output.cache_sources.disk);
}

TEST_F(DiskTierEngineTest, AnUnusableFolderLeavesTheEngineAnswering) {
  fs::create_directories(fs::path(dir_).parent_path());
  std::ofstream(dir_) << "a file where the folder should be";
  const std::string prompt = table_ + "Question: what is the age of John Doe? Answer: ";
  GenerationOutput reference = Reference(prompt);
  Engine engine(DiskConfig());
  ExpectBitIdentical(reference, Run(engine, prompt), "first");
  engine.ClearCache();
  GenerationOutput output = Run(engine, prompt);
  ExpectBitIdentical(reference, output, "after clearing memory");
  EXPECT_EQ(output.cached_tokens, 0u);
  EngineStats stats = testing::WaitForIdle(engine);
  ASSERT_EQ(stats.tiers.size(), 1u);
  EXPECT_FALSE(stats.tiers[0].available);
  EXPECT_GE(stats.tiers[0].errors, 1u);
}

TEST_F(DiskTierEngineTest, TaskPromptsFoundOnDiskAreLoadedNotRecomputed) {
  EngineConfig config = DiskConfig();
  config.task_prompts_json =
      nlohmann::json::array({{{"task_id", "table"}, {"prompt", table_}}}).dump();
  GenerationRequest request = Greedy("Question: who is oldest? Answer: ");
  request.add_special_tokens = false;
  request.cache.task_id = "table";
  GenerationOutput first;
  {
    Engine engine(config);
    first = engine.Generate({request})[0];
    EXPECT_EQ(testing::WaitForIdle(engine).tiers[0].blocks_read, 0u);
  }
  Engine restarted(config);
  EngineStats stats = restarted.Stats();
  EXPECT_GT(stats.tiers[0].blocks_read, 0u);
  EXPECT_EQ(stats.blocks_pinned, static_cast<int64_t>(restarted.TaskPrompts()[0].blocks));
  GenerationOutput second = restarted.Generate({request})[0];
  ExpectBitIdentical(first, second, "task prompt loaded from disk");
}

}  // namespace
}  // namespace reprise
