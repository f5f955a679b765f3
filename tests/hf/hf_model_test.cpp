// A Hugging Face folder runs as the GGUF converted from it: the same greedy tokens with
// bit-identical f32 logits, from one safetensors file or from shards, and close logits in
// F16/BF16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "hf/model_source.h"
#include "hf_test_support.h"
#include "kernels/cpu_target.h"
#include "kernels/matmul.h"
#include "kernels/weight_type.h"
#include "model/model.h"
#include "reprise/engine.h"

namespace reprise {
namespace {

GenerationOutput RunStory(const std::string& model, int max_tokens = 48, bool mmap = false) {
  EngineConfig config;
  config.model_path = model;
  config.mmap_weights = mmap;
  config.num_threads = 1;
  config.kv_cache_memory_bytes = size_t{16} << 20;
  Engine engine(config);
  GenerationRequest request;
  request.prompt = "Once upon a time";
  request.sampling.temperature = 0;
  request.sampling.max_tokens = max_tokens;
  request.record_logits = true;
  std::vector<GenerationRequest> requests;
  requests.push_back(request);
  return engine.Generate(std::move(requests))[0];
}

// Bit-for-bit equality of every logit of every step.
void ExpectSameBits(const GenerationOutput& a, const GenerationOutput& b) {
  ASSERT_EQ(a.token_ids, b.token_ids);
  ASSERT_EQ(a.logits.size(), b.logits.size());
  for (size_t step = 0; step < a.logits.size(); ++step) {
    ASSERT_EQ(a.logits[step].size(), b.logits[step].size());
    EXPECT_EQ(std::memcmp(a.logits[step].data(), b.logits[step].data(),
                          a.logits[step].size() * sizeof(float)),
              0)
        << "logits differ at step " << step;
  }
}

TEST(HfModelTest, APrivateCopyStartsTheTensorDataOnACacheLine) {
  // Writers pad the header to 8 bytes only; the copy decode reads starts the data on a line.
  std::string bytes(256, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 13 + 1);
  const std::string path = testing::ScratchPath("placed.safetensors");
  testing::WriteSafetensors(
      path, {{"first", "F32", {32}, std::string(128, '\7')}, {"second", "F32", {64}, bytes}});
  const hf::SafetensorsFile mapped = hf::SafetensorsFile::Open(path);
  ASSERT_NE(mapped.HeaderBytes().size() % 64, 0u) << "the header should end mid-line";
  const hf::SafetensorsFile copied = hf::SafetensorsFile::Open(path, FileResidence::kPrivateCopy);
  EXPECT_EQ(copied.HeaderBytes(), mapped.HeaderBytes());
  EXPECT_EQ(
      reinterpret_cast<uintptr_t>(copied.HeaderBytes().data() + copied.HeaderBytes().size()) % 64,
      0u);
  const hf::SafetensorsTensor* second = copied.Find("second");
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(second->data) % 64, 0u);  // 128 bytes into the data
  ASSERT_EQ(second->num_bytes, bytes.size());
  EXPECT_EQ(std::memcmp(second->data, bytes.data(), bytes.size()), 0);
}

TEST(HfModelTest, FolderGivesTheGgufsGreedyTextAndLogitBits) {
  REPRISE_REQUIRE_FIXTURES();
  GenerationOutput folder = RunStory(testing::HfFixture());
  GenerationOutput gguf = RunStory(testing::GgufFixture());
  EXPECT_EQ(folder.text, gguf.text);
  EXPECT_TRUE(folder.text.starts_with(", a little girl named Lily lived in a small house"))
      << folder.text;
  ExpectSameBits(folder, gguf);
}

TEST(HfModelTest, FolderConfigMatchesTheGguf) {
  REPRISE_REQUIRE_FIXTURES();
  auto folder = Model::Load(testing::HfFixture());
  auto gguf = Model::Load(testing::GgufFixture());
  const ModelConfig& a = folder->config();
  const ModelConfig& b = gguf->config();
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.context_length, b.context_length);
  EXPECT_EQ(a.embedding_length, b.embedding_length);
  EXPECT_EQ(a.feed_forward_length, b.feed_forward_length);
  EXPECT_EQ(a.n_layer, b.n_layer);
  EXPECT_EQ(a.n_head, b.n_head);
  EXPECT_EQ(a.n_kv_head, b.n_kv_head);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rms_eps, b.rms_eps);
  EXPECT_EQ(a.rope_dim, b.rope_dim);
  EXPECT_EQ(a.rope_freq_base, b.rope_freq_base);
  // Weights used in place are the mapped file's bytes; only Q and K are reordered copies, and
  // those equal the GGUF converter's tensors byte for byte.
  for (const auto& tensor : gguf->file().tensors()) {
    const gguf::TensorInfo* mine = folder->file().FindTensor(tensor.name);
    ASSERT_NE(mine, nullptr) << tensor.name;
    EXPECT_EQ(mine->shape, tensor.shape) << tensor.name;
    ASSERT_EQ(mine->num_bytes, tensor.num_bytes) << tensor.name;
    EXPECT_EQ(std::memcmp(mine->data, tensor.data, tensor.num_bytes), 0) << tensor.name;
    // The reordered copies start on cache lines, as the weights' copy does.
    if (tensor.name.ends_with("attn_q.weight") || tensor.name.ends_with("attn_k.weight")) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(mine->data) % 64, 0u) << tensor.name;
    }
  }
  EXPECT_EQ(folder->file().tensors().size(), gguf->file().tensors().size());
}

TEST(HfModelTest, ShardsWithAnIndexGiveTheSameBits) {
  REPRISE_REQUIRE_FIXTURES();
  std::string dir = testing::CopyHfFixture("sharded", false);
  std::vector<testing::TensorBytes> tensors = testing::FixtureTensors();
  ASSERT_GT(tensors.size(), 2u);
  const size_t half = tensors.size() / 2;
  nlohmann::json weight_map = nlohmann::json::object();
  const std::string names[2] = {"model-00001-of-00002.safetensors",
                                "model-00002-of-00002.safetensors"};
  for (size_t i = 0; i < tensors.size(); ++i) weight_map[tensors[i].name] = names[i < half ? 0 : 1];
  testing::WriteSafetensors(dir + "/" + names[0], {tensors.begin(), tensors.begin() + half});
  testing::WriteSafetensors(dir + "/" + names[1], {tensors.begin() + half, tensors.end()});
  testing::WriteText(
      dir + "/model.safetensors.index.json",
      nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2));
  ExpectSameBits(RunStory(dir), RunStory(testing::HfFixture()));
}

// The fixture's weights re-saved as `dtype` (F32, F16 or BF16, rounded to nearest even); with
// `perturb`, each weight is first moved by a small fraction (at most 2^-9 of itself) so that it
// no longer fits in 16 bits.
std::string ConvertedFolder(const std::string& dtype, bool perturb) {
  std::string dir =
      testing::CopyHfFixture("converted_" + dtype + (perturb ? "_perturbed" : ""), false);
  std::vector<testing::TensorBytes> tensors = testing::FixtureTensors();
  uint32_t state = 12345;
  for (testing::TensorBytes& tensor : tensors) {
    const size_t count = tensor.bytes.size() / 4;
    const size_t width = dtype == "F32" ? 4 : 2;
    std::string bytes(count * width, '\0');
    for (size_t i = 0; i < count; ++i) {
      float value;
      std::memcpy(&value, tensor.bytes.data() + 4 * i, 4);
      if (perturb) {
        state = state * 1664525u + 1013904223u;
        value *= 1.0f + (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) / 256.0f;
      }
      if (dtype == "F32") {
        std::memcpy(bytes.data() + 4 * i, &value, 4);
      } else {
        uint16_t half =
            dtype == "F16" ? kernels::FloatToHalf(value) : kernels::FloatToBfloat16(value);
        std::memcpy(bytes.data() + 2 * i, &half, 2);
      }
    }
    tensor.bytes = std::move(bytes);
    tensor.dtype = dtype;
  }
  testing::WriteSafetensors(dir + "/model.safetensors", tensors);
  return dir;
}

float LargestDifference(const GenerationOutput& a, const GenerationOutput& b) {
  float largest = 0;
  for (size_t i = 0; i < a.logits[0].size(); ++i) {
    largest = std::max(largest, std::fabs(a.logits[0][i] - b.logits[0][i]));
  }
  return largest;
}

TEST(HfModelTest, F16AndBf16FoldersLoadAndStayCloseToF32) {
  REPRISE_REQUIRE_FIXTURES();
  // Every weight of the fixture is a bfloat16 value stored as f32 (the low 16 bits are zero):
  // F16 and BF16 hold them exactly, so both must give the f32 bits.
  GenerationOutput f32 = RunStory(testing::HfFixture(), 8);
  for (const char* dtype : {"F16", "BF16"}) {
    std::string dir = ConvertedFolder(dtype, false);
    auto model = Model::Load(dir);
    EXPECT_EQ(static_cast<uint32_t>(model->file().FindTensor("blk.0.attn_q.weight")->type),
              static_cast<uint32_t>(dtype == std::string("F16") ? gguf::TensorType::kF16
                                                                : gguf::TensorType::kBF16));
    ExpectSameBits(RunStory(dir, 8), f32);
  }
  // Weights that do not fit: the 16-bit folders round them (F16 to 2^-11 of each value, BF16 to
  // 2^-8) and their first-step logits (magnitude ~10) stay close to the perturbed f32 ones.
  GenerationOutput perturbed = RunStory(ConvertedFolder("F32", true), 8);
  for (auto [dtype, bound] : {std::pair{"F16", 0.02f}, std::pair{"BF16", 0.2f}}) {
    GenerationOutput rounded = RunStory(ConvertedFolder(dtype, true), 8);
    float difference = LargestDifference(perturbed, rounded);
    EXPECT_GT(difference, 0.0f) << dtype << ": rounding must change something";
    EXPECT_LT(difference, bound) << dtype;
    std::printf("%s: largest first-step logit difference from F32 %.5f (text \"%s\" vs \"%s\")\n",
                dtype, difference, rounded.text.c_str(), perturbed.text.c_str());
  }
}

// A folder's private copy has its matrices laid out for this CPU's kernels, as a GGUF file's has:
// in the shards' copies and in the reordered Q/K copies alike, with the stored bytes' fingerprint
// and the mapped folder's bits.
TEST(HfModelTest, APrivateCopyLaysOutTheFoldersMatricesForTheCpu) {
  REPRISE_REQUIRE_FIXTURES();
  const std::string dir = ConvertedFolder("BF16", true);
  auto mapped = Model::Load(dir, FileResidence::kMapped);
  auto copied = Model::Load(dir, FileResidence::kPrivateCopy);
  EXPECT_EQ(mapped->WeightsFingerprint(), copied->WeightsFingerprint());
  const bool row_major =
      kernels::PreferredLayout(kernels::BestCpuTarget(), kernels::WeightType::kBF16) ==
      kernels::WeightLayout::kRowMajor;
  for (const char* name : {"blk.0.attn_q.weight", "blk.1.ffn_up.weight", "token_embd.weight"}) {
    const gguf::TensorInfo* stored = mapped->file().FindTensor(name);
    const gguf::TensorInfo* laid_out = copied->file().FindTensor(name);
    ASSERT_NE(stored, nullptr) << name;
    ASSERT_NE(laid_out, nullptr) << name;
    ASSERT_EQ(stored->num_bytes, laid_out->num_bytes) << name;
    const bool same = std::memcmp(stored->data, laid_out->data, stored->num_bytes) == 0;
    EXPECT_EQ(same, row_major) << name;
  }
  ExpectSameBits(RunStory(dir, 8, true), RunStory(dir, 8));
}

}  // namespace
}  // namespace reprise
