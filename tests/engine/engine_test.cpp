// Engine behaviour beyond exactness: memory pressure, cancellation, task prompts, validation.
#include <gtest/gtest.h>

#include <future>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine_test_support.h"

namespace reprise {
namespace {

using testing::ExpectBitIdentical;
using testing::Greedy;
using testing::GreedyTokens;
using testing::TestConfig;
using testing::TinyModelPath;

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REPRISE_REQUIRE_FIXTURES();
    model_ = TinyModelPath();
  }
  std::string model_;
};

TEST_F(EngineTest, TooSmallCacheStillFinishesEveryRequestExactlyWithoutLeaks) {
  std::string table = testing::ReadTestData("long_table_prompt.txt");
  std::vector<std::string> prompts;
  // Distinct prompts of about 15 blocks each: 8 of them need three times the 40 blocks there are.
  for (size_t i = 0; i < 8; ++i)
    prompts.push_back("Request " + std::to_string(i) + table.substr(i * 283, 700));

  Engine roomy(TestConfig(model_, false));
  std::vector<GenerationRequest> requests;
  for (const auto& prompt : prompts) requests.push_back(Greedy(prompt, 12));
  auto references = roomy.Generate(std::move(requests));

  EngineConfig config = TestConfig(model_, true, 64);
  // 2 layers x 2 KV heads x 16 dims x 2 (K, V) x 16 positions x 2 bytes = 4 KiB a block: 40 blocks
  // hold a little more than two of these prompts at once.
  config.kv_cache_memory_bytes = 40 * 4096;
  Engine tight(config);
  for (const auto& prompt : prompts) requests.push_back(Greedy(prompt, 12));
  auto outputs = tight.Generate(std::move(requests));
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(outputs[i].finish_reason, FinishReason::kLength) << outputs[i].error;
    ExpectBitIdentical(references[i], outputs[i], "prompt " + std::to_string(i));
  }
  EngineStats stats = testing::WaitForIdle(tight);
  EXPECT_EQ(stats.blocks_in_use, 0);
  EXPECT_EQ(stats.blocks_in_use + stats.blocks_cached + stats.blocks_free, stats.blocks_total);
  EXPECT_GT(stats.evictions, 0u);
  EXPECT_GT(stats.preemptions, 0u);
  // The step thread's time is accounted: scheduling (matching, eviction, commits) happened, and
  // it is a small part beside the forward passes.
  EXPECT_GT(stats.scheduling_seconds_total, 0.0);
  EXPECT_GT(stats.forward_seconds_total, stats.scheduling_seconds_total);
}

TEST_F(EngineTest, CancelFreesBlocksAtOnce) {
  Engine engine(TestConfig(model_, true));
  std::promise<GenerationOutput> done;
  std::atomic<int> tokens{0};
  StreamCallbacks callbacks;
  callbacks.on_token = [&](const TokenEvent&) { tokens.fetch_add(1); };
  callbacks.on_finish = [&](const GenerationOutput& output) { done.set_value(output); };
  uint64_t id = engine.Submit(Greedy("a long generation that will be cancelled", 1500), callbacks);
  while (tokens.load() < 3) std::this_thread::yield();
  engine.Cancel(id);
  GenerationOutput output = done.get_future().get();
  EXPECT_EQ(output.finish_reason, FinishReason::kCancelled);
  EXPECT_LT(output.token_ids.size(), 1500u);
  EXPECT_EQ(testing::WaitForIdle(engine).blocks_in_use, 0);
}

TEST_F(EngineTest, RejectsRequestsThatCanNeverRun) {
  EngineConfig config = TestConfig(model_, true);
  config.max_context = 64;
  Engine engine(config);
  std::string long_prompt(2000, 'x');
  EXPECT_THROW(engine.Submit(Greedy(long_prompt), {}), Error);
  GenerationRequest unknown_task = Greedy("hello");
  unknown_task.cache.task_id = "nope";
  EXPECT_THROW(engine.Submit(unknown_task, {}), Error);
  EXPECT_THROW(engine.Submit(GreedyTokens({-5}), {}), Error);
  GenerationRequest zero = Greedy("hello", 0);
  EXPECT_THROW(engine.Submit(zero, {}), Error);
}

TEST_F(EngineTest, UnknownPolicyNamesAreErrors) {
  EngineConfig bad_schedule = TestConfig(model_, true);
  bad_schedule.schedule_policy = "priority";
  EngineConfig bad_eviction = TestConfig(model_, true);
  bad_eviction.eviction_policy = "random";
  for (const auto& [config, message] : {std::pair{bad_schedule, "schedule policy 'priority'"},
                                        std::pair{bad_eviction, "eviction policy 'random'"}}) {
    try {
      Engine engine(config);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
  }
}

// Documents visited round robin through a cache that holds only some of them: the eviction
// policy decides what is reused, never what is computed. Scan resistance keeps part of the cycle
// hitting where LRU evicts each document just before its next visit.
TEST_F(EngineTest, EvictionPoliciesGiveTheSameAnswers) {
  std::string table = testing::ReadTestData("long_table_prompt.txt");
  std::vector<std::string> documents;
  for (size_t d = 0; d < 5; ++d) {
    documents.push_back("Document " + std::to_string(d) + ". " + table.substr(120 * d, 700));
  }
  auto run = [&](bool reuse, const std::string& policy, uint64_t* hits) {
    EngineConfig config = TestConfig(model_, reuse, 64);
    config.eviction_policy = policy;
    // 4 KiB a block (see TooSmallCacheStillFinishesEveryRequestExactlyWithoutLeaks): about three
    // documents' worth.
    config.kv_cache_memory_bytes = 40 * 4096;
    Engine engine(config);
    std::vector<GenerationOutput> outputs;
    for (int round = 0; round < 3; ++round) {
      for (size_t d = 0; d < documents.size(); ++d) {
        auto output =
            engine.Generate({Greedy(documents[d] + " Round " + std::to_string(round) + "?", 4)});
        outputs.push_back(std::move(output[0]));
      }
    }
    EngineStats stats = testing::WaitForIdle(engine);
    EXPECT_EQ(stats.blocks_in_use, 0) << policy;
    if (hits != nullptr) *hits = stats.prefix_cache_hits;
    return outputs;
  };
  auto reference = run(false, "lru", nullptr);
  uint64_t lru_hits = 0, scan_hits = 0;
  auto lru = run(true, "lru", &lru_hits);
  auto scan = run(true, "scan-resistant", &scan_hits);
  for (size_t i = 0; i < reference.size(); ++i) {
    ExpectBitIdentical(reference[i], lru[i], "lru visit " + std::to_string(i));
    ExpectBitIdentical(reference[i], scan[i], "scan-resistant visit " + std::to_string(i));
  }
  // LRU finds only the 3 tokens every document starts with; the protected share keeps whole
  // blocks of some documents: at least one more block per visit after the first round.
  EXPECT_GE(scan_hits, lru_hits + 10 * 16);
}

// Where the weights are held (read into huge-page memory, or the file's map) never changes what
// the engine computes.
TEST_F(EngineTest, WeightsReadIntoMemoryGiveTheAnswersOfMappedWeights) {
  auto run = [&](bool mmap_weights) {
    EngineConfig config = TestConfig(model_, true);
    config.mmap_weights = mmap_weights;
    Engine engine(config);
    return engine.Generate({Greedy("The weights are read once", 6), Greedy("and streamed", 6)});
  };
  auto mapped = run(true);
  auto copied = run(false);
  ASSERT_EQ(mapped.size(), copied.size());
  for (size_t i = 0; i < mapped.size(); ++i) {
    ExpectBitIdentical(mapped[i], copied[i], "request " + std::to_string(i));
  }
}

// The prefill order changes which requests share a step, never what they compute: cached and
// cold requests submitted together get the same bits under either policy as with reuse off.
TEST_F(EngineTest, SchedulePoliciesGiveTheSameAnswers) {
  std::string table = testing::ReadTestData("long_table_prompt.txt");
  const std::string shared = table.substr(0, 900);
  std::vector<std::string> prompts;
  for (size_t i = 0; i < 6; ++i) {
    // Half of them share a long prefix, half are cold and of different lengths.
    prompts.push_back(i % 2 == 0
                          ? shared + " Question " + std::to_string(i) + "?"
                          : "Cold " + std::to_string(i) + table.substr(100 * i, 200 + 150 * i));
  }
  auto run = [&](bool reuse, const std::string& policy) {
    EngineConfig config = TestConfig(model_, reuse, 64);
    config.schedule_policy = policy;
    Engine engine(config);
    engine.Generate({Greedy(shared + " Warm-up?", 2)});  // the shared prefix is cached
    std::vector<GenerationRequest> requests;
    for (const auto& prompt : prompts) requests.push_back(Greedy(prompt, 10));
    return engine.Generate(std::move(requests));
  };
  auto reference = run(false, "fcfs");
  for (const char* policy : {"cache-aware", "fcfs"}) {
    auto outputs = run(true, policy);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ExpectBitIdentical(reference[i], outputs[i],
                         std::string(policy) + " prompt " + std::to_string(i));
      if (i % 2 == 0) {
        EXPECT_GT(outputs[i].cached_tokens, 0u) << policy << " prompt " << i;
      }
    }
  }
}

TEST_F(EngineTest, StopStringsCutTheTextAndEndWithStop) {
  Engine engine(TestConfig(model_, true));
  std::vector<GenerationRequest> requests;
  requests.push_back(Greedy("Count: one two three", 24));
  GenerationOutput free_run = engine.Generate(std::move(requests))[0];
  ASSERT_GE(free_run.text.size(), 4u);
  std::string stop = free_run.text.substr(free_run.text.size() / 2, 2);
  GenerationRequest stopped = Greedy("Count: one two three", 24);
  stopped.sampling.stop = {stop};
  requests.push_back(stopped);
  GenerationOutput output = engine.Generate(std::move(requests))[0];
  EXPECT_EQ(output.finish_reason, FinishReason::kStop);
  EXPECT_EQ(output.text, free_run.text.substr(0, free_run.text.find(stop)));
}

TEST_F(EngineTest, StreamedTextEqualsFinalText) {
  Engine engine(TestConfig(model_, true));
  std::string streamed;
  std::promise<GenerationOutput> done;
  StreamCallbacks callbacks;
  callbacks.on_token = [&](const TokenEvent& event) { streamed += event.text; };
  callbacks.on_finish = [&](const GenerationOutput& output) { done.set_value(output); };
  engine.Submit(Greedy("Stream this please", 20), callbacks);
  GenerationOutput output = done.get_future().get();
  EXPECT_EQ(streamed, output.text);
}

TEST_F(EngineTest, TaskPromptsArePinnedReusedAndExact) {
  std::string system = "You are a helpful assistant that answers questions about tables. " +
                       testing::ReadTestData("long_table_prompt.txt").substr(0, 600);
  nlohmann::json tasks = nlohmann::json::array(
      {{{"task_id", 1}, {"prompt", system}}, {{"task_id", "2"}, {"prompt", "Short task."}}});
  EngineConfig config = TestConfig(model_, true, 64);
  config.task_prompts_json = tasks.dump();
  config.kv_cache_memory_bytes = 80 * 4096;  // room for the task prompts and a little more
  Engine engine(config);
  auto infos = engine.TaskPrompts();
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0].task_id, "1");
  size_t task_tokens = engine.Tokenize(system, true).size();
  EXPECT_EQ(infos[0].tokens, task_tokens);
  EXPECT_GT(engine.Stats().blocks_pinned, 0);

  auto with_task = [&](const std::string& prompt) {
    GenerationRequest request = Greedy(prompt, 6);
    request.cache.task_id = "1";
    std::vector<GenerationRequest> requests;
    requests.push_back(request);
    return engine.Generate(std::move(requests))[0];
  };
  GenerationOutput first = with_task("hello, what's your name");
  EXPECT_GE(first.cached_tokens, task_tokens);

  // The same as sending the task prompt's tokens inline with reuse off.
  std::vector<int32_t> inline_tokens = engine.Tokenize(system, true);
  auto own = engine.Tokenize("hello, what's your name", false);
  inline_tokens.insert(inline_tokens.end(), own.begin(), own.end());
  Engine plain(TestConfig(model_, false));
  std::vector<GenerationRequest> requests;
  requests.push_back(GreedyTokens(inline_tokens, 6));
  ExpectBitIdentical(plain.Generate(std::move(requests))[0], first, "task prompt vs inline");

  // A flood of unrelated requests evicts everything else but not the task prompt.
  std::string table = testing::ReadTestData("long_table_prompt.txt");
  for (size_t i = 0; i < 12; ++i) {
    requests.push_back(Greedy("Flood " + std::to_string(i) + table.substr(700 + i * 150, 1000), 2));
  }
  engine.Generate(std::move(requests));
  EXPECT_GT(engine.Stats().evictions, 0u);
  GenerationOutput after = with_task("a different question");
  EXPECT_GE(after.cached_tokens, task_tokens);
}

TEST_F(EngineTest, BadTaskPromptsStopStartUpNamingTheEntry) {
  auto message = [&](const std::string& json) {
    EngineConfig config = TestConfig(model_, true);
    config.task_prompts_json = json;
    try {
      Engine engine(config);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_NE(message("not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(message(R"([{"prompt": "x"}])").find("entry 0 has no \"task_id\""), std::string::npos);
  EXPECT_NE(message(R"([{"task_id": 1, "prompt": "a"}, {"task_id": 1, "prompt": "b"}])")
                .find("duplicate task_id 1"),
            std::string::npos);
  EXPECT_NE(message(R"([{"task_id": 3, "prompt": ""}])").find("empty prompt"), std::string::npos);
  EngineConfig config = TestConfig(model_, true);
  config.task_prompts_json =
      nlohmann::json::array({{{"task_id", 1}, {"prompt", std::string(4000, 'y')}}}).dump();
  config.kv_cache_memory_bytes = 8 * 4096;
  try {
    Engine engine(config);
    FAIL() << "start-up should fail";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("raise --kv-cache-memory"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace reprise

namespace reprise {
namespace {

TEST(EngineShutdownTest, DestroyingTheEngineFinishesEveryRequestAsCancelled) {
  REPRISE_REQUIRE_FIXTURES();
  std::atomic<int> finished{0};
  std::atomic<int> cancelled{0};
  {
    EngineConfig config = testing::TestConfig(testing::TinyModelPath(), true);
    config.max_running_requests = 2;  // the rest wait in the queue
    Engine engine(config);
    StreamCallbacks callbacks;
    callbacks.on_finish = [&](const GenerationOutput& output) {
      finished.fetch_add(1);
      if (output.finish_reason == FinishReason::kCancelled) cancelled.fetch_add(1);
    };
    for (int i = 0; i < 6; ++i)
      engine.Submit(testing::Greedy("request " + std::to_string(i), 1000), callbacks);
  }
  EXPECT_EQ(finished.load(), 6);
  EXPECT_GE(cancelled.load(), 4);
}

}  // namespace
}  // namespace reprise
