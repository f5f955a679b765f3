#include "gguf/gguf_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "gguf/gguf_writer.h"
#include "test_support.h"

namespace reprise::gguf {
namespace {

std::string TempPath(const std::string& name) { return testing::ScratchPath(name + ".gguf"); }

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void WriteAll(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

std::string ErrorOpening(const std::string& path) {
  try {
    GgufFile::Open(path);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

std::string WriteSmallFile() {
  GgufWriter writer;
  writer.SetString("general.architecture", "llama");
  writer.SetUint32("llama.block_count", 2);
  writer.SetFloat32("llama.rope.freq_base", 10000.0f);
  writer.SetBool("tokenizer.ggml.add_bos_token", true);
  writer.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "b"});
  writer.SetFloat32Array("tokenizer.ggml.scores", {0.0f, -1.5f, -2.5f});
  writer.SetInt32Array("tokenizer.ggml.token_type", {2, 1, 1});
  std::vector<float> values(64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  writer.AddTensor("weight", TensorType::kF32, {16, 4}, bytes);
  writer.AddTensor("second", TensorType::kF32, {8}, std::vector<uint8_t>(32, 0));
  std::string path = TempPath("small");
  writer.Write(path);
  return path;
}

TEST(GgufFileTest, RoundTripsMetadataAndTensors) {
  std::string path = WriteSmallFile();
  GgufFile file = GgufFile::Open(path);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.GetString("general.architecture"), "llama");
  EXPECT_EQ(file.GetInt("llama.block_count"), 2);
  EXPECT_FLOAT_EQ(file.GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_TRUE(file.GetBool("tokenizer.ggml.add_bos_token", false));
  EXPECT_EQ(file.GetArray("tokenizer.ggml.tokens").strings,
            (std::vector<std::string>{"<unk>", "a", "b"}));
  EXPECT_EQ(file.GetArray("tokenizer.ggml.scores").floats, (std::vector<double>{0.0, -1.5, -2.5}));
  EXPECT_EQ(file.GetArray("tokenizer.ggml.token_type").integers, (std::vector<int64_t>{2, 1, 1}));
  ASSERT_EQ(file.tensors().size(), 2u);
  const TensorInfo* weight = file.FindTensor("weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->shape, (std::vector<uint64_t>{16, 4}));
  EXPECT_EQ(weight->Rows(), 4u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(weight->data) % 32, 0u);
  float value;
  std::memcpy(&value, weight->data + 5 * sizeof(float), sizeof(float));
  EXPECT_EQ(value, 2.5f);
  EXPECT_EQ(file.GetInt("missing.key", 7), 7);
  EXPECT_THROW(file.GetInt("general.architecture"), Error);
  EXPECT_THROW(file.GetString("missing.key"), Error);
  std::filesystem::remove(path);
}

TEST(GgufFileTest, APrivateCopyStartsTheDataSectionOnACacheLine) {
  // Files align tensors to 32 bytes, so half of them start their data section mid-line; the
  // copy that decode reads must not. Pad the header until it ends 32 bytes into a line.
  for (size_t pad = 0; pad < 64; ++pad) {
    GgufWriter writer;
    writer.SetString("general.architecture", "llama");
    writer.SetString("general.name", std::string(pad, 'x'));
    std::vector<uint8_t> bytes(256);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13 + 1);
    writer.AddTensor("first", TensorType::kF32, {32}, std::vector<uint8_t>(128, 7));
    writer.AddTensor("second", TensorType::kF32, {64}, bytes);
    const std::string path = TempPath("placed");
    writer.Write(path);
    GgufFile mapped = GgufFile::Open(path, FileResidence::kMapped);
    if (mapped.HeaderBytes().size() % 64 != 32) continue;
    GgufFile copied = GgufFile::Open(path, FileResidence::kPrivateCopy);
    EXPECT_EQ(
        reinterpret_cast<uintptr_t>(copied.HeaderBytes().data() + copied.HeaderBytes().size()) % 64,
        0u);
    const TensorInfo* second = copied.FindTensor("second");
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(second->data) % 64, second->offset % 64);
    ASSERT_EQ(second->num_bytes, bytes.size());
    EXPECT_EQ(std::memcmp(second->data, bytes.data(), bytes.size()), 0);
    EXPECT_TRUE(std::equal(mapped.HeaderBytes().begin(), mapped.HeaderBytes().end(),
                           copied.HeaderBytes().begin(), copied.HeaderBytes().end()));
    std::filesystem::remove(path);
    return;
  }
  FAIL() << "no padding put the data section 32 bytes into a line";
}

TEST(GgufFileTest, WritableTensorsFindTheRegionATensorLiesIn) {
  uint8_t first[64] = {};
  uint8_t second[32] = {};
  const WritableTensors tensors({std::span<uint8_t>(first), std::span<uint8_t>(second)});
  EXPECT_EQ(tensors.At(first + 8, 56), first + 8);
  EXPECT_EQ(tensors.At(second, 32), second);
  EXPECT_EQ(tensors.At(second + 32, 0), second + 32);
  EXPECT_THROW(tensors.At(first + 8, 57), Error);  // runs past its region
  EXPECT_THROW(tensors.At(second + 16, 17), Error);
  uint8_t elsewhere[8] = {};
  EXPECT_THROW(tensors.At(elsewhere, 1), Error);
}

TEST(GgufFileTest, ReadsVersion2AndRefusesVersion1) {
  std::string path = WriteSmallFile();
  auto bytes = ReadAll(path);
  bytes[4] = 2;  // version 2 has version 3's little-endian layout
  WriteAll(path, bytes);
  EXPECT_EQ(GgufFile::Open(path).version(), 2u);
  EXPECT_EQ(GgufFile::Open(path).GetString("general.architecture"), "llama");
  bytes[4] = 1;  // version 1 had 32-bit counts
  WriteAll(path, bytes);
  EXPECT_NE(ErrorOpening(path).find("unsupported GGUF version 1"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(GgufFileTest, MissingFileNamesThePath) {
  std::string message = ErrorOpening("/nonexistent/model.gguf");
  EXPECT_NE(message.find("/nonexistent/model.gguf"), std::string::npos) << message;
}

TEST(GgufFileTest, BadMagicIsRefused) {
  std::string path = WriteSmallFile();
  auto bytes = ReadAll(path);
  bytes[0] = 'X';
  WriteAll(path, bytes);
  EXPECT_NE(ErrorOpening(path).find("bad magic"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(GgufFileTest, EveryTruncationIsRefusedWithoutCrashing) {
  std::string path = WriteSmallFile();
  auto bytes = ReadAll(path);
  std::string cut_path = TempPath("cut");
  for (size_t size = 0; size < bytes.size(); size += 7) {
    WriteAll(cut_path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + size));
    std::string message = ErrorOpening(cut_path);
    EXPECT_FALSE(message.empty()) << "a file cut to " << size << " bytes was accepted";
  }
  std::filesystem::remove(path);
  std::filesystem::remove(cut_path);
}

TEST(GgufFileTest, AbsurdCountsAreRefused) {
  std::string path = WriteSmallFile();
  auto bytes = ReadAll(path);
  auto corrupt = bytes;
  uint64_t huge = uint64_t{1} << 60;
  std::memcpy(corrupt.data() + 8, &huge, sizeof(huge));  // tensor count
  WriteAll(path, corrupt);
  EXPECT_NE(ErrorOpening(path).find("absurd tensor count"), std::string::npos);
  corrupt = bytes;
  std::memcpy(corrupt.data() + 16, &huge, sizeof(huge));  // metadata count
  WriteAll(path, corrupt);
  EXPECT_NE(ErrorOpening(path).find("absurd metadata count"), std::string::npos);
  corrupt = bytes;
  std::memcpy(corrupt.data() + 24, &huge, sizeof(huge));  // first key's length
  WriteAll(path, corrupt);
  EXPECT_NE(ErrorOpening(path).find("absurd length"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(GgufFileTest, UnknownTensorTypeAndOutOfFileTensorAreRefused) {
  std::string path = WriteSmallFile();
  auto bytes = ReadAll(path);
  // Find the tensor table entry of "weight": name, dims, shape, then the type.
  std::string name = "weight";
  auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(it, bytes.end());
  size_t type_offset = static_cast<size_t>(it - bytes.begin()) + name.size() + 4 + 2 * 8;
  auto corrupt = bytes;
  uint32_t bad_type = 99;
  std::memcpy(corrupt.data() + type_offset, &bad_type, sizeof(bad_type));
  WriteAll(path, corrupt);
  EXPECT_NE(ErrorOpening(path).find("unknown type 99"), std::string::npos);

  corrupt = bytes;
  uint64_t far_offset = uint64_t{1} << 20;
  std::memcpy(corrupt.data() + type_offset + 4, &far_offset, sizeof(far_offset));
  WriteAll(path, corrupt);
  EXPECT_NE(ErrorOpening(path).find("outside the file"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(GgufFileTest, ReadsFixtureModels) {
  REPRISE_REQUIRE_FIXTURES();
  for (const char* name : {"models/stories260K.gguf", "models/TinyStories-656K-f32.gguf",
                           "models/TinyStories-656K-q8_0.gguf", "vocab/ggml-vocab-llama-spm.gguf",
                           "vocab/ggml-vocab-llama-bpe.gguf", "vocab/ggml-vocab-qwen2.gguf"}) {
    GgufFile file = GgufFile::Open(testing::Fixture(name));
    EXPECT_FALSE(file.GetString("general.architecture").empty()) << name;
    EXPECT_GT(file.GetArray("tokenizer.ggml.tokens").strings.size(), 0u) << name;
  }
  GgufFile q8 = GgufFile::Open(testing::Fixture("models/TinyStories-656K-q8_0.gguf"));
  bool has_q8 = false;
  for (const auto& tensor : q8.tensors()) has_q8 |= tensor.type == TensorType::kQ8_0;
  EXPECT_TRUE(has_q8);
}

}  // namespace
}  // namespace reprise::gguf
