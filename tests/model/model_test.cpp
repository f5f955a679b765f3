#include "model/model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "kernels/cpu_target.h"
#include "kernels/matmul.h"
#include "modelgen/make_model.h"
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

// A decoded token reads every tensor of the file once, but only one row of the embedding table
// (unless the output matrix is that table, tied).
size_t ExpectedDecodeBytes(const gguf::GgufFile& file) {
  size_t bytes = 0;
  bool tied = true;
  for (const gguf::TensorInfo& tensor : file.tensors()) {
    if (tensor.name == "output.weight") tied = false;
  }
  for (const gguf::TensorInfo& tensor : file.tensors()) {
    if (tensor.name != "token_embd.weight") {
      bytes += tensor.num_bytes;
      continue;
    }
    bytes += tensor.num_bytes / tensor.Rows();  // one row
    if (tied) bytes += tensor.num_bytes;
  }
  return bytes;
}

TEST(ModelTest, DecodeWeightBytesCountEveryTensorAndOneEmbeddingRow) {
  REPRISE_REQUIRE_FIXTURES();
  auto fixture = Model::Load(testing::Fixture("models/stories260K.gguf"));
  EXPECT_EQ(fixture->DecodeWeightBytes(), ExpectedDecodeBytes(fixture->file()));

  std::string path = testing::ScratchPath("decode_bytes_qwen2.gguf");  // biases, quantized
  modelgen::MakeModelOptions options;
  options.architecture = "qwen2";
  options.type = kernels::WeightType::kQ4_K;
  options.vocab_path = testing::Fixture("vocab/ggml-vocab-qwen2.gguf");
  options.output_path = path;
  modelgen::MakeModel(options);
  auto made = Model::Load(path);
  EXPECT_EQ(made->DecodeWeightBytes(), ExpectedDecodeBytes(made->file()));
  std::filesystem::remove(path);
}

// The weights of a llama model of `shape` with a vocabulary of `vocab` tokens and the output
// matrix tied to the embeddings (as make-model writes it).
int64_t TiedParameters(const modelgen::ModelShape& shape, int64_t vocab) {
  const int64_t e = shape.embedding_length, f = shape.feed_forward_length;
  const int64_t kv_dim = e / shape.n_head * shape.n_kv_head;
  const int64_t layer = 2 * e * e + 2 * e * kv_dim + 3 * e * f + 2 * e;  // q, o; k, v; ffn; norms
  return vocab * e + shape.n_layer * layer + e;
}

// A private copy's matrices may be laid out anew for the CPU; the fingerprint that keys cached
// blocks is the stored file's, the same as a mapped load's and as a router's reading the file.
TEST(ModelTest, FingerprintIsTheStoredFilesWhateverTheLayout) {
  REPRISE_REQUIRE_FIXTURES();
  std::string path = testing::ScratchPath("fingerprint_q4_0.gguf");
  modelgen::MakeModelOptions options;
  options.shape = "tiny";
  options.type = kernels::WeightType::kQ4_0;
  options.vocab_path = testing::Fixture("vocab/ggml-vocab-llama-bpe.gguf");
  options.output_path = path;
  modelgen::MakeModel(options);
  auto mapped = Model::Load(path, FileResidence::kMapped);
  auto copied = Model::Load(path, FileResidence::kPrivateCopy);
  EXPECT_EQ(mapped->WeightsFingerprint(), copied->WeightsFingerprint());
  EXPECT_EQ(copied->WeightsFingerprint(), WeightsFingerprint(gguf::GgufFile::Open(path)));
  // The copy's bytes did change where this CPU prefers another layout.
  const gguf::TensorInfo* q = copied->file().FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  const bool same = std::memcmp(q->data, mapped->file().FindTensor("blk.0.attn_q.weight")->data,
                                q->num_bytes) == 0;
  EXPECT_EQ(same, kernels::PreferredLayout(kernels::BestCpuTarget(), kernels::WeightType::kQ4_0) ==
                      kernels::WeightLayout::kRowMajor);
  std::filesystem::remove(path);
}

TEST(ModelTest, MadeShapesHaveTheParameterCountsOfTheModelsTheyStandFor) {
  // The published totals (safetensors metadata of each model) with their own vocabularies;
  // Llama-3.1-8B's output matrix is its own, so its 128256 x 4096 are taken off.
  EXPECT_EQ(TiedParameters(modelgen::ShapeByName("135m"), 49152), 134515008);
  EXPECT_EQ(TiedParameters(modelgen::ShapeByName("360m"), 49152), 361821120);
  EXPECT_EQ(TiedParameters(modelgen::ShapeByName("1b"), 128256), 1235814400);
  EXPECT_EQ(TiedParameters(modelgen::ShapeByName("3b"), 128256), 3212749824);
  EXPECT_EQ(TiedParameters(modelgen::ShapeByName("8b"), 128256), 8030261248 - 128256 * 4096);
  EXPECT_THROW(modelgen::ShapeByName("70b"), Error);
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
