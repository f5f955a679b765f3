// The scheduler with a real prefix cache and no model: what each step computes.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

namespace reprise {
namespace {

constexpr int kBlockSize = 4;

class SchedulerTest : public ::testing::Test {
 protected:
  void Build(int64_t num_blocks, int max_batch_tokens,
             PrefillOrder order = PrefillOrder::kCacheAware, int max_running = 64) {
    PrefixCacheConfig config;
    config.num_blocks = num_blocks;
    config.block_size = kBlockSize;
    config.block_bytes = 64;
    cache_ = std::make_unique<PrefixCache>(config);
    SchedulerConfig scheduler_config;
    scheduler_config.block_size = kBlockSize;
    scheduler_config.max_batch_tokens = max_batch_tokens;
    scheduler_config.prefill_order = order;
    scheduler_config.max_running = max_running;
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

// A request whose prompt is mostly cached is computed before an older cold one: its first token
// should not wait for someone else's long prompt.
TEST_F(SchedulerTest, CacheAwareOrderServesCachedRequestsBeforeOlderColdOnes) {
  for (PrefillOrder order : {PrefillOrder::kCacheAware, PrefillOrder::kArrival}) {
    SCOPED_TRACE(order == PrefillOrder::kCacheAware ? "cache-aware" : "arrival");
    Build(64, 8, order);
    Sequence* warm = Add(1, Range(16));
    while (warm->generated == 0) Step();
    scheduler_->Finish(warm);
    Sequence* cold = Add(2, Range(24, 500));  // older, nothing cached
    std::vector<int32_t> cached = Range(16);  // 16 cached tokens, 2 new
    cached.push_back(900);
    cached.push_back(901);
    Sequence* reuser = Add(3, cached);
    StepPlan plan = Step();
    if (order == PrefillOrder::kCacheAware) {
      ASSERT_EQ(plan.entries.size(), 2u);
      EXPECT_EQ(plan.entries[0].sequence, reuser);
      EXPECT_EQ(plan.entries[0].start, 16u);
      EXPECT_EQ(plan.entries[0].count, 2u);
      EXPECT_TRUE(plan.entries[0].wants_logits);  // its first token comes from this very step
      EXPECT_EQ(plan.entries[1].sequence, cold);
      EXPECT_EQ(plan.entries[1].count, 6u);  // the rest of the budget
    } else {
      ASSERT_EQ(plan.entries.size(), 1u);  // the old request takes the whole budget
      EXPECT_EQ(plan.entries[0].sequence, cold);
      EXPECT_EQ(plan.entries[0].count, 8u);
    }
    EXPECT_EQ(reuser->cached_tokens, 16u);
  }
}

// An older request that computed part of its prompt, then took the rest of a shared prefix from
// a newer one that went first, reports as cached only what it did not compute: the hit rate is
// what the cache saved, never more.
TEST_F(SchedulerTest, CachedTokensCountOnlyWhatOthersComputed) {
  Build(64, 16);
  Sequence* older = Add(1, Range(40));
  Step();  // positions 0..15
  EXPECT_EQ(older->num_computed, 16u);
  Sequence* newer = Add(2, Range(32));  // the same first 32 tokens, less left to compute
  size_t prompt_positions_computed = 16;
  for (int step = 0; step < 10 && (older->generated == 0 || newer->generated == 0); ++step) {
    StepPlan plan = Step();
    for (const auto& entry : plan.entries) {
      const size_t end = std::min(entry.start + entry.count, entry.sequence->prompt_len);
      if (end > entry.start) prompt_positions_computed += end - entry.start;
    }
  }
  ASSERT_GE(older->generated, 1u);
  ASSERT_GE(newer->generated, 1u);
  EXPECT_EQ(newer->cached_tokens, 16u);  // the older one's first 16
  EXPECT_EQ(older->cached_tokens, 16u);  // positions 16..31, from the newer one
  EXPECT_EQ(scheduler_->stats().prompt_tokens_queried, 72u);
  EXPECT_EQ(scheduler_->stats().prompt_tokens_hit, 32u);
  EXPECT_EQ(prompt_positions_computed, 72u - 32u);
}

// Short requests arriving without pause (and filling the budget) would keep a long prompt
// waiting for ever under plain shortest-first. Aging lets it overtake them: with a budget of 8
// and 8 aging steps a step of waiting counts as one token, so the 64-token prompt starts after
// about 64 - 8 steps, and once started it keeps going first (its key only falls).
// More requests wait than there are running slots: the cache-aware order admits the one whose
// prompt is mostly cached before an older cold one; arrival order admits the older.
TEST_F(SchedulerTest, CacheAwareAdmissionTakesCachedRequestsFromTheQueueFirst) {
  for (PrefillOrder order : {PrefillOrder::kCacheAware, PrefillOrder::kArrival}) {
    SCOPED_TRACE(order == PrefillOrder::kCacheAware ? "cache-aware" : "arrival");
    Build(64, 8, order, /*max_running=*/1);
    Sequence* warm = Add(1, Range(16));
    while (warm->generated == 0) Step();
    scheduler_->Finish(warm);
    Sequence* cold = Add(2, Range(24, 500));
    std::vector<int32_t> cached = Range(16);
    cached.push_back(900);
    cached.push_back(901);
    Sequence* reuser = Add(3, cached);
    StepPlan plan = Step();
    ASSERT_EQ(plan.entries.size(), 1u);
    EXPECT_EQ(plan.entries[0].sequence, order == PrefillOrder::kCacheAware ? reuser : cold);
    EXPECT_EQ(scheduler_->num_waiting(), 1u);
  }
}

// A cold request waiting behind a stream of cached ones is still admitted: waiting ages it.
TEST_F(SchedulerTest, CacheAwareAdmissionAgesAColdRequestUntilItIsAdmitted) {
  Build(256, 8, PrefillOrder::kCacheAware, /*max_running=*/1);
  Sequence* warm = Add(1, Range(16));
  while (warm->generated == 0) Step();
  scheduler_->Finish(warm);
  Sequence* cold = Add(2, Range(40, 500));
  size_t steps = 0;
  for (; steps < 200 && cold->num_computed == 0; ++steps) {
    // A new request with 16 cached tokens and 2 new ones arrives every step and, admitted,
    // finishes its prefill in that step.
    std::vector<int32_t> cached = Range(16);
    cached.push_back(1000 + static_cast<int32_t>(steps));
    cached.push_back(2000);
    Add(100 + steps, cached);
    StepPlan plan = Step();
    for (const auto& entry : plan.entries) {
      if (entry.sequence != cold && entry.sequence->generated >= 1) {
        scheduler_->Finish(entry.sequence);
      }
    }
  }
  EXPECT_GT(cold->num_computed, 0u) << "the cold request was never admitted";
  // It waited while its 40 uncached tokens, less one per step of waiting, exceeded the
  // newcomers' 2 (aging: an 8-token budget over 8 steps).
  EXPECT_GE(steps, 30u);
  EXPECT_LE(steps, 45u);
}

TEST_F(SchedulerTest, CacheAwareOrderAgesALongPromptUntilItRuns) {
  Build(1024, 8);
  Sequence* long_prompt = Add(1, Range(64, 1000));
  std::vector<Sequence*> short_ones;
  size_t steps = 0;
  for (; steps < 400 && long_prompt->generated == 0; ++steps) {
    // A new 8-token prompt every step fills the 8-token budget alone (each is done when its
    // prefill gives its first token).
    const auto id = static_cast<uint64_t>(100 + steps);
    short_ones.push_back(Add(id, Range(8, 5000 + 10 * static_cast<int32_t>(id))));
    Step();
    for (Sequence*& sequence : short_ones) {
      if (sequence != nullptr && sequence->generated >= 1) {
        scheduler_->Finish(sequence);
        sequence = nullptr;
      }
    }
  }
  EXPECT_EQ(long_prompt->generated, 1u) << "the long prompt never finished its prefill";
  // The short ones went first for a while (the long one alone would take 8 steps)...
  EXPECT_GT(steps, 40u);
  // ...until it had waited about 64 - 8 steps; then its 64 tokens took 8 more.
  EXPECT_LE(steps, 56u + 8u + 4u);
}

}  // namespace
}  // namespace reprise
