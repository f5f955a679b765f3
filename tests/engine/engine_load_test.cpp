// What the engine checks at load beyond the model itself: the model and its tokenizer agree on
// the vocabulary, so no id the model can produce lacks a text.
#include <gtest/gtest.h>

#include "core/error.h"
#include "gguf_rewrite.h"
#include "reprise/engine.h"
#include "test_support.h"

namespace reprise {
namespace {

// stories260K (512 embedding rows) with its tokenizer arrays cut to `tokens` entries.
std::string WithTokenizerOf(size_t tokens) {
  std::string path = testing::ScratchPath("tokenizer_" + std::to_string(tokens) + ".gguf");
  testing::GgufEdit edit;
  edit.transform = [tokens](const std::string& key, gguf::Value& value) {
    if (!key.starts_with("tokenizer.ggml.")) return;
    auto* array = std::get_if<gguf::ArrayValue>(&value.data);
    if (array == nullptr || array->size() != 512) return;
    if (!array->strings.empty()) array->strings.resize(tokens);
    if (!array->floats.empty()) array->floats.resize(tokens);
    if (!array->integers.empty()) array->integers.resize(tokens);
    if (!array->unsigned_integers.empty()) array->unsigned_integers.resize(tokens);
  };
  testing::RewriteGguf(testing::Fixture("models/stories260K.gguf"), path, edit);
  return path;
}

TEST(EngineLoadTest, AVocabularyLargerThanTheTokenizerIsRefusedInOneLine) {
  REPRISE_REQUIRE_FIXTURES();
  EngineConfig config;
  config.model_path = WithTokenizerOf(500);
  config.num_threads = 1;
  config.kv_cache_memory_bytes = size_t{8} << 20;
  try {
    Engine engine(config);
    FAIL() << "a model with 12 ids beyond its tokenizer loaded";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("token_embd.weight has 512 rows but the tokenizer has 500 tokens"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }

  // The same file with its whole tokenizer loads and serves.
  config.model_path = WithTokenizerOf(512);
  Engine engine(config);
  GenerationRequest request;
  request.prompt = "Once upon a time";
  request.sampling.max_tokens = 4;
  EXPECT_EQ(engine.Generate({request})[0].finish_reason, FinishReason::kLength);
}

}  // namespace
}  // namespace reprise
