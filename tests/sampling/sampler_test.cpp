#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

namespace reprise {
namespace {

TEST(SamplerTest, GreedyPicksTheMaximumAndLowestIndexOnTies) {
  Sampler sampler(SamplerConfig{}, {});
  std::vector<float> logits = {0.5f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(sampler.Sample(logits), 1);
}

// ArgMax takes the maximum by vector lanes, then the first index holding it: compared with the
// plain first-largest loop over lengths around the lane multiples, with ties planted in every
// position class, and NaNs skipped.
TEST(SamplerTest, ArgMaxMatchesFirstLargestLoop) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-3, 3);  // few distinct values: many ties
  for (size_t n : {1, 2, 15, 16, 17, 31, 32, 33, 100, 32000}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> logits(n);
      for (float& value : logits) value = static_cast<float>(small(rng)) * 0.5f;
      int32_t expected = 0;
      for (size_t i = 1; i < n; ++i) {
        if (logits[i] > logits[static_cast<size_t>(expected)]) expected = static_cast<int32_t>(i);
      }
      ASSERT_EQ(ArgMax(logits), expected) << "n " << n << " trial " << trial;
    }
  }
  std::vector<float> with_nan(40, 1.0f);
  with_nan[3] = std::nanf("");
  with_nan[20] = 2.0f;
  with_nan[37] = std::nanf("");
  EXPECT_EQ(ArgMax(with_nan), 20);
  std::vector<float> signed_zeros = {-0.0f, 0.0f, -1.0f};
  EXPECT_EQ(ArgMax(signed_zeros), 0);
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

// A large vocabulary without top_k: tokens are drawn with their softmax probabilities (checked
// on the few likely ones), and with top_p only from the smallest set of largest ones whose
// probabilities reach top_p, computed here by sorting everything.
TEST(SamplerTest, LargeVocabularyFollowsSoftmaxAndTopPSet) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> base(20000);
  for (float& logit : base) logit = normal(rng);
  base[10] = 8.0f;
  base[20] = 7.0f;
  base[30] = 6.0f;
  double total = 0;
  for (float logit : base) total += std::exp(static_cast<double>(logit) - 8.0);
  SamplerConfig config;
  config.temperature = 1.0f;
  config.seed = 11;
  Sampler sampler(config, {});
  std::map<int32_t, int> counts;
  const int draws = 4000;
  for (int i = 0; i < draws; ++i) {
    auto logits = base;
    ++counts[sampler.Sample(logits)];
  }
  for (auto [token, logit] : {std::pair{10, 8.0}, std::pair{20, 7.0}, std::pair{30, 6.0}}) {
    const double p = std::exp(logit - 8.0) / total;
    const double sigma = std::sqrt(draws * p * (1 - p));
    EXPECT_NEAR(counts[token], draws * p, 5 * sigma) << "token " << token;
  }

  std::vector<std::pair<double, int32_t>> sorted;
  for (size_t i = 0; i < base.size(); ++i) {
    sorted.emplace_back(std::exp(static_cast<double>(base[i]) - 8.0) / total,
                        static_cast<int32_t>(i));
  }
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (float top_p : {0.5f, 0.9f, 0.97f}) {
    std::set<int32_t> allowed;
    double cumulative = 0;
    for (const auto& [p, token] : sorted) {
      allowed.insert(token);
      cumulative += p;
      if (cumulative >= top_p) break;
    }
    SamplerConfig nucleus = config;
    nucleus.top_p = top_p;
    Sampler top_p_sampler(nucleus, {});
    std::set<int32_t> seen;
    for (int i = 0; i < 300; ++i) {
      auto logits = base;
      seen.insert(top_p_sampler.Sample(logits));
    }
    for (int32_t token : seen)
      EXPECT_TRUE(allowed.count(token)) << "top_p " << top_p << " token " << token;
    if (allowed.size() > 100) {
      EXPECT_GT(seen.size(), 20u) << "top_p " << top_p;  // the tail set is really drawn from
    }
  }
}

}  // namespace
}  // namespace reprise
