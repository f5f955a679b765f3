// Why the Q8_0 fixture has its own reference text: its greedy output leaves the f32 one exactly
// where the f32 model's choice was nearly a tie, by less than Q8_0 rounding moves the logits.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine_test_support.h"

namespace reprise {
namespace {

GenerationOutput RunStory(const std::string& model) {
  EngineConfig config = testing::TestConfig(testing::Fixture(model), true);
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

}  // namespace
}  // namespace reprise
