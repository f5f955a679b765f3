// A prompt's tokens as the engine computes them, in the one place that holds the BOS rule and
// the one that prepends a task prompt: pinned to the ids the tokenizer gives, and the same
// whether a caller hands the engine text or the tokens EncodePrompt made from it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine_test_support.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace reprise {
namespace {

constexpr const char* kTaskText = "You answer questions about the weather.";

class PromptTokensTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::HaveFixtures()) return;
    EngineConfig config = testing::TestConfig(testing::TinyModelPath(), /*reuse=*/true);
    config.task_prompts_json =
        nlohmann::json::array({{{"task_id", "weather"}, {"prompt", kTaskText}}}).dump();
    engine_ = new Engine(config);
    file_ = new gguf::GgufFile(gguf::GgufFile::Open(testing::TinyModelPath()));
    tokenizer_ = new Tokenizer(Tokenizer::FromGguf(*file_));
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete tokenizer_;
    delete file_;
    engine_ = nullptr;
  }
  void SetUp() override {
    REPRISE_REQUIRE_FIXTURES();
    ASSERT_TRUE(tokenizer_->add_bos());  // the Llama 3 vocabulary asks for BOS
  }

  // The ids the tokenizer gives a text without BOS (special-token texts are tokens).
  static std::vector<int32_t> Plain(const std::string& text) {
    return tokenizer_->Encode(text, /*add_special=*/false, /*parse_special=*/true);
  }
  static std::vector<int32_t> WithBos(const std::string& text) {
    std::vector<int32_t> ids{tokenizer_->bos_id()};
    std::vector<int32_t> rest = Plain(text);
    ids.insert(ids.end(), rest.begin(), rest.end());
    return ids;
  }

  static Engine* engine_;
  static gguf::GgufFile* file_;
  static Tokenizer* tokenizer_;
};

Engine* PromptTokensTest::engine_ = nullptr;
gguf::GgufFile* PromptTokensTest::file_ = nullptr;
Tokenizer* PromptTokensTest::tokenizer_ = nullptr;

TEST_F(PromptTokensTest, TokenizeAddsBosOnceAsTheModelAsks) {
  const std::string text = "Hello there, how are you?";
  EXPECT_EQ(engine_->Tokenize(text, true), WithBos(text));
  EXPECT_EQ(engine_->Tokenize(text, false), Plain(text));
  // A chat template that writes the BOS text gets no second BOS.
  const std::string templated = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>hi";
  std::vector<int32_t> ids = engine_->Tokenize(templated, true);
  EXPECT_EQ(ids, Plain(templated));
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], tokenizer_->bos_id());
  EXPECT_NE(ids[1], tokenizer_->bos_id());
}

TEST_F(PromptTokensTest, EncodePromptHandsOverTheRequestsOwnTokens) {
  GenerationRequest request = testing::Greedy("What is the weather in Paris?");
  EXPECT_EQ(engine_->EncodePrompt(request), WithBos("What is the weather in Paris?").size());
  EXPECT_TRUE(request.prompt.empty());
  EXPECT_EQ(request.prompt_tokens, WithBos("What is the weather in Paris?"));

  GenerationRequest no_bos = testing::Greedy("plain");
  no_bos.add_special_tokens = false;
  engine_->EncodePrompt(no_bos);
  EXPECT_EQ(no_bos.prompt_tokens, Plain("plain"));

  // Given tokens are kept as they are.
  GenerationRequest tokens = testing::GreedyTokens({5, 6, 7});
  EXPECT_EQ(engine_->EncodePrompt(tokens), 3u);
  EXPECT_EQ(tokens.prompt_tokens, (std::vector<int32_t>{5, 6, 7}));
}

TEST_F(PromptTokensTest, TaskPromptComesFirstAndTheRequestFollowsWithoutBos) {
  const std::string question = "Will it rain tomorrow?";
  GenerationRequest request = testing::Greedy(question);
  request.cache.task_id = "weather";
  const size_t length = engine_->EncodePrompt(request);
  EXPECT_EQ(request.prompt_tokens, Plain(question));
  EXPECT_EQ(length, WithBos(kTaskText).size() + Plain(question).size());
  ASSERT_EQ(engine_->TaskPrompts().size(), 1u);
  EXPECT_EQ(engine_->TaskPrompts()[0].tokens, WithBos(kTaskText).size());

  GenerationRequest unknown = testing::Greedy(question);
  unknown.cache.task_id = "nope";
  EXPECT_THROW(engine_->EncodePrompt(unknown), Error);
}

TEST_F(PromptTokensTest, TextAndEncodedTokensGiveTheSameOutput) {
  for (const std::string task : {"", "weather"}) {
    SCOPED_TRACE("task '" + task + "'");
    GenerationRequest as_text = testing::Greedy("Tell me about clouds.", 6);
    as_text.cache.task_id = task;
    GenerationRequest as_tokens = as_text;
    const size_t length = engine_->EncodePrompt(as_tokens);
    std::vector<GenerationOutput> outputs = engine_->Generate({as_text, as_tokens});
    EXPECT_EQ(outputs[0].prompt_tokens, length);
    EXPECT_EQ(outputs[1].prompt_tokens, length);
    testing::ExpectBitIdentical(outputs[0], outputs[1], "text vs encoded tokens");
  }
}

}  // namespace
}  // namespace reprise
