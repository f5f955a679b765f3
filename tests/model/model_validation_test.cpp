// Load-time validation of hyper-parameters against crafted copies of a real model: every value
// out of range or inconsistent with the tensor table is refused in one line naming it, before
// anything is sized from it, and no byte from the file reaches the message raw.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "gguf_rewrite.h"
#include "model/model.h"
#include "test_support.h"

namespace reprise {
namespace {

using testing::Float32Value;
using testing::GgufEdit;
using testing::StringValue;
using testing::Uint32Value;
using testing::Uint64Value;

class ModelValidationTest : public ::testing::Test {
 protected:
  void SetUp() override { REPRISE_REQUIRE_FIXTURES(); }

  // The load error of stories260K (5 layers) edited by `edit`; fails the test if it loads.
  static std::string LoadError(const GgufEdit& edit) {
    static int counter = 0;
    std::string path = testing::ScratchPath("crafted_" + std::to_string(counter++) + ".gguf");
    testing::RewriteGguf(testing::Fixture("models/stories260K.gguf"), path, edit);
    try {
      Model::Load(path);
    } catch (const Error& error) {
      std::string message = error.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
      return message;
    }
    ADD_FAILURE() << "the crafted file loaded";
    return "";
  }

  static GgufEdit Set(const std::string& key, gguf::Value value) {
    GgufEdit edit;
    edit.set[key] = std::move(value);
    return edit;
  }
};

TEST_F(ModelValidationTest, TheUneditedCopyLoads) {
  std::string path = testing::ScratchPath("unedited.gguf");
  testing::RewriteGguf(testing::Fixture("models/stories260K.gguf"), path, {});
  EXPECT_EQ(Model::Load(path)->config().n_layer, 5);
}

TEST_F(ModelValidationTest, NonFiniteOrOutOfRangeRealsAreRefusedNamingTheKey) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {nan, -1e-5, 0.0, inf}) {
    std::string message =
        LoadError(Set("llama.attention.layer_norm_rms_epsilon", Float32Value(bad)));
    EXPECT_NE(message.find("layer_norm_rms_epsilon"), std::string::npos) << message;
  }
  for (double bad : {0.0, inf, -10000.0, nan}) {
    std::string message = LoadError(Set("llama.rope.freq_base", Float32Value(bad)));
    EXPECT_NE(message.find("rope.freq_base"), std::string::npos) << message;
  }
  GgufEdit scaling = Set("llama.rope.scaling.type", StringValue("linear"));
  scaling.set["llama.rope.scaling.factor"] = Float32Value(nan);
  EXPECT_NE(LoadError(scaling).find("rope.scaling.factor"), std::string::npos);
}

TEST_F(ModelValidationTest, IntegersAreReadAtTheirWidthAndRangeChecked) {
  // 2^32 + 5 would be 5, the right layer count, if it were cut to 32 bits.
  std::string message = LoadError(Set("llama.block_count", Uint64Value((uint64_t{1} << 32) + 5)));
  EXPECT_NE(message.find("block_count"), std::string::npos) << message;
  EXPECT_NE(message.find("4294967301"), std::string::npos) << message;
  EXPECT_NE(LoadError(Set("llama.attention.head_count", Uint64Value(uint64_t{1} << 63)))
                .find("head_count"),
            std::string::npos);
  EXPECT_NE(LoadError(Set("llama.attention.head_count_kv", Uint32Value(0))).find("head_count_kv"),
            std::string::npos);
  EXPECT_NE(
      LoadError(Set("llama.context_length", Uint64Value(uint64_t{1} << 40))).find("context_length"),
      std::string::npos);
  EXPECT_NE(LoadError(Set("llama.attention.key_length", Uint32Value(0))).find("key_length"),
            std::string::npos);
}

TEST_F(ModelValidationTest, HugeBlockCountsFailFastWithoutAllocating) {
  for (uint64_t layers : {uint64_t{2000000}, uint64_t{2147483647}}) {
    std::string message =
        LoadError(Set("llama.block_count", Uint32Value(static_cast<uint32_t>(layers))));
    EXPECT_NE(message.find("block_count"), std::string::npos) << message;
  }
}

TEST_F(ModelValidationTest, BlockCountMustMatchTheTensorTable) {
  std::string more = LoadError(Set("llama.block_count", Uint32Value(6)));
  EXPECT_NE(more.find("block_count is 6 but the tensor table holds 5 layers"), std::string::npos)
      << more;
  GgufEdit fewer = Set("llama.block_count", Uint32Value(4));
  EXPECT_NE(LoadError(fewer).find("holds 5 layers"), std::string::npos);
  // A stray tensor of a layer beyond block_count is as wrong as a missing one.
  GgufEdit stray;
  stray.copy_tensor.push_back({"blk.9.attn_norm.weight", "blk.0.attn_norm.weight"});
  EXPECT_NE(LoadError(stray).find("holds 10 layers"), std::string::npos);
}

TEST_F(ModelValidationTest, FileBytesAreEscapedInMessages) {
  const std::string hostile = "llama\x1b[2J\x1b]0;owned\x07\x9b";
  std::string message = LoadError(Set("general.architecture", StringValue(hostile)));
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  EXPECT_EQ(message.find('\x07'), std::string::npos) << message;
  EXPECT_EQ(message.find('\x9b'), std::string::npos) << message;
  EXPECT_NE(message.find("llama\\x1B[2J\\x1B]0;owned\\x07\\x9B"), std::string::npos) << message;

  // The reader's own messages too: a duplicate tensor whose name holds an escape.
  GgufEdit duplicate;
  duplicate.copy_tensor.push_back({"x\x1b[31m", "output_norm.weight"});
  duplicate.copy_tensor.push_back({"x\x1b[31m", "output_norm.weight"});
  std::string reader = LoadError(duplicate);
  EXPECT_EQ(reader.find('\x1b'), std::string::npos) << reader;
  EXPECT_NE(reader.find("duplicate tensor 'x\\x1B[31m'"), std::string::npos) << reader;
}

}  // namespace
}  // namespace reprise
