// The scheduler with a real prefix cache and no model: what each step computes.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

namespace reprise {
namespace {

constexpr int kBlockSize = 4;

class SchedulerTest : public ::testing::Test {
 protected:
  void Build(int64_t num_blocks, int max_batch_tokens) {
    PrefixCacheConfig config;
    config.num_blocks = num_blocks;
    config.block_size = kBlockSize;
    config.block_bytes = 64;
    cache_ = std::make_unique<PrefixCache>(config);
    SchedulerConfig scheduler_config;
    scheduler_config.block_size = kBlockSize;
    scheduler_config.max_batch_tokens = max_batch_tokens;
    scheduler_ = std::make_unique<Scheduler>(scheduler_config, *cache_);
  }

  Sequence* Add(uint64_t id, std::vector<int32_t> tokens) {
    auto sequence = std::make_unique<Sequence>();
    sequence->id = id;
    sequence->tokens = std::move(tokens);
    sequence->prompt_len = sequence->tokens.size();
    Sequence* raw = sequence.get();
    scheduler_->Add(std::move(sequence));
    return raw;
  }

  // Runs a step as the engine would, appending `next_token` to sequences that reach their end.
  StepPlan Step(int32_t next_token = 7) {
    StepPlan plan = scheduler_->Schedule();
    scheduler_->Complete(plan);
    for (const auto& entry : plan.entries) {
      if (entry.wants_logits) {
        entry.sequence->tokens.push_back(next_token);
        ++entry.sequence->generated;
      }
    }
    return plan;
  }

  static std::vector<int32_t> Range(int32_t count, int32_t start = 100) {
    std::vector<int32_t> tokens(static_cast<size_t>(count));
    std::iota(tokens.begin(), tokens.end(), start);
    return tokens;
  }

  std::unique_ptr<PrefixCache> cache_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, DecodeTokensGoFirstThenPrefillChunksFillTheBudget) {
  Build(64, 16);
  Sequence* first = Add(1, Range(6));
  Step();  // first's whole prompt
  EXPECT_EQ(first->num_computed, 6u);
  Sequence* second = Add(2, Range(40, 500));
  StepPlan plan = Step();
  ASSERT_EQ(plan.entries.size(), 2u);
  EXPECT_EQ(plan.entries[0].sequence, first);
  EXPECT_EQ(plan.entries[0].count, 1u);
  EXPECT_EQ(plan.entries[1].sequence, second);
  EXPECT_EQ(plan.entries[1].count, 15u);
  EXPECT_EQ(plan.num_tokens, 16u);
}

TEST_F(SchedulerTest, AdmissionStartsAfterTheCachedPrefix) {
  Build(64, 64);
  Sequence* first = Add(1, Range(10));
  Step();
  scheduler_->Finish(first);
  std::vector<int32_t> longer = Range(10);
  longer.push_back(999);
  longer.push_back(998);
  Sequence* second = Add(2, longer);
  StepPlan plan = Step();
  // Positions 0..9 were computed by the first request; its partly filled tail block counts too.
  EXPECT_EQ(second->cached_tokens, 10u);
  ASSERT_EQ(plan.entries.size(), 1u);
  EXPECT_EQ(plan.entries[0].start, 10u);
  EXPECT_EQ(plan.entries[0].count, 2u);
}

TEST_F(SchedulerTest, TwinRequestWaitsForTheBlocksBeingComputedInsteadOfRecomputing) {
  Build(64, 16);
  Sequence* first = Add(1, Range(20));
  Sequence* twin = Add(2, Range(20));
  StepPlan plan = Step();
  ASSERT_EQ(plan.entries.size(), 1u);  // the twin's first block is being computed: it waits
  EXPECT_EQ(plan.entries[0].sequence, first);
  EXPECT_EQ(plan.entries[0].count, 16u);
  Step();
  // The twin took the 4 blocks the first request committed, and waits while the first
  // computes the next one.
  EXPECT_EQ(twin->num_computed, 16u);
  EXPECT_EQ(twin->cached_tokens, 16u);
  plan = Step();
  // Now all but the last prompt token come from cache, the last block's 3 by copy.
  EXPECT_EQ(twin->cached_tokens, 19u);
  ASSERT_EQ(plan.entries.size(), 2u);
  EXPECT_EQ(plan.entries[1].sequence, twin);
  EXPECT_EQ(plan.entries[1].start, 19u);
  EXPECT_EQ(plan.entries[1].count, 1u);
}

TEST_F(SchedulerTest, TwinsStartingInsideABlockStillComputeItOnce) {
  Build(64, 64);
  // An earlier request shares the first 2 tokens with the twins: both start inside block 0
  // after a partial match.
  std::vector<int32_t> earlier = {100, 101, 7, 7, 7};
  Sequence* first = Add(1, earlier);
  Step();
  scheduler_->Finish(first);
  std::vector<int32_t> twin_tokens = Range(20);  // 100, 101, 102, ...
  Sequence* leader = Add(2, twin_tokens);
  Sequence* twin = Add(3, twin_tokens);
  StepPlan plan = Step();
  EXPECT_EQ(leader->cached_tokens, 2u);
  ASSERT_EQ(plan.entries.size(), 1u);  // the twin waits for the leader's blocks
  EXPECT_EQ(plan.entries[0].sequence, leader);
  plan = Step();
  EXPECT_EQ(twin->cached_tokens, 19u);  // everything but its last token, from the leader
  ASSERT_EQ(plan.entries.size(), 2u);
  EXPECT_EQ(plan.entries[1].sequence, twin);
  EXPECT_EQ(plan.entries[1].count, 1u);
}

TEST_F(SchedulerTest, RunningOutOfBlocksPreemptsTheNewestAndEveryoneFinishes) {
  Build(8, 64);  // 32 positions in all
  Sequence* first = Add(1, Range(14));
  Sequence* second = Add(2, Range(14, 300));
  std::vector<Sequence*> finished;
  for (int step = 0; step < 200 && finished.size() < 2; ++step) {
    Step();
    for (Sequence* sequence : {first, second}) {
      if (std::find(finished.begin(), finished.end(), sequence) == finished.end() &&
          sequence->generated >= 8) {
        scheduler_->Finish(sequence);
        finished.push_back(sequence);
      }
    }
  }
  ASSERT_EQ(finished.size(), 2u);
  EXPECT_GT(scheduler_->stats().preemptions, 0u);
  EXPECT_EQ(cache_->Stats().blocks_in_use, 0);
  cache_->CheckInvariants();
}

TEST_F(SchedulerTest, RemoveReleasesEverything) {
  Build(16, 64);
  Add(1, Range(30));
  Step();
  EXPECT_GT(cache_->Stats().blocks_in_use, 0);
  EXPECT_NE(scheduler_->Remove(1), nullptr);
  EXPECT_EQ(cache_->Stats().blocks_in_use, 0);
  EXPECT_FALSE(scheduler_->HasWork());
}

}  // namespace
}  // namespace reprise
