// A malformed model folder is refused with one line naming the file (and the field or tensor),
// never a crash: every case below is a copy of the fixture folder with one thing broken.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hf/model_source.h"
#include "hf/safetensors.h"
#include "hf_test_support.h"
#include "model/model.h"

namespace reprise {
namespace {

using nlohmann::json;

// Loads `dir` as every command does and returns the one-line error, checking that it names
// `file` and `detail`.
void ExpectRefused(const std::string& dir, const std::string& file, const std::string& detail) {
  std::string message = testing::ErrorOf([&] { Model::Load(dir); });
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find(file), std::string::npos)
      << "no file name '" << file << "' in: " << message;
  EXPECT_NE(message.find(detail), std::string::npos) << "no '" << detail << "' in: " << message;
}

std::string ConfigWith(const std::string& name, const std::function<void(json&)>& change) {
  std::string dir = testing::CopyHfFixture(name);
  json config = json::parse(testing::ReadText(dir + "/config.json"));
  change(config);
  testing::WriteText(dir + "/config.json", config.dump());
  return dir;
}

std::string WeightsWith(const std::string& name,
                        const std::function<void(std::vector<testing::TensorBytes>&)>& change) {
  std::string dir = testing::CopyHfFixture(name, false);
  std::vector<testing::TensorBytes> tensors = testing::FixtureTensors();
  change(tensors);
  testing::WriteSafetensors(dir + "/model.safetensors", tensors);
  return dir;
}

TEST(HfMalformedTest, MissingOrBadConfig) {
  REPRISE_REQUIRE_FIXTURES();
  std::string dir = testing::CopyHfFixture("no_config");
  std::filesystem::remove(dir + "/config.json");
  ExpectRefused(dir, "config.json", "missing");

  dir = testing::CopyHfFixture("bad_config_json");
  testing::WriteText(dir + "/config.json", "{\"model_type\": \"llama\",");
  ExpectRefused(dir, "config.json", "bad JSON");

  dir = testing::CopyHfFixture("deep_config_json");
  testing::WriteText(dir + "/config.json", std::string(100000, '['));
  ExpectRefused(dir, "config.json", "bad JSON");
}

TEST(HfMalformedTest, ConfigFieldsAreCheckedAndNamed) {
  REPRISE_REQUIRE_FIXTURES();
  ExpectRefused(ConfigWith("mistral", [](json& c) { c["model_type"] = "mistral"; }), "config.json",
                "'model_type'");
  ExpectRefused(ConfigWith("gpt2_arch", [](json& c) { c["architectures"] = {"GPT2LMHeadModel"}; }),
                "config.json", "'architectures'");
  ExpectRefused(ConfigWith("yarn",
                           [](json& c) {
                             c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
                           }),
                "config.json", "'rope_scaling'");
  ExpectRefused(ConfigWith("no_hidden", [](json& c) { c.erase("hidden_size"); }), "config.json",
                "'hidden_size'");
  ExpectRefused(ConfigWith("text_hidden", [](json& c) { c["hidden_size"] = "128"; }), "config.json",
                "'hidden_size'");
  ExpectRefused(ConfigWith("huge_layers", [](json& c) { c["num_hidden_layers"] = 1u << 30; }),
                "config.json", "'num_hidden_layers'");
  ExpectRefused(ConfigWith("bias", [](json& c) { c["attention_bias"] = true; }), "config.json",
                "'attention_bias'");
  ExpectRefused(ConfigWith("gelu", [](json& c) { c["hidden_act"] = "gelu"; }), "config.json",
                "'hidden_act'");
  ExpectRefused(ConfigWith("bad_eps", [](json& c) { c["rms_norm_eps"] = -1; }), "config.json",
                "'rms_norm_eps'");
  // A config that disagrees with the weights: the tensor is named.
  ExpectRefused(ConfigWith("wrong_ffn", [](json& c) { c["intermediate_size"] = 383; }),
                "model.safetensors", "'model.layers.0.mlp.gate_proj.weight' has shape [384, 128]");
  ExpectRefused(ConfigWith("more_layers", [](json& c) { c["num_hidden_layers"] = 3; }),
                "model.safetensors", "'model.layers.2.input_layernorm.weight'");
}

TEST(HfMalformedTest, TokenizerProblemsNameTheFile) {
  REPRISE_REQUIRE_FIXTURES();
  std::string dir = testing::CopyHfFixture("no_tokenizer");
  std::filesystem::remove(dir + "/tokenizer.json");
  ExpectRefused(dir, "tokenizer.json", "missing");

  dir = testing::CopyHfFixture("unigram");
  json tokenizer = json::parse(testing::ReadText(dir + "/tokenizer.json"));
  tokenizer["model"]["type"] = "Unigram";
  testing::WriteText(dir + "/tokenizer.json", tokenizer.dump());
  ExpectRefused(dir, "tokenizer.json", "'model.type'");

  dir = testing::CopyHfFixture("token_id_out_of_range");
  tokenizer = json::parse(testing::ReadText(dir + "/tokenizer.json"));
  tokenizer["model"]["vocab"]["zzz"] = 5000;
  testing::WriteText(dir + "/tokenizer.json", tokenizer.dump());
  ExpectRefused(dir, "tokenizer.json", "'zzz' has id 5000");

  dir = testing::CopyHfFixture("unknown_bos");
  json config = json::parse(testing::ReadText(dir + "/tokenizer_config.json"));
  config["bos_token"] = "<s>";
  testing::WriteText(dir + "/tokenizer_config.json", config.dump());
  ExpectRefused(dir, "tokenizer_config.json", "'bos_token'");
}

TEST(HfMalformedTest, SafetensorsHeaderProblems) {
  REPRISE_REQUIRE_FIXTURES();
  const std::string file = "model.safetensors";
  std::string dir = testing::CopyHfFixture("header_too_long", false);
  testing::WriteRawSafetensors(dir + "/" + file, "{}", "", uint64_t{1} << 40);
  ExpectRefused(dir, file, "header length 1099511627776 is too long");

  dir = testing::CopyHfFixture("short_file", false);
  testing::WriteText(dir + "/" + file, "abc");
  ExpectRefused(dir, file, "no header length");

  dir = testing::CopyHfFixture("header_not_json", false);
  testing::WriteRawSafetensors(dir + "/" + file, "{\"a\": [1, 2", "", 11);
  ExpectRefused(dir, file, "bad JSON");

  dir = testing::CopyHfFixture("duplicate_key", false);
  testing::WriteRawSafetensors(
      dir + "/" + file,
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
      std::string(4, '\0'), 107);
  ExpectRefused(dir, file, "'x' appears twice");

  ExpectRefused(WeightsWith("out_of_range", [](auto& tensors) { tensors.back().bytes.resize(8); }),
                file, "'model.norm.weight'");
  ExpectRefused(WeightsWith("dtype_i64",
                            [](auto& tensors) {
                              tensors.back().dtype = "I64";
                              tensors.back().shape = {64};
                            }),
                file, "dtype 'I64'");
  ExpectRefused(WeightsWith("shape_vs_bytes", [](auto& tensors) { tensors.back().shape = {129}; }),
                file, "shape [129] of F32 needs 516 bytes, data_offsets give 512");
  ExpectRefused(WeightsWith("missing_norm",
                            [](auto& tensors) {
                              tensors.erase(std::find_if(
                                  tensors.begin(), tensors.end(),
                                  [](const auto& t) { return t.name == "model.norm.weight"; }));
                            }),
                file, "missing tensor 'model.norm.weight'");
  ExpectRefused(WeightsWith("extra_tensor",
                            [](auto& tensors) {
                              tensors.push_back({"model.layers.0.self_attn.q_proj.bias",
                                                 "F32",
                                                 {128},
                                                 std::string(512, '\0')});
                            }),
                file, "'model.layers.0.self_attn.q_proj.bias' is not part of");
}

// Offsets written by hand: past the data, and two tensors sharing bytes.
TEST(HfMalformedTest, OffsetsOutOfRangeOrOverlapping) {
  const std::string data(16, '\0');
  auto parse = [&](const std::string& header) {
    std::string image(8, '\0');
    for (int i = 0; i < 8; ++i)
      image[static_cast<size_t>(i)] = static_cast<char>(header.size() >> (8 * i));
    image += header + data;
    return testing::ErrorOf([&] {
      hf::ParseSafetensors(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "x.st");
    });
  };
  EXPECT_NE(parse(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})")
                .find("x.st: tensor 'a' has data_offsets [0, 32] outside the 16 data bytes"),
            std::string::npos);
  EXPECT_NE(parse(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})")
                .find("x.st: tensors 'a' and 'b' overlap"),
            std::string::npos);
  EXPECT_NE(parse(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})").find("x.st"),
            std::string::npos);
  EXPECT_NE(
      parse(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})")
          .find("too large"),
      std::string::npos);
  EXPECT_NE(parse(R"([1,2])").find("not a JSON object"), std::string::npos);
}

std::string ShardedCopy(const std::string& name) {
  std::string dir = testing::CopyHfFixture(name, false);
  std::vector<testing::TensorBytes> tensors = testing::FixtureTensors();
  json weight_map = json::object();
  for (const auto& tensor : tensors) weight_map[tensor.name] = "model-1.safetensors";
  testing::WriteSafetensors(dir + "/model-1.safetensors", tensors);
  testing::WriteText(dir + "/model.safetensors.index.json",
                     json{{"weight_map", weight_map}}.dump());
  return dir;
}

TEST(HfMalformedTest, IndexProblems) {
  REPRISE_REQUIRE_FIXTURES();
  const std::string index = "model.safetensors.index.json";
  std::string dir = ShardedCopy("shard_missing");
  std::filesystem::remove(dir + "/model-1.safetensors");
  ExpectRefused(dir, index, "shard 'model-1.safetensors'");

  dir = ShardedCopy("index_names_absent_tensor");
  json map = json::parse(testing::ReadText(dir + "/" + index));
  map["weight_map"]["model.layers.9.mlp.up_proj.weight"] = "model-1.safetensors";
  testing::WriteText(dir + "/" + index, map.dump());
  ExpectRefused(dir, "model-1.safetensors", "'model.layers.9.mlp.up_proj.weight' named in");

  dir = ShardedCopy("index_escapes_folder");
  map = json::parse(testing::ReadText(dir + "/" + index));
  map["weight_map"]["model.norm.weight"] = "../../etc/passwd";
  testing::WriteText(dir + "/" + index, map.dump());
  ExpectRefused(dir, index, "not a file in the folder");

  dir = ShardedCopy("index_bad_json");
  testing::WriteText(dir + "/" + index, "{\"weight_map\": ");
  ExpectRefused(dir, index, "bad JSON");

  dir = testing::CopyHfFixture("no_weights", false);
  ExpectRefused(dir, "no_weights", "no model.safetensors or model.safetensors.index.json");
}

}  // namespace
}  // namespace reprise
