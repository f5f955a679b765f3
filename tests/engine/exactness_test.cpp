// Reuse must not change answers: every generated position's logits are bit-identical with prefix
// reuse on and off, whatever the chunking, batching and thread count.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <future>

#include "engine_test_support.h"
#include "kernels/paged_attention.h"

namespace reprise {
namespace {

using testing::ExpectBitIdentical;
using testing::Greedy;
using testing::GreedyTokens;
using testing::TestConfig;
using testing::TinyModelPath;

struct ModelVariant {
  kernels::WeightType type;
  const char* architecture;
  const char* kv_type = "f16";
};

EngineConfig VariantConfig(const std::string& model, const ModelVariant& variant, bool reuse,
                           int max_batch_tokens = 512, int threads = 1) {
  EngineConfig config = TestConfig(model, reuse, max_batch_tokens, threads);
  config.kv_type = variant.kv_type;
  return config;
}

GenerationOutput RunAlone(const std::string& model, const ModelVariant& variant,
                          GenerationRequest request) {
  Engine engine(VariantConfig(model, variant, /*reuse=*/false));
  std::vector<GenerationRequest> requests;
  requests.push_back(std::move(request));
  return engine.Generate(std::move(requests))[0];
}

class ExactnessTest : public ::testing::TestWithParam<ModelVariant> {
 protected:
  void SetUp() override {
    REPRISE_REQUIRE_FIXTURES();
    if (auto reason = testing::TargetRunRepeatsDefault()) GTEST_SKIP() << *reason;
    model_ = TinyModelPath(GetParam().type, GetParam().architecture);
  }
  std::string model_;
};

TEST_P(ExactnessTest, LongTableThenTwoQuestions) {
  std::string table = testing::ReadTestData("long_table_prompt.txt");
  std::vector<std::string> questions = {
      "Question: what is the age of John Doe? Your answer: The age of John Doe is ",
      "Question: what is the age of Zack Blue? Your answer: The age of Zack Blue is "};
  Engine engine(VariantConfig(model_, GetParam(), /*reuse=*/true));
  size_t table_tokens = engine.Tokenize(table, true).size();
  for (size_t i = 0; i < questions.size(); ++i) {
    std::vector<GenerationRequest> requests;
    requests.push_back(Greedy(table + questions[i]));
    GenerationOutput reused = engine.Generate(std::move(requests))[0];
    GenerationOutput reference = RunAlone(model_, GetParam(), Greedy(table + questions[i]));
    ExpectBitIdentical(reference, reused, "question " + std::to_string(i));
    EXPECT_EQ(reference.cached_tokens, 0u);
    if (i == 0) {
      EXPECT_EQ(reused.cached_tokens, 0u);
    } else {
      // Everything up to where the two prompts' tokens part is reused, to the token.
      auto first = engine.Tokenize(table + questions[0], true);
      auto second = engine.Tokenize(table + questions[1], true);
      size_t shared = 0;
      while (shared < first.size() && shared < second.size() && first[shared] == second[shared])
        ++shared;
      EXPECT_GE(shared, table_tokens - 1);
      EXPECT_EQ(reused.cached_tokens, shared);
    }
  }
}

// Weights read into private memory are laid out for this CPU's kernels (row groups for 4-bit
// types on AVX-512); read from the file's map they stay as stored. The answers are the same bits,
// in prefill and in decode, alone and batched.
TEST_P(ExactnessTest, LaidOutCopyGivesTheMappedFilesBits) {
  const std::string table = testing::ReadTestData("long_table_prompt.txt").substr(0, 1500);
  auto run = [&](bool mapped) {
    EngineConfig config = VariantConfig(model_, GetParam(), /*reuse=*/false, 512, 2);
    config.mmap_weights = mapped;
    Engine engine(config);
    std::vector<GenerationRequest> requests;
    requests.push_back(Greedy(table + " Who is 7?", 12));
    requests.push_back(Greedy("Once upon a time", 12));
    return engine.Generate(std::move(requests));
  };
  const std::vector<GenerationOutput> mapped = run(true), copied = run(false);
  for (size_t i = 0; i < mapped.size(); ++i) {
    ExpectBitIdentical(mapped[i], copied[i], "request " + std::to_string(i));
  }
}

TEST_P(ExactnessTest, FiveTurnChatReusesEveryComputedToken) {
  Engine engine(VariantConfig(model_, GetParam(), /*reuse=*/true));
  std::vector<int32_t> conversation = engine.Tokenize("System: you answer briefly.\n", true);
  for (int turn = 0; turn < 5; ++turn) {
    auto user = engine.Tokenize(
        "User: tell me about turn " + std::to_string(turn) + ".\nAssistant:", false);
    size_t previous_computed = conversation.size();  // all but the last answer token have KV
    conversation.insert(conversation.end(), user.begin(), user.end());
    std::vector<GenerationRequest> requests;
    requests.push_back(GreedyTokens(conversation, 6));
    GenerationOutput reused = engine.Generate(std::move(requests))[0];
    GenerationOutput reference = RunAlone(model_, GetParam(), GreedyTokens(conversation, 6));
    ExpectBitIdentical(reference, reused, "turn " + std::to_string(turn));
    if (turn > 0) {
      EXPECT_EQ(reused.cached_tokens, previous_computed - 1) << "turn " << turn;
    }
    conversation.insert(conversation.end(), reused.token_ids.begin(), reused.token_ids.end());
  }
}

struct BatchCase {
  int max_batch_tokens;
  int threads;
};

TEST_P(ExactnessTest, ConcurrentMixedLengthsAnyChunkingAndThreads) {
  std::string table = testing::ReadTestData("long_table_prompt.txt");
  std::vector<std::string> prompts;
  for (int i = 0; i < 8; ++i) {
    // Mixed lengths; some share long prefixes, some share nothing.
    size_t cut = 200 + static_cast<size_t>(i) * 370 % 2900;
    prompts.push_back(i % 3 == 2 ? "Unrelated prompt number " + std::to_string(i)
                                 : table.substr(0, cut) + " Q" + std::to_string(i));
  }
  std::vector<GenerationOutput> references;
  for (const auto& prompt : prompts)
    references.push_back(RunAlone(model_, GetParam(), Greedy(prompt, 5)));

  for (BatchCase batch : {BatchCase{1, 1}, BatchCase{7, 2}, BatchCase{64, 1}, BatchCase{64, 2}}) {
    for (bool reuse : {true, false}) {
      if (batch.max_batch_tokens == 1 && !reuse) continue;  // slow and adds nothing
      Engine engine(
          VariantConfig(model_, GetParam(), reuse, batch.max_batch_tokens, batch.threads));
      std::vector<GenerationRequest> requests;
      for (const auto& prompt : prompts) requests.push_back(Greedy(prompt, 5));
      auto outputs = engine.Generate(std::move(requests));
      for (size_t i = 0; i < prompts.size(); ++i) {
        ExpectBitIdentical(references[i], outputs[i],
                           fmt::format("prompt {} chunk {} threads {} reuse {}", i,
                                       batch.max_batch_tokens, batch.threads, reuse));
      }
      EXPECT_EQ(testing::WaitForIdle(engine).blocks_in_use, 0);
    }
  }
}

// Past kernels::kAttentionSplitPositions a query attends in splits that the model spreads over
// threads: the prefix computed by one request, a continuation prefilled across the split
// boundary by the next, and decoding past it, all bit-identical to a cold run, at 1 and 2
// threads and any chunking. A third turn reuses blocks its answer's decoding wrote, which a cold
// run computes by prefill, and still has the cold run's bits.
TEST_P(ExactnessTest, LongContextAcrossAttentionSplits) {
  std::string table = testing::ReadTestData("long_table_prompt.txt");
  const std::string document = table + "\n" + table.substr(0, table.size() / 2);  // ~1,700 tokens
  for (BatchCase batch : {BatchCase{64, 2}, BatchCase{512, 1}, BatchCase{37, 2}}) {
    Engine engine(
        VariantConfig(model_, GetParam(), /*reuse=*/true, batch.max_batch_tokens, batch.threads));
    const size_t tokens = engine.Tokenize(document, true).size();
    ASSERT_GT(tokens, static_cast<size_t>(kernels::kAttentionSplitPositions) + 64);
    std::vector<GenerationRequest> first;
    first.push_back(Greedy(document.substr(0, document.size() / 3), 3));
    engine.Generate(std::move(first));
    std::vector<GenerationRequest> second;
    second.push_back(Greedy(document + " Q: who?", 24));
    GenerationOutput reused = engine.Generate(std::move(second))[0];
    EXPECT_GT(reused.cached_tokens, 0u);
    const std::string what =
        fmt::format("chunk {} threads {}", batch.max_batch_tokens, batch.threads);
    ExpectBitIdentical(RunAlone(model_, GetParam(), Greedy(document + " Q: who?", 24)), reused,
                       what);
    std::vector<int32_t> turn = engine.Tokenize(document + " Q: who?", true);
    turn.insert(turn.end(), reused.token_ids.begin(), reused.token_ids.end());
    const std::vector<int32_t> next = engine.Tokenize(" Q: and?", false);
    turn.insert(turn.end(), next.begin(), next.end());
    std::vector<GenerationRequest> third;
    third.push_back(GreedyTokens(turn, 4));
    GenerationOutput answer = engine.Generate(std::move(third))[0];
    EXPECT_GT(answer.cached_tokens, reused.prompt_tokens) << what;  // blocks decoding wrote
    ExpectBitIdentical(RunAlone(model_, GetParam(), GreedyTokens(turn, 4)), answer,
                       what + ", third turn");
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ExactnessTest,
                         ::testing::Values(ModelVariant{kernels::WeightType::kF16, "llama"},
                                           ModelVariant{kernels::WeightType::kQ8_0, "llama"},
                                           ModelVariant{kernels::WeightType::kQ4_0, "qwen2"},
                                           ModelVariant{kernels::WeightType::kQ4_K, "llama"},
                                           ModelVariant{kernels::WeightType::kQ8_0, "llama", "q8"}),
                         [](const auto& info) {
                           return std::string(info.param.architecture) + "_" +
                                  std::string(kernels::WeightTypeName(info.param.type)) + "_kv_" +
                                  info.param.kv_type;
                         });

}  // namespace
}  // namespace reprise

namespace reprise {
namespace {

struct CacheLayout {
  int block_size;
  const char* kv_type;
};

class CacheLayoutExactnessTest : public ::testing::TestWithParam<CacheLayout> {};

// Any block size from 1 to 256 and any KV type: reuse still changes nothing, to the bit.
TEST_P(CacheLayoutExactnessTest, SharedPrefixThenAnotherQuestion) {
  REPRISE_REQUIRE_FIXTURES();
  if (auto reason = testing::TargetRunRepeatsDefault()) GTEST_SKIP() << *reason;
  const CacheLayout layout = GetParam();
  std::string model = testing::TinyModelPath();
  std::string document = testing::ReadTestData("long_table_prompt.txt").substr(0, 900);
  auto config = [&](bool reuse) {
    EngineConfig engine_config = testing::TestConfig(model, reuse, 64);
    engine_config.block_size = layout.block_size;
    engine_config.kv_type = layout.kv_type;
    return engine_config;
  };
  Engine reused(config(true));
  Engine fresh(config(false));
  for (const char* question : {"Who is 7?", "Who is 12?"}) {
    std::vector<GenerationRequest> a, b;
    a.push_back(testing::Greedy(document + question, 6));
    b.push_back(testing::Greedy(document + question, 6));
    GenerationOutput with_reuse = reused.Generate(std::move(a))[0];
    testing::ExpectBitIdentical(
        fresh.Generate(std::move(b))[0], with_reuse,
        fmt::format("block {} {} {}", layout.block_size, layout.kv_type, question));
    if (std::string(question) == "Who is 12?") {
      EXPECT_GT(with_reuse.cached_tokens, with_reuse.prompt_tokens - 8);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, CacheLayoutExactnessTest,
                         ::testing::Values(CacheLayout{1, "f16"}, CacheLayout{16, "f32"},
                                           CacheLayout{256, "f16"}, CacheLayout{32, "f32"},
                                           CacheLayout{16, "q8"}, CacheLayout{4, "q8"},
                                           CacheLayout{256, "q8"}),
                         [](const auto& info) {
                           return fmt::format("block{}_{}", info.param.block_size,
                                              info.param.kv_type);
                         });

}  // namespace
}  // namespace reprise
