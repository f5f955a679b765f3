#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <map>

namespace reprise {
namespace {

TEST(SamplerTest, GreedyPicksTheMaximumAndLowestIndexOnTies) {
  Sampler sampler(SamplerConfig{}, {});
  std::vector<float> logits = {0.5f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(sampler.Sample(logits), 1);
}

TEST(SamplerTest, RepetitionPenaltyCoversPromptTokens) {
  SamplerConfig config;
  config.repetition_penalty = 4.0f;
  std::vector<int32_t> prompt = {1};
  Sampler sampler(config, prompt);
  std::vector<float> logits = {1.0f, 2.0f, 1.5f};
  EXPECT_EQ(sampler.Sample(logits), 2);  // 2.0 / 4 = 0.5 < 1.5
}

TEST(SamplerTest, FrequencyAndPresencePenaltiesCountOutputTokens) {
  SamplerConfig config;
  config.frequency_penalty = 1.0f;
  config.presence_penalty = 0.5f;
  Sampler sampler(config, {});
  sampler.Accept(0);
  sampler.Accept(0);
  std::vector<float> logits = {3.0f, 0.6f};
  EXPECT_EQ(sampler.Sample(logits), 1);  // 3 - 2 - 0.5 = 0.5 < 0.6
  EXPECT_FLOAT_EQ(logits[0], 0.5f);
}

TEST(SamplerTest, SameSeedSameSequenceAndTopKRestricts) {
  SamplerConfig config;
  config.temperature = 1.0f;
  config.top_k = 2;
  config.seed = 42;
  std::vector<float> base = {1.0f, 0.9f, 0.8f, 5.0f};
  Sampler first(config, {});
  Sampler second(config, {});
  std::map<int32_t, int> counts;
  for (int i = 0; i < 200; ++i) {
    auto a = base;
    auto b = base;
    int32_t x = first.Sample(a);
    EXPECT_EQ(x, second.Sample(b));
    ++counts[x];
  }
  EXPECT_EQ(counts.count(2), 0u);  // third best is outside top-2
  EXPECT_GT(counts[3], 100);
}

TEST(SamplerTest, TopPAndMinPCutTheTail) {
  SamplerConfig config;
  config.temperature = 1.0f;
  config.top_p = 0.5f;
  config.seed = 7;
  Sampler sampler(config, {});
  for (int i = 0; i < 50; ++i) {
    std::vector<float> logits = {4.0f, 0.0f, 0.0f};
    EXPECT_EQ(sampler.Sample(logits), 0);
  }
  SamplerConfig min_p = config;
  min_p.top_p = 1.0f;
  min_p.min_p = 0.5f;
  Sampler min_p_sampler(min_p, {});
  for (int i = 0; i < 50; ++i) {
    std::vector<float> logits = {2.0f, 1.9f, -3.0f};
    EXPECT_NE(min_p_sampler.Sample(logits), 2);
  }
}

}  // namespace
}  // namespace reprise
