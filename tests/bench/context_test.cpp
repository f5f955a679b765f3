// Workloads size their prompts to the model's context: shrunk to fit, or refused with a message
// that names the workload and the context when even the smallest prompt would not fit.
#include "bench/context.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_support.h"

namespace reprise::bench {
namespace {

TEST(BenchContextTest, PromptsAreSizedToTheModelsContext) {
  REPRISE_REQUIRE_FIXTURES();
  BenchProgress progress(stderr, BenchProgress::Mode::kOff);
  BenchOptions options;
  options.workload = "doc";
  // TinyStories-656K: a 512-token context.
  BenchContext context(options, testing::Fixture("models/TinyStories-656K-f32.gguf"), progress);
  EXPECT_EQ(context.ContextLength(), 512);
  EXPECT_EQ(context.FitToContext("doc", 6000, 64, 128), 512u - 64u);
  EXPECT_EQ(context.FitToContext("doc", 300, 64, 128), 300u);  // fits as asked
  try {
    context.FitToContext("chat", 200, 500, 32);
    FAIL() << "a workload that cannot fit was accepted";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("bench chat"), std::string::npos) << message;
    EXPECT_NE(message.find("context of 512 tokens"), std::string::npos) << message;
  }
}

TEST(BenchContextTest, WithoutAModelNothingIsShrunk) {
  BenchProgress progress(stderr, BenchProgress::Mode::kOff);
  BenchOptions options;
  options.url = "http://127.0.0.1:1";
  BenchContext context(options, "", progress);
  EXPECT_EQ(context.ContextLength(), 0);
  EXPECT_EQ(context.FitToContext("doc", 6000, 64, 128), 6000u);
}

}  // namespace
}  // namespace reprise::bench
