#include "model/model.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "modelgen/make_model.h"
#include "core/error.h"
#include "test_support.h"

namespace reprise {
namespace {

TEST(ModelTest, Qwen2FilesLoadWithNeoxRopeAndBiases) {
  REPRISE_REQUIRE_FIXTURES();
  std::string path = testing::ScratchPath("qwen2.gguf");
  modelgen::MakeModelOptions options;
  options.architecture = "qwen2";
  options.vocab_path = testing::Fixture("vocab/ggml-vocab-qwen2.gguf");
  options.output_path = path;
  modelgen::MakeModel(options);
  auto model = Model::Load(path);
  EXPECT_EQ(model->config().architecture, "qwen2");
  EXPECT_EQ(model->config().rope_style, kernels::RopeStyle::kNeox);
  EXPECT_TRUE(model->config().has_qkv_bias);
  EXPECT_EQ(model->config().vocab_size, 151936);
  std::filesystem::remove(path);
}

TEST(ModelTest, FixtureConfigsMatchTheirMetadata) {
  REPRISE_REQUIRE_FIXTURES();
  auto model = Model::Load(testing::Fixture("models/stories260K.gguf"));
  const ModelConfig& config = model->config();
  EXPECT_EQ(config.n_layer, 5);
  EXPECT_EQ(config.n_head, 8);
  EXPECT_EQ(config.n_kv_head, 4);
  EXPECT_EQ(config.head_dim, 8);
  EXPECT_EQ(config.feed_forward_length, 172);
  EXPECT_EQ(config.vocab_size, 512);
  EXPECT_EQ(config.rope_style, kernels::RopeStyle::kNormal);
  EXPECT_FALSE(config.has_qkv_bias);
}

TEST(ModelTest, AFileWithoutWeightsIsRefusedNamingTheFile) {
  REPRISE_REQUIRE_FIXTURES();
  std::string path = testing::Fixture("vocab/ggml-vocab-llama-spm.gguf");
  try {
    Model::Load(path);
    FAIL() << "loading a vocabulary-only file should fail";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace reprise
