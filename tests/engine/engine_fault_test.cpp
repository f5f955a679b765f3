// The engine's fault boundary: an exception inside a step fails only the requests it touched,
// with FinishReason::kError and the reason, releases their blocks, and the engine goes on serving
// with its cache intact (later answers equal those of an engine that never faulted).
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>

#include "core/error.h"
#include "engine_test_support.h"

namespace reprise {
namespace {

using testing::ExpectBitIdentical;
using testing::Greedy;
using testing::TestConfig;
using testing::TinyModelPath;

constexpr const char* kFaultMarker = "FAULT";

bool Marked(const GenerationRequest& request) {
  return request.prompt.find(kFaultMarker) != std::string::npos;
}

// A hook that throws at `site` for marked requests, from the `after`-th call there on, at most
// `times` times in all.
struct FaultPlan {
  EngineFaultSite site = EngineFaultSite::kSample;
  int after = 0;
  int times = 1 << 30;
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> thrown = std::make_shared<std::atomic<int>>(0);

  std::function<void(EngineFaultSite, const GenerationRequest&)> Hook() const {
    return [*this](EngineFaultSite at, const GenerationRequest& request) {
      if (at != site || !Marked(request)) return;
      if (calls->fetch_add(1) < after || thrown->load() >= times) return;
      thrown->fetch_add(1);
      throw std::runtime_error("injected fault");
    };
  }
};

class EngineFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REPRISE_REQUIRE_FIXTURES();
    model_ = TinyModelPath();
  }

  // The answers of an engine without faults (reuse off), the reference for what follows.
  GenerationOutput Reference(const std::string& prompt, int max_tokens) {
    Engine engine(TestConfig(model_, false));
    return engine.Generate({Greedy(prompt, max_tokens)})[0];
  }

  static void ExpectNoLeak(const Engine& engine) {
    EngineStats stats = testing::WaitForIdle(engine);
    EXPECT_EQ(stats.blocks_in_use, 0);
    EXPECT_EQ(stats.requests_running, 0u);
    EXPECT_EQ(stats.blocks_in_use + stats.blocks_cached + stats.blocks_free, stats.blocks_total);
  }

  std::string model_;
};

TEST_F(EngineFaultTest, ASamplingFaultFailsOnlyItsRequest) {
  const std::string healthy = "The quick brown fox jumps over the lazy dog, again and again";
  const std::string faulty = std::string(kFaultMarker) + ": a request whose sampling throws";
  GenerationOutput reference = Reference(healthy, 24);

  FaultPlan plan;
  plan.site = EngineFaultSite::kSample;
  plan.after = 3;  // three tokens come out before the fault
  EngineConfig config = TestConfig(model_, true);
  config.fault_hook = plan.Hook();
  Engine engine(config);

  // Both run in the same steps: the healthy one must not notice its neighbour's fault.
  std::vector<GenerationRequest> requests{Greedy(faulty, 24), Greedy(healthy, 24)};
  std::vector<GenerationOutput> outputs = engine.Generate(std::move(requests));
  EXPECT_EQ(outputs[0].finish_reason, FinishReason::kError);
  EXPECT_NE(outputs[0].error.find("injected fault"), std::string::npos) << outputs[0].error;
  EXPECT_EQ(outputs[0].token_ids.size(), 3u);
  EXPECT_EQ(outputs[1].finish_reason, FinishReason::kLength) << outputs[1].error;
  ExpectBitIdentical(reference, outputs[1], "the healthy neighbour of a fault");
  ExpectNoLeak(engine);

  // The engine goes on: the next request succeeds and reuses the cache exactly.
  GenerationOutput again = engine.Generate({Greedy(healthy, 24)})[0];
  EXPECT_EQ(again.finish_reason, FinishReason::kLength) << again.error;
  EXPECT_GT(again.cached_tokens, 0u);
  ExpectBitIdentical(reference, again, "after the fault");
  // The engine publishes its counters after the step that finished the request.
  for (int i = 0; i < 500 && engine.Stats().requests_finished < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(engine.Stats().requests_finished, 3u);
  ExpectNoLeak(engine);
}

TEST_F(EngineFaultTest, AForwardFaultFailsItsStepAndLeavesTheCacheExact) {
  const std::string prompt = std::string(kFaultMarker) + " then the same prompt, computed again: " +
                             testing::ReadTestData("long_table_prompt.txt").substr(0, 600);
  GenerationOutput reference = Reference(prompt, 12);

  // The fault hits a prefill chunk in the middle of the prompt (after blocks were committed).
  FaultPlan plan;
  plan.site = EngineFaultSite::kForward;
  plan.after = 2;
  plan.times = 1;
  EngineConfig config = TestConfig(model_, true, /*max_batch_tokens=*/32);
  config.fault_hook = plan.Hook();
  Engine engine(config);

  GenerationOutput failed = engine.Generate({Greedy(prompt, 12)})[0];
  EXPECT_EQ(failed.finish_reason, FinishReason::kError);
  EXPECT_NE(failed.error.find("forward pass"), std::string::npos) << failed.error;
  EXPECT_TRUE(failed.token_ids.empty());
  ExpectNoLeak(engine);

  GenerationOutput retried = engine.Generate({Greedy(prompt, 12)})[0];
  EXPECT_EQ(retried.finish_reason, FinishReason::kLength) << retried.error;
  EXPECT_GT(retried.cached_tokens, 0u);  // the chunks computed before the fault were kept
  ExpectBitIdentical(reference, retried, "the prompt computed again after a forward fault");
  ExpectNoLeak(engine);
}

TEST_F(EngineFaultTest, AThrowingCallbackFailsOnlyItsRequest) {
  Engine engine(TestConfig(model_, true));
  std::promise<GenerationOutput> failed;
  StreamCallbacks throwing;
  throwing.on_token = [](const TokenEvent&) { throw std::runtime_error("client callback broke"); };
  throwing.on_finish = [&](const GenerationOutput& output) { failed.set_value(output); };
  engine.Submit(Greedy("a request whose stream consumer throws", 8), throwing);
  GenerationOutput output = failed.get_future().get();
  EXPECT_EQ(output.finish_reason, FinishReason::kError);
  EXPECT_NE(output.error.find("client callback broke"), std::string::npos) << output.error;

  GenerationOutput next = engine.Generate({Greedy("the next request", 8)})[0];
  EXPECT_EQ(next.finish_reason, FinishReason::kLength) << next.error;
  ExpectNoLeak(engine);

  // A consumer that throws when told its request finished fails nobody else.
  std::promise<void> finished;
  StreamCallbacks throws_at_end;
  throws_at_end.on_finish = [&](const GenerationOutput&) {
    finished.set_value();
    throw std::runtime_error("client finish callback broke");
  };
  engine.Submit(Greedy("a request whose finish consumer throws", 4), throws_at_end);
  GenerationOutput beside = engine.Generate({Greedy("a request beside it", 12)})[0];
  finished.get_future().get();
  EXPECT_EQ(beside.finish_reason, FinishReason::kLength) << beside.error;
  EXPECT_EQ(engine.Generate({Greedy("and one after it", 4)})[0].finish_reason,
            FinishReason::kLength);
  ExpectNoLeak(engine);
}

TEST_F(EngineFaultTest, AFaultWhileComputingTaskPromptsStopsStartUp) {
  EngineConfig config = TestConfig(model_, true);
  config.task_prompts_json = R"([{"task_id": "t1", "prompt": "a task prompt"}])";
  config.fault_hook = [](EngineFaultSite, const GenerationRequest&) {
    throw std::runtime_error("injected fault");
  };
  try {
    Engine engine(config);
    FAIL() << "start-up succeeded although its task prompt failed";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("task prompt t1"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("injected fault"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace reprise
