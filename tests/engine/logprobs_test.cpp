// Per-token log-probabilities: the log-softmax of the model's raw logits at each generated
// position (checked against the engine's own recorded logits), the greedy token on top, the same
// values streamed and whole, and nothing computed when not asked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <future>

#include "core/error.h"
#include "engine_test_support.h"

namespace reprise {
namespace {

using testing::Greedy;
using testing::TestConfig;
using testing::TinyModelPath;

// log_softmax(row)[token], computed independently in long double.
double ReferenceLogprob(const std::vector<float>& row, int32_t token) {
  long double max = *std::max_element(row.begin(), row.end());
  long double sum = 0;
  for (float value : row) sum += std::exp(static_cast<long double>(value) - max);
  return static_cast<double>(static_cast<long double>(row[static_cast<size_t>(token)]) - max -
                             std::log(sum));
}

class LogprobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REPRISE_REQUIRE_FIXTURES();
    engine_ = std::make_unique<Engine>(TestConfig(TinyModelPath(), true));
  }
  std::unique_ptr<Engine> engine_;
};

TEST_F(LogprobsTest, MatchTheLogSoftmaxOfTheRecordedLogits) {
  GenerationRequest request = Greedy("Once upon a time there was", 12);
  request.sampling.logprobs = 5;
  std::vector<GenerationRequest> requests{request};
  GenerationOutput output = engine_->Generate(std::move(requests))[0];
  ASSERT_EQ(output.logprobs.size(), output.token_ids.size());
  ASSERT_EQ(output.logits.size(), output.token_ids.size());
  for (size_t i = 0; i < output.token_ids.size(); ++i) {
    const SampledLogprobs& entry = output.logprobs[i];
    const std::vector<float>& row = output.logits[i];
    EXPECT_EQ(entry.sampled.token, output.token_ids[i]);
    EXPECT_NEAR(entry.sampled.logprob, ReferenceLogprob(row, entry.sampled.token), 1e-4)
        << "position " << i;
    ASSERT_EQ(entry.top.size(), 5u);
    // Greedy: the sampled token is the most likely one.
    EXPECT_EQ(entry.top[0].token, entry.sampled.token) << "position " << i;
    EXPECT_FLOAT_EQ(entry.top[0].logprob, entry.sampled.logprob);
    for (size_t k = 0; k < entry.top.size(); ++k) {
      EXPECT_NEAR(entry.top[k].logprob, ReferenceLogprob(row, entry.top[k].token), 1e-4);
      EXPECT_LE(entry.top[k].logprob, 0.0f);
      if (k > 0) {
        EXPECT_GE(entry.top[k - 1].logprob, entry.top[k].logprob);
      }
    }
    // Nothing outside the list is more likely than its last entry.
    size_t more_likely = 0;
    for (size_t t = 0; t < row.size(); ++t) {
      if (row[t] > row[static_cast<size_t>(entry.top.back().token)]) ++more_likely;
    }
    EXPECT_LE(more_likely, entry.top.size() - 1) << "position " << i;
  }
  // The bytes of the sampled tokens spell the generated text.
  std::string spelled;
  for (const SampledLogprobs& entry : output.logprobs) spelled += entry.sampled.bytes;
  EXPECT_EQ(spelled, output.text);
}

TEST_F(LogprobsTest, AreTheRawDistributionBeforePenaltiesAndTemperature) {
  GenerationRequest plain = Greedy("The cat sat on the mat and", 6);
  plain.sampling.logprobs = 0;
  GenerationRequest penalised = plain;
  penalised.sampling.temperature = 0.7f;
  penalised.sampling.repetition_penalty = 1.5f;
  penalised.sampling.seed = 7;
  std::vector<GenerationRequest> requests{penalised};
  GenerationOutput output = engine_->Generate(std::move(requests))[0];
  ASSERT_EQ(output.logprobs.size(), output.token_ids.size());
  for (size_t i = 0; i < output.token_ids.size(); ++i) {
    EXPECT_TRUE(output.logprobs[i].top.empty());
    EXPECT_NEAR(output.logprobs[i].sampled.logprob,
                ReferenceLogprob(output.logits[i], output.token_ids[i]), 1e-4);
  }
}

TEST_F(LogprobsTest, StreamedEqualWhole) {
  GenerationRequest request = Greedy("A little dog ran", 10);
  request.sampling.logprobs = 3;
  request.sampling.stop = {"\n\n\n\n"};  // holds text back without ever matching
  std::vector<SampledLogprobs> streamed;
  std::promise<GenerationOutput> done;
  StreamCallbacks callbacks;
  callbacks.on_token = [&](const TokenEvent& event) {
    streamed.insert(streamed.end(), event.logprobs.begin(), event.logprobs.end());
  };
  callbacks.on_finish = [&](const GenerationOutput& output) { done.set_value(output); };
  engine_->Submit(request, callbacks);
  GenerationOutput output = done.get_future().get();
  ASSERT_EQ(streamed.size(), output.logprobs.size());
  for (size_t i = 0; i < streamed.size(); ++i) {
    EXPECT_EQ(streamed[i].sampled.token, output.logprobs[i].sampled.token);
    EXPECT_EQ(streamed[i].sampled.logprob, output.logprobs[i].sampled.logprob);
    EXPECT_EQ(streamed[i].top.size(), 3u);
  }
}

TEST_F(LogprobsTest, NoneUnlessAskedAndOutOfRangeRefused) {
  std::vector<GenerationRequest> requests{Greedy("Hello", 4)};
  GenerationOutput output = engine_->Generate(std::move(requests))[0];
  EXPECT_TRUE(output.logprobs.empty());
  GenerationRequest bad = Greedy("Hello", 4);
  bad.sampling.logprobs = kMaxTopLogprobs + 1;
  EXPECT_THROW(engine_->Submit(bad, {}), Error);
}

}  // namespace
}  // namespace reprise
