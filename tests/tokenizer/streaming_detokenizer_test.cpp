// StreamingDetokenizer: pieces are always valid UTF-8 and add up to the decoded text.
#include "tokenizer/streaming_detokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "test_support.h"
#include "tokenizer/unicode.h"
#include "vocab_cache.h"

namespace reprise {
namespace {

using ::reprise::testing::VocabTokenizer;

TEST(TokenizerStreaming, HoldsBytesOfASplitCharacter) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-spm");
  // The llama has no token in this vocabulary: four byte tokens.
  const std::vector<int32_t> ids = {*tokenizer.FindToken("<0xF0>"), *tokenizer.FindToken("<0x9F>"),
                                    *tokenizer.FindToken("<0xA6>"), *tokenizer.FindToken("<0x99>")};
  StreamingDetokenizer stream(tokenizer);
  EXPECT_EQ(stream.Push(ids[0]), "");
  EXPECT_EQ(stream.Push(ids[1]), "");
  EXPECT_EQ(stream.Push(ids[2]), "");
  EXPECT_EQ(stream.Push(ids[3]), "🦙");
  EXPECT_EQ(stream.Push(*tokenizer.FindToken("▁ok")), " ok");
  EXPECT_EQ(stream.Flush(), "");
}

TEST(TokenizerStreaming, FlushReplacesAnUnfinishedCharacter) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-spm");
  StreamingDetokenizer stream(tokenizer);
  EXPECT_EQ(stream.Push(*tokenizer.FindToken("▁a")), " a");
  EXPECT_EQ(stream.Push(*tokenizer.FindToken("<0xF0>")), "");
  EXPECT_EQ(stream.Push(*tokenizer.FindToken("<0x9F>")), "");
  const std::string rest = stream.Flush();
  EXPECT_FALSE(rest.empty());
  EXPECT_TRUE(unicode::IsValidUtf8(rest));
  EXPECT_EQ(stream.Flush(), "");  // reset
}

TEST(TokenizerStreaming, InvalidBytesBecomeReplacementCharacters) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-spm");
  StreamingDetokenizer stream(tokenizer);
  // A stray continuation byte can never complete: it is replaced at once.
  EXPECT_EQ(stream.Push(*tokenizer.FindToken("<0x80>")), "\xEF\xBF\xBD");
  // A lead byte followed by a non-continuation byte.
  EXPECT_EQ(stream.Push(*tokenizer.FindToken("<0xC3>")), "");
  EXPECT_EQ(stream.Push(*tokenizer.FindToken("<0x41>")),
            "\xEF\xBF\xBD"
            "A");
}

TEST(TokenizerStreaming, ControlTokensPrintNothing) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-bpe");
  StreamingDetokenizer stream(tokenizer);
  EXPECT_EQ(stream.Push(9906), "Hello");
  EXPECT_EQ(stream.Push(128009), "");  // <|eot_id|>
  EXPECT_THROW(stream.Push(-5), Error);
}

// Feeding the ids of a text one by one: every piece is valid UTF-8 and together they are the
// decoded text.
class TokenizerStreamingVocabs : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerStreamingVocabs, PiecesAreValidAndAddUp) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer(GetParam());
  const std::vector<std::string> texts = {
      "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ 🦙🦙",
      "កាន់តែពិសេសអាចខលចេញ",
      "我想在apple工作1314151天～ 👩🏽‍💻",
      "plain ascii text\nwith lines",
  };
  for (const std::string& text : texts) {
    // With BOS first, Decode keeps the SPM space prefix, as the stream does.
    const std::vector<int32_t> ids = tokenizer.Encode(text, /*add_special=*/true, false);
    StreamingDetokenizer stream(tokenizer);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = stream.Push(id);
      EXPECT_TRUE(unicode::IsValidUtf8(piece)) << "token " << id << " of: " << text;
      streamed += piece;
    }
    streamed += stream.Flush();
    EXPECT_EQ(streamed, tokenizer.Decode(ids)) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerStreamingVocabs,
                         ::testing::Values("llama-bpe", "qwen2", "llama-spm", "gpt-2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace reprise
