// Tokenizer behaviour beyond the llama.cpp vectors: special tokens, BOS/EOS, decoding, round
// trips, the model fixtures, and errors for vocabularies we cannot handle.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_support.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"
#include "vocab_cache.h"

namespace reprise {
namespace {

using ::reprise::testing::FixtureTokenizer;
using ::reprise::testing::VocabTokenizer;
using Ids = std::vector<int32_t>;

TEST(TokenizerModels, TinyStoriesAddsBos) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = FixtureTokenizer("models/TinyStories-656K-f32.gguf");
  EXPECT_EQ(tokenizer.model_name(), "llama");
  EXPECT_TRUE(tokenizer.add_bos());
  const Ids ids = tokenizer.Encode("Once upon a time", true, false);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.front(), tokenizer.bos_id());
  // Without BOS the SPM space prefix is dropped again on decoding; after a BOS it stays (as in
  // llama.cpp's detokenize).
  EXPECT_EQ(tokenizer.Decode(tokenizer.Encode("Once upon a time", false, false)),
            "Once upon a time");
  EXPECT_EQ(tokenizer.Decode(ids), " Once upon a time");
  EXPECT_TRUE(tokenizer.IsEndOfGeneration(tokenizer.eos_id()));
}

TEST(TokenizerModels, Stories260K) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = FixtureTokenizer("models/stories260K.gguf");
  EXPECT_EQ(tokenizer.vocab_size(), 512);
  EXPECT_EQ(tokenizer.Encode("Once upon a time", true, false), (Ids{1, 403, 407, 261, 378}));
  EXPECT_EQ(tokenizer.TokenToPiece(403), " Once");
  // Characters outside the 512-token vocabulary fall back to byte tokens and come back intact.
  const std::string text = "Tom saw a dragon 🐉 near the café.";
  EXPECT_EQ(tokenizer.Decode(tokenizer.Encode(text, false, false)), text);
  EXPECT_EQ(tokenizer.Decode(tokenizer.Encode(text, true, false), {.remove_special = true}),
            " " + text);
}

TEST(TokenizerSpecial, ControlTokensOnlyWithParseSpecial) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-bpe");
  const std::string text = "<|start_header_id|>user<|end_header_id|>";
  EXPECT_EQ(tokenizer.Encode(text, false, true), (Ids{128006, 882, 128007}));
  const Ids plain = tokenizer.Encode(text, false, false);
  EXPECT_GT(plain.size(), 3u);
  for (int32_t id : plain) {
    EXPECT_FALSE(tokenizer.IsControl(id)) << id;
  }
  EXPECT_EQ(tokenizer.Decode(plain), text);
}

TEST(TokenizerSpecial, UserDefinedTokensAlwaysMatched) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("qwen2");
  const Ids ids = tokenizer.Encode("<think>hi</think>", false, false);
  EXPECT_EQ(ids, (Ids{151667, 6023, 151668}));
  EXPECT_FALSE(tokenizer.IsControl(151667));
  // USER_DEFINED tokens print their text.
  EXPECT_EQ(tokenizer.Decode(ids), "<think>hi</think>");
}

TEST(TokenizerSpecial, BosAndEos) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& llama3 = VocabTokenizer("llama-bpe");
  EXPECT_EQ(llama3.bos_id(), 128000);
  EXPECT_EQ(llama3.eos_id(), 128001);
  EXPECT_TRUE(llama3.add_bos());  // llama.cpp's default for the llama-bpe pre-tokenizer
  EXPECT_FALSE(llama3.add_eos());
  EXPECT_EQ(llama3.Encode("Hello world", true, false), (Ids{128000, 9906, 1917}));
  EXPECT_EQ(llama3.Encode("", true, false), (Ids{128000}));
  EXPECT_EQ(llama3.Encode("", false, false), Ids{});

  const Tokenizer& qwen = VocabTokenizer("qwen2");
  EXPECT_FALSE(qwen.add_bos());  // tokenizer.ggml.add_bos_token = false
  EXPECT_EQ(qwen.Encode("Hello world", true, false), qwen.Encode("Hello world", false, false));
}

TEST(TokenizerSpecial, EndOfGeneration) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& llama3 = VocabTokenizer("llama-bpe");
  for (const char* text : {"<|end_of_text|>", "<|eot_id|>"}) {
    const auto id = llama3.FindToken(text);
    ASSERT_TRUE(id.has_value()) << text;
    EXPECT_TRUE(llama3.IsEndOfGeneration(*id)) << text;
    EXPECT_TRUE(llama3.IsControl(*id)) << text;
  }
  EXPECT_FALSE(llama3.IsEndOfGeneration(*llama3.FindToken("<|start_header_id|>")));
  EXPECT_FALSE(llama3.IsEndOfGeneration(9906));

  const Tokenizer& qwen = VocabTokenizer("qwen2");
  EXPECT_TRUE(qwen.IsEndOfGeneration(*qwen.FindToken("<|im_end|>")));
  EXPECT_TRUE(qwen.IsEndOfGeneration(*qwen.FindToken("<|endoftext|>")));
  EXPECT_FALSE(qwen.IsEndOfGeneration(*qwen.FindToken("<|im_start|>")));

  const Tokenizer& phi3 = VocabTokenizer("phi-3");
  EXPECT_TRUE(phi3.IsEndOfGeneration(*phi3.FindToken("<|end|>")));
  EXPECT_TRUE(phi3.IsEndOfGeneration(phi3.eos_id()));
}

TEST(TokenizerDecode, ControlTokensPrintNothingByDefault) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-bpe");
  const Ids ids = tokenizer.Encode("<|begin_of_text|>Hi<|eot_id|>", false, true);
  EXPECT_EQ(tokenizer.Decode(ids), "Hi");
  EXPECT_EQ(tokenizer.Decode(ids, {.unparse_special = true}), "<|begin_of_text|>Hi<|eot_id|>");
  EXPECT_EQ(tokenizer.TokenToPiece(128009), "<|eot_id|>");
  EXPECT_THROW(tokenizer.Decode(Ids{-1}), Error);
  EXPECT_THROW(tokenizer.Decode(Ids{tokenizer.vocab_size()}), Error);
  EXPECT_THROW(tokenizer.TokenToPiece(tokenizer.vocab_size()), Error);
}

TEST(TokenizerDecode, SpmPiecesAndLeadingSpace) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-spm");
  const Ids ids = tokenizer.Encode("Hello world", false, false);
  EXPECT_EQ(ids, (Ids{15043, 3186}));
  EXPECT_EQ(tokenizer.TokenToPiece(15043), " Hello");
  EXPECT_EQ(tokenizer.Decode(ids), "Hello world");
  // A byte token gives its byte.
  const auto byte_token = tokenizer.FindToken("<0x0A>");
  ASSERT_TRUE(byte_token.has_value());
  EXPECT_EQ(tokenizer.TokenToPiece(*byte_token), "\n");
}

// Texts with emoji, CJK, combining marks, tabs and odd spacing survive Encode then Decode.
class TokenizerRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerRoundTrip, DecodeEncodeIsIdentity) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer(GetParam());
  const std::vector<std::string> texts = {
      "Hello, world!",
      "  leading and trailing spaces  ",
      "tabs\tand\nnew\r\nlines\n\n\n",
      "emoji: 🦙🚀 😶‍🌫️ 👩🏽‍💻 ✅",
      "中文：我想在apple工作1314151天～",
      "日本語のテキストと한국어 텍스트",
      "Ελληνικά, русский, עברית, العربية",
      "combining: e\u0301 a\u0308 n\u0303",
      "numbers 3.14159 1,000,000 ٣٤٥",
      "code: for (int i = 0; i < n; ++i) { x += a[i]; }",
      "I've been 'told he's there, 'RE you sure?",
      "<|im_start|> <think> looks special but is text",
      "",
  };
  for (const std::string& text : texts) {
    EXPECT_EQ(tokenizer.Decode(tokenizer.Encode(text, false, false)), text) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerRoundTrip,
                         ::testing::Values("llama-bpe", "qwen2", "llama-spm", "phi-3", "gpt-2",
                                           "deepseek-coder", "deepseek-llm", "falcon", "mpt",
                                           "starcoder", "refact", "gpt-neox", "baichuan"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

TEST(TokenizerEncode, InvalidUtf8BecomesReplacementCharacter) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-bpe");
  // As llama.cpp: a byte that is not valid UTF-8 is read as U+FFFD.
  EXPECT_EQ(tokenizer.Decode(tokenizer.Encode("a\xFF"
                                              "b",
                                              false, false)),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(TokenizerEncode, ByteWithoutATokenIsDroppedAsLlamaCppDoes) {
  REPRISE_REQUIRE_FIXTURES();
  // StarCoder's byte-level vocabulary has no token for the byte 0xF1 (the lead byte of planes
  // 4-7): encoding keeps the bytes that are tokens and drops that one, as llama.cpp does. The
  // fuzzer found this when it assumed every byte-level vocabulary round-trips.
  const Tokenizer& starcoder = VocabTokenizer("starcoder");
  EXPECT_EQ(starcoder.vocab().MissingByteTokens(), 1);
  EXPECT_EQ(starcoder.Decode(starcoder.Encode("r\xF1\x91\x93\x96"
                                              "ei",
                                              false, false)),
            "r\x91\x93\x96"
            "ei");
  for (const char* name : {"gpt-2", "llama-bpe", "qwen2"}) {
    const Tokenizer& tokenizer = VocabTokenizer(name);
    EXPECT_EQ(tokenizer.vocab().MissingByteTokens(), 0) << name;
    EXPECT_EQ(tokenizer.Decode(tokenizer.Encode("r\xF1\x91\x93\x96"
                                                "ei",
                                                false, false)),
              "r\xF1\x91\x93\x96"
              "ei")
        << name;
  }
}

class TokenizerErrors : public ::testing::Test {
 protected:
  void SetUp() override { path_ = testing::ScratchPath("tokenizer_test.gguf"); }
  void TearDown() override { std::filesystem::remove(path_); }

  // A tiny byte-level vocabulary: the 256 byte characters plus "ab".
  gguf::GgufWriter TinyBpe(const std::string& pre) {
    gguf::GgufWriter writer;
    writer.SetString("general.architecture", "llama");
    writer.SetString("tokenizer.ggml.model", "gpt2");
    if (!pre.empty()) writer.SetString("tokenizer.ggml.pre", pre);
    std::vector<std::string> tokens;
    for (int byte = 0; byte < 256; ++byte) {
      tokens.push_back(unicode::EncodeUtf8(unicode::ByteToCodepoint(static_cast<uint8_t>(byte))));
    }
    tokens.push_back("ab");
    writer.SetStringArray("tokenizer.ggml.tokens", tokens);
    writer.SetStringArray("tokenizer.ggml.merges", {"a b"});
    return writer;
  }

  Tokenizer Load() { return Tokenizer::FromGguf(gguf::GgufFile::Open(path_)); }

  std::string path_;
};

TEST_F(TokenizerErrors, TinyVocabularyWorks) {
  TinyBpe("gpt-2").Write(path_);
  const Tokenizer tokenizer = Load();
  EXPECT_EQ(tokenizer.Encode("ab", false, false), (Ids{256}));
  EXPECT_EQ(tokenizer.Encode("ba", false, false), (Ids{'b', 'a'}));  // token id == byte value
  EXPECT_EQ(tokenizer.Encode(" \n", false, false), (Ids{' ', '\n'}));
  EXPECT_EQ(tokenizer.Decode(Ids{256, ' ', '\n'}), "ab \n");
}

TEST_F(TokenizerErrors, UnknownPreTokenizer) {
  TinyBpe("no-such-pre").Write(path_);
  try {
    Load();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-pre"), std::string::npos) << e.what();
  }
}

TEST_F(TokenizerErrors, MissingPreTokenizerUsesDefault) {
  TinyBpe("").Write(path_);
  EXPECT_EQ(Load().Encode("ab", false, false), (Ids{256}));
}

TEST_F(TokenizerErrors, MissingMerges) {
  gguf::GgufWriter writer;
  writer.SetString("tokenizer.ggml.model", "gpt2");
  writer.SetStringArray("tokenizer.ggml.tokens", {"a", "b"});
  writer.Write(path_);
  EXPECT_THROW(Load(), Error);
}

TEST_F(TokenizerErrors, NoTokenizer) {
  gguf::GgufWriter writer;
  writer.SetString("general.architecture", "llama");
  writer.Write(path_);
  EXPECT_THROW(Load(), Error);
}

TEST(TokenizerErrorsFixtures, WordPieceIsUnsupported) {
  REPRISE_REQUIRE_FIXTURES();
  const gguf::GgufFile file =
      gguf::GgufFile::Open(::reprise::testing::Fixture("vocab/ggml-vocab-bert-bge.gguf"));
  try {
    Tokenizer::FromGguf(file);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported tokenizer model 'bert'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace reprise
