// tokenizer.json through the GGUF tokenizer: the fixture folder gives the ids of the GGUF made
// from it, and tokenizer.json files written from llama.cpp's test vocabularies (SentencePiece-
// style and byte-level BPE) reproduce llama.cpp's test vectors.
#include "hf/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <tuple>

#include "gguf/gguf_file.h"
#include "hf/model_source.h"
#include "hf_test_support.h"
#include "tokenizer/tokenizer.h"
#include "vocab_vectors.h"

namespace reprise {
namespace {

using nlohmann::json;

const std::vector<std::string>& Texts() {
  static const std::vector<std::string> texts = {
      "",
      "Once upon a time",
      " Once upon a time",
      "Once upon a time, there was a little girl named Lily. She loved to play outside.",
      "  two  spaces,\tand a tab\nand lines\n\n",
      "\"Hello!\" said Tom. \"Let's go to the park.\"",
      "<|start_story|>Once upon a time<|end_story|>",
      "The end.<|end_story|> <|start_story|> again",
      "numbers 1234567890 and 3.14",
      "caf\xc3\xa9 na\xc3\xafve \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 emoji",
      "<unk> is text here",
      "\xe2\x96\x81 a literal U+2581",
  };
  return texts;
}

void ExpectSameIds(const Tokenizer& mine, const Tokenizer& reference) {
  ASSERT_EQ(mine.vocab_size(), reference.vocab_size());
  EXPECT_EQ(mine.bos_id(), reference.bos_id());
  EXPECT_EQ(mine.eos_id(), reference.eos_id());
  EXPECT_EQ(mine.add_bos(), reference.add_bos());
  EXPECT_EQ(mine.add_eos(), reference.add_eos());
  for (const std::string& text : Texts()) {
    for (bool add_special : {false, true}) {
      for (bool parse_special : {false, true}) {
        std::vector<int32_t> ids = mine.Encode(text, add_special, parse_special);
        EXPECT_EQ(ids, reference.Encode(text, add_special, parse_special))
            << "\"" << text << "\" add_special " << add_special << " parse_special "
            << parse_special;
        EXPECT_EQ(mine.Decode(ids), reference.Decode(ids)) << text;
      }
    }
    EXPECT_EQ(mine.EncodePrompt(text, true), reference.EncodePrompt(text, true)) << text;
  }
}

TEST(HfTokenizerTest, FixtureFolderGivesTheGgufIds) {
  REPRISE_REQUIRE_FIXTURES();
  const gguf::GgufFile folder = OpenModelFile(testing::HfFixture());
  const gguf::GgufFile gguf = gguf::GgufFile::Open(testing::GgufFixture());
  const Tokenizer mine = Tokenizer::FromGguf(folder);
  const Tokenizer reference = Tokenizer::FromGguf(gguf);
  EXPECT_EQ(mine.model_name(), "llama");
  ExpectSameIds(mine, reference);
  EXPECT_EQ(mine.Encode("Once upon a time", true, false),
            (std::vector<int32_t>{1, 80, 147, 201, 282, 57}));
}

// tokenizer_config.json as Hugging Face writes it in its several forms.
Tokenizer FolderTokenizer(const std::string& name, const std::function<void(json&)>& change,
                          const std::string& jinja = "") {
  std::string dir = testing::CopyHfFixture(name);
  json config = json::parse(testing::ReadText(dir + "/tokenizer_config.json"));
  change(config);
  testing::WriteText(dir + "/tokenizer_config.json", config.dump());
  if (!jinja.empty()) testing::WriteText(dir + "/chat_template.jinja", jinja);
  return Tokenizer::FromGguf(OpenModelFile(dir));
}

TEST(HfTokenizerTest, ChatTemplateAndSpecialTokensFromTokenizerConfig) {
  REPRISE_REQUIRE_FIXTURES();
  const std::string text = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";
  EXPECT_EQ(FolderTokenizer("template_string", [&](json& c) { c["chat_template"] = text; })
                .chat_template(),
            text);
  EXPECT_EQ(FolderTokenizer("template_named",
                            [&](json& c) {
                              c["chat_template"] = {{{"name", "tool_use"}, {"template", "tools"}},
                                                    {{"name", "default"}, {"template", text}}};
                            })
                .chat_template(),
            text);
  EXPECT_EQ(FolderTokenizer(
                "template_file", [&](json& c) { c["chat_template"] = "other"; }, text)
                .chat_template(),
            text);
  std::string message = testing::ErrorOf(
      [] { FolderTokenizer("template_number", [](json& c) { c["chat_template"] = 3; }); });
  EXPECT_NE(message.find("tokenizer_config.json: field 'chat_template' is number"),
            std::string::npos)
      << message;

  // Special tokens as objects, add_bos_token off, and add_bos_token absent: the post-processor
  // (which prepends <|start_story|>) decides.
  Tokenizer objects = FolderTokenizer("special_objects", [](json& c) {
    c["bos_token"] = {{"content", "<|end_story|>"}, {"lstrip", false}};
    c["eos_token"] = {{"content", "<|start_story|>"}};
    c["add_bos_token"] = false;
  });
  EXPECT_EQ(objects.bos_id(), 2);
  EXPECT_EQ(objects.eos_id(), 1);
  EXPECT_FALSE(objects.add_bos());
  EXPECT_TRUE(FolderTokenizer("add_bos_from_post_processor", [](json& c) {
                c.erase("add_bos_token");
              }).add_bos());
  EXPECT_FALSE(FolderTokenizer("add_bos_other_token", [](json& c) {
                 c.erase("add_bos_token");
                 c["bos_token"] = "<unk>";
               }).add_bos());
}

// --- tokenizer.json written from a GGUF vocabulary, as Hugging Face stores that tokenizer ---

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  std::vector<double> scores;
  std::vector<std::string> merges;
};

Vocabulary ReadVocabulary(const gguf::GgufFile& file) {
  Vocabulary vocabulary;
  vocabulary.tokens = file.GetArray("tokenizer.ggml.tokens").strings;
  const gguf::ArrayValue& types = file.GetArray("tokenizer.ggml.token_type");
  vocabulary.types = types.integers;
  if (const gguf::ArrayValue* scores = file.FindArray("tokenizer.ggml.scores")) {
    vocabulary.scores = scores->floats;
  }
  if (const gguf::ArrayValue* merges = file.FindArray("tokenizer.ggml.merges")) {
    vocabulary.merges = merges->strings;
  }
  return vocabulary;
}

// SentencePiece vocabularies carry scores, tokenizer.json carries merges: as Hugging Face's
// converter does, every split of a piece into two pieces is a merge, ranked by the merged
// piece's score (then by the halves' ids).
std::vector<std::string> MergesFromScores(const Vocabulary& vocabulary) {
  std::map<std::string, int64_t> ids;
  for (size_t i = 0; i < vocabulary.tokens.size(); ++i) {
    if (vocabulary.types[i] == 1) ids[vocabulary.tokens[i]] = static_cast<int64_t>(i);
  }
  std::vector<std::tuple<double, int64_t, int64_t, std::string>> ranked;
  for (const auto& [piece, id] : ids) {
    for (size_t cut = 1; cut < piece.size(); ++cut) {
      if ((static_cast<unsigned char>(piece[cut]) & 0xC0) == 0x80) continue;  // inside a char
      auto left = ids.find(piece.substr(0, cut));
      auto right = ids.find(piece.substr(cut));
      if (left == ids.end() || right == ids.end()) continue;
      ranked.emplace_back(-vocabulary.scores[static_cast<size_t>(id)], left->second, right->second,
                          left->first + " " + right->first);
    }
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> merges;
  for (auto& entry : ranked) merges.push_back(std::get<3>(entry));
  return merges;
}

// Writes tokenizer.json and tokenizer_config.json for `file`'s vocabulary into a fresh folder.
std::string WriteTokenizerJson(const gguf::GgufFile& file, const std::string& name,
                               const json& pre_tokenizer) {
  const Vocabulary vocabulary = ReadVocabulary(file);
  const bool spm = file.GetString("tokenizer.ggml.model") == "llama";
  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < vocabulary.tokens.size(); ++i) {
    vocab[vocabulary.tokens[i]] = i;
    const int64_t type = vocabulary.types[i];
    if (type == 3 || type == 4 || (type == 2 && !spm)) {
      added.push_back({{"id", i}, {"content", vocabulary.tokens[i]}, {"special", type != 4}});
    }
  }
  json model = {{"type", "BPE"},
                {"vocab", vocab},
                {"merges", spm ? MergesFromScores(vocabulary) : vocabulary.merges},
                {"byte_fallback", spm}};
  json tokenizer = {{"version", "1.0"}, {"added_tokens", added}, {"model", model}};
  if (spm) {
    model["unk_token"] = "<unk>";
    tokenizer["model"] = model;
    tokenizer["normalizer"] = {
        {"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "\xe2\x96\x81"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xe2\x96\x81"}}}}};
    tokenizer["pre_tokenizer"] = nullptr;
    tokenizer["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}}}};
  } else {
    tokenizer["pre_tokenizer"] = pre_tokenizer;
    tokenizer["decoder"] = {{"type", "ByteLevel"}};
  }
  json config = json::object();
  auto text_of = [&](const char* key) {
    int64_t id = file.GetInt(key, -1);
    return id >= 0 ? json(vocabulary.tokens[static_cast<size_t>(id)]) : json(nullptr);
  };
  config["bos_token"] = text_of("tokenizer.ggml.bos_token_id");
  config["eos_token"] = text_of("tokenizer.ggml.eos_token_id");
  if (const gguf::Value* add = file.Find("tokenizer.ggml.add_bos_token")) {
    config["add_bos_token"] = std::get<bool>(add->data);
  }
  std::string dir = (testing::ScratchDir() / name).string();
  std::filesystem::create_directories(dir);
  testing::WriteText(dir + "/tokenizer.json", tokenizer.dump());
  testing::WriteText(dir + "/tokenizer_config.json", config.dump());
  return dir;
}

json Split(const std::string& regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

class HfTokenizerVectorsTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(HfTokenizerVectorsTest, TokenizerJsonReproducesLlamaCppVectors) {
  REPRISE_REQUIRE_FIXTURES();
  const auto& [name, pre] = GetParam();
  const std::string base = testing::Fixture("vocab/ggml-vocab-" + name + ".gguf");
  const gguf::GgufFile gguf = gguf::GgufFile::Open(base);
  json pre_tokenizer;
  if (pre == "llama3") {
    pre_tokenizer = Split(
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  } else if (pre == "qwen2") {
    pre_tokenizer = Split(
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  } else if (pre == "gpt2") {
    pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  } else if (pre == "starcoder") {
    pre_tokenizer = {{"type", "Sequence"},
                     {"pretokenizers",
                      {{{"type", "Digits"}, {"individual_digits", true}},
                       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  }
  const std::string dir = WriteTokenizerJson(gguf, "tokenizer_" + name, pre_tokenizer);
  hf::Metadata metadata;
  const int64_t vocab_size = static_cast<int64_t>(gguf.GetArray("tokenizer.ggml.tokens").size());
  hf::ReadTokenizer(dir, json::object(), vocab_size, metadata);
  hf::PutString(metadata, "general.name", name);
  const gguf::GgufFile folder = gguf::GgufFile::Assemble(dir, "", std::move(metadata), {}, nullptr);
  const Tokenizer mine = Tokenizer::FromGguf(folder);
  const Tokenizer reference = Tokenizer::FromGguf(gguf);

  const std::vector<std::string> cases = testing::ReadVectorCases(base + ".inp");
  const std::vector<std::vector<int32_t>> expected = testing::ReadVectorExpected(base + ".out");
  ASSERT_EQ(cases.size(), expected.size());
  ASSERT_FALSE(cases.empty());
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<int32_t> ids = mine.Encode(cases[i], false, false);
    EXPECT_EQ(ids, expected[i]) << name << " case " << i << ": \"" << cases[i] << "\"";
    passed += ids == expected[i];
  }
  std::printf("%s (tokenizer.json): %zu/%zu llama.cpp cases pass\n", name.c_str(), passed,
              cases.size());
  EXPECT_EQ(mine.add_bos(), reference.add_bos());
  EXPECT_EQ(mine.bos_id(), reference.bos_id());
  EXPECT_EQ(mine.eos_id(), reference.eos_id());
  for (const std::string& text : Texts()) {
    EXPECT_EQ(mine.Encode(text, true, true), reference.Encode(text, true, true)) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, HfTokenizerVectorsTest,
                         ::testing::Values(std::tuple{"llama-spm", ""},
                                           std::tuple{"llama-bpe", "llama3"},
                                           std::tuple{"qwen2", "qwen2"},
                                           std::tuple{"gpt-2", "gpt2"},
                                           std::tuple{"starcoder", "starcoder"}),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace reprise
