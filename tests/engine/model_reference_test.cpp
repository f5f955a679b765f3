// Why the Q8_0 fixture has its own reference text: its greedy output leaves the f32 one exactly
// where the f32 model's choice was nearly a tie, by less than Q8_0 rounding moves the logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "engine_test_support.h"

namespace reprise {
namespace {

GenerationOutput RunStory(const std::string& model, const std::string& kv_type = "f16") {
  EngineConfig config = testing::TestConfig(testing::Fixture(model), true);
  config.kv_type = kv_type;
  Engine engine(config);
  GenerationRequest request = testing::Greedy("Once upon a time", 64);
  request.sampling.ignore_eos = false;
  std::vector<GenerationRequest> requests;
  requests.push_back(request);
  return engine.Generate(std::move(requests))[0];
}

TEST(ModelReferenceTest, Q8_0DepartsFromF32WhereTheF32MarginIsTiny) {
  REPRISE_REQUIRE_FIXTURES();
  GenerationOutput f32 = RunStory("models/TinyStories-656K-f32.gguf");
  GenerationOutput q8 = RunStory("models/TinyStories-656K-q8_0.gguf");
  size_t first_difference = 0;
  while (first_difference < f32.token_ids.size() &&
         f32.token_ids[first_difference] == q8.token_ids[first_difference]) {
    ++first_difference;
  }
  ASSERT_EQ(first_difference, 5u);
  int32_t f32_choice = f32.token_ids[first_difference];
  int32_t q8_choice = q8.token_ids[first_difference];
  const auto& f32_logits = f32.logits[first_difference];
  const auto& q8_logits = q8.logits[first_difference];
  float f32_margin = f32_logits[f32_choice] - f32_logits[q8_choice];
  float q8_margin = q8_logits[q8_choice] - q8_logits[f32_choice];
  EXPECT_GT(f32_margin, 0.0f);
  EXPECT_LT(f32_margin, 0.1f) << "a near tie in f32";
  EXPECT_GT(q8_margin, 0.0f);
  EXPECT_LT(q8_margin, 0.1f) << "a near tie in Q8_0 too";
  // Everywhere before, the f32 choice was clear.
  for (size_t p = 0; p < first_difference; ++p) {
    std::vector<float> sorted = f32.logits[p];
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    EXPECT_GT(sorted[0] - sorted[1], 0.5f) << "position " << p;
  }
}

// The q8 KV cache on a trained model: its 8-bit keys, values, queries and probabilities move the
// logits a little, and the greedy story leaves the f32 cache's only where the f32 choice was a
// near tie, by less than twice that movement.
TEST(ModelReferenceTest, Q8KvCacheTellsTheF32CacheStory) {
  REPRISE_REQUIRE_FIXTURES();
  GenerationOutput f32 = RunStory("models/TinyStories-656K-f32.gguf", "f32");
  ASSERT_FALSE(f32.token_ids.empty());
  // Tokens the same as f32's, and the largest logit move over them (and the first other one).
  auto compare = [&](const GenerationOutput& other, float* largest_move) {
    size_t same = 0;
    *largest_move = 0.0f;
    while (same < f32.token_ids.size() && same < other.token_ids.size()) {
      const auto& a = f32.logits[same];
      const auto& b = other.logits[same];
      for (size_t i = 0; i < a.size(); ++i) {
        *largest_move = std::max(*largest_move, std::fabs(a[i] - b[i]));
      }
      if (f32.token_ids[same] != other.token_ids[same]) break;
      ++same;
    }
    return same;
  };
  float f16_move = 0.0f, q8_move = 0.0f;
  const size_t f16_same = compare(RunStory("models/TinyStories-656K-f32.gguf", "f16"), &f16_move);
  GenerationOutput q8 = RunStory("models/TinyStories-656K-f32.gguf", "q8");
  const size_t same = compare(q8, &q8_move);
  std::cout << "of " << f32.token_ids.size() << " story tokens with f32 KV: f16 KV tells "
            << f16_same << " (logits moved by at most " << f16_move << "), q8 KV " << same
            << " (at most " << q8_move << ")\n";
  EXPECT_LT(q8_move, 0.5f);
  if (same < f32.token_ids.size()) {
    const auto& logits = f32.logits[same];
    const float margin = logits[f32.token_ids[same]] - logits[q8.token_ids[same]];
    EXPECT_LT(margin, 2 * q8_move) << "q8 left the story at " << same << " where f32 was sure";
  }
  EXPECT_GE(same, 16u);
}

}  // namespace
}  // namespace reprise
