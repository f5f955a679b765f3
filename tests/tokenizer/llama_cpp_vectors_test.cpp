// llama.cpp's tokenizer test vectors (fixtures/vocab/ggml-vocab-<name>.gguf.inp/.out): every
// case must give exactly the expected ids with add_special=false, parse_special=false.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "vocab_vectors.h"

namespace reprise {
namespace {

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Join(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    if (!out.empty()) {
      out += ' ';
    }
    out += std::to_string(id);
  }
  return out;
}

class TokenizerVectorsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerVectorsTest, AllCasesMatch) {
  REPRISE_REQUIRE_FIXTURES();
  const std::string name = GetParam();
  if (name == "bert-bge") {
    GTEST_SKIP() << "bert-bge is a WordPiece (tokenizer.ggml.model 'bert') vocabulary; "
                    "Reprise supports 'llama' and 'gpt2' only";
  }
  const std::string base = testing::Fixture("vocab/ggml-vocab-" + name + ".gguf");
  const gguf::GgufFile file = gguf::GgufFile::Open(base);
  const Tokenizer tokenizer = Tokenizer::FromGguf(file);
  const std::vector<std::string> cases = testing::ReadVectorCases(base + ".inp");
  const std::vector<std::vector<int32_t>> expected = testing::ReadVectorExpected(base + ".out");
  ASSERT_EQ(cases.size(), expected.size()) << "inputs and expected outputs differ in count";
  ASSERT_FALSE(cases.empty());

  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> actual = tokenizer.Encode(cases[i], false, false);
    if (actual == expected[i]) {
      ++passed;
    } else {
      ADD_FAILURE() << name << " case " << i << ": input \"" << Escape(cases[i]) << "\"\n"
                    << "  expected: " << Join(expected[i]) << "\n"
                    << "  actual:   " << Join(actual);
    }
  }
  RecordProperty("passed", static_cast<int>(passed));
  std::printf("%s: %zu/%zu cases pass\n", name.c_str(), passed, cases.size());
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerVectorsTest,
                         ::testing::Values("llama-bpe", "qwen2", "llama-spm", "phi-3", "gpt-2",
                                           "deepseek-coder", "deepseek-llm", "falcon", "mpt",
                                           "starcoder", "refact", "bert-bge"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace reprise
