// OutputText against a real vocabulary: stop strings that straddle tokens, the hold-back of a
// possible stop string, and deltas that never cut a UTF-8 character (SentencePiece byte tokens
// spell CJK characters one byte per token).
#include "engine/output_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace reprise {
namespace {

class OutputTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REPRISE_REQUIRE_FIXTURES();
    file_ = gguf::GgufFile::Open(testing::Fixture("vocab/ggml-vocab-llama-spm.gguf"));
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::FromGguf(file_));
  }

  // Pushes the tokens of `text` one by one until a stop string; returns each token's delta.
  std::vector<std::string> Stream(OutputText& output, const std::string& text, bool* stopped) {
    std::vector<std::string> deltas;
    *stopped = false;
    for (int32_t token : tokenizer_->Encode(text, false, false)) {
      if (output.Push(token)) {
        *stopped = true;
        deltas.push_back(output.TakeDelta(true));
        return deltas;
      }
      deltas.push_back(output.TakeDelta(false));
    }
    output.Flush();
    deltas.push_back(output.TakeDelta(true));
    return deltas;
  }

  static std::string Join(const std::vector<std::string>& parts) {
    std::string all;
    for (const auto& part : parts) all += part;
    return all;
  }

  // Whether `text` is whole UTF-8 characters (no sequence cut at either end).
  static bool WholeCharacters(const std::string& text) {
    size_t i = 0;
    while (i < text.size()) {
      auto lead = static_cast<unsigned char>(text[i]);
      size_t length = lead < 0x80           ? 1
                      : (lead >> 5) == 0x6  ? 2
                      : (lead >> 4) == 0xE  ? 3
                      : (lead >> 3) == 0x1E ? 4
                                            : 0;
      if (length == 0 || i + length > text.size()) return false;
      for (size_t k = 1; k < length; ++k) {
        if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
      }
      i += length;
    }
    return true;
  }

  gguf::GgufFile file_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(OutputTextTest, WithoutStopStringsStreamsEveryByteAsItCompletes) {
  const std::string text = "Hello world, this is plain text.";
  OutputText output(*tokenizer_, {});
  bool stopped = false;
  std::vector<std::string> deltas = Stream(output, text, &stopped);
  EXPECT_FALSE(stopped);
  EXPECT_EQ(Join(deltas), " " + text);  // SentencePiece pieces keep their leading space
  EXPECT_EQ(output.text(), " " + text);
  EXPECT_TRUE(deltas.back().empty());  // nothing was held back
}

TEST_F(OutputTextTest, StopStringAcrossTokensCutsTheText) {
  OutputText output(*tokenizer_, {"orld, th"});
  bool stopped = false;
  std::vector<std::string> deltas = Stream(output, "Hello world, this is plain text.", &stopped);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(output.text(), " Hello w");
  EXPECT_EQ(Join(deltas), " Hello w");
}

TEST_F(OutputTextTest, HoldsBackWhatCouldStillBecomeAStopString) {
  // "xyz" never appears: every delta but the last holds back two bytes, then all of it comes.
  const std::string stop = "xyz";
  OutputText output(*tokenizer_, {stop});
  size_t streamed = 0;
  for (int32_t token : tokenizer_->Encode("one two three four", false, false)) {
    ASSERT_FALSE(output.Push(token));
    streamed += output.TakeDelta(false).size();
    EXPECT_EQ(streamed, output.text().size() >= 2 ? output.text().size() - 2 : 0);
  }
  EXPECT_EQ(output.TakeDelta(true), output.text().substr(streamed));
}

TEST_F(OutputTextTest, EarliestOfSeveralStopStringsWins) {
  // Both appear within one token's text; the later-listed one comes first in the text.
  OutputText output(*tokenizer_, {"ld", "wor"});
  bool stopped = false;
  Stream(output, "Hello world", &stopped);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(output.text(), " Hello ");
}

// Long stop strings over a long run that almost matches them: each token's search looks only
// where a match could end in its new bytes, for each stop string, so the work per token grows
// with the stop strings' lengths, not with their product. Searching every stop string from
// where the longest could start compared about 10^9 bytes per token at half these sizes (189 s
// for this test then); at these it would run past the test's time limit.
TEST_F(OutputTextTest, LongStopStringsOverALongRun) {
  const std::string run(240'000, 'a');
  OutputText output(*tokenizer_, {std::string(120'000, 'a') + "b", std::string(60'000, 'a') + "c"});
  bool stopped = false;
  Stream(output, run + "b", &stopped);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(output.text(), " " + std::string(120'000, 'a'));
}

TEST_F(OutputTextTest, EmptyStopStringsAreIgnored) {
  OutputText output(*tokenizer_, {"", ""});
  bool stopped = false;
  std::vector<std::string> deltas = Stream(output, "Hello", &stopped);
  EXPECT_FALSE(stopped);
  EXPECT_EQ(Join(deltas), " Hello");
}

TEST_F(OutputTextTest, DeltasNeverCutAUtf8Character) {
  // CJK characters the vocabulary lacks are spelled as byte tokens; a one-byte stop string
  // that never matches keeps nothing back, a four-byte one three bytes (mid-character).
  const std::string text = "Tokyo 東京 and 大阪 é ü";
  for (const std::vector<std::string>& stops :
       std::vector<std::vector<std::string>>{{}, {"#"}, {"####"}}) {
    OutputText output(*tokenizer_, stops);
    bool stopped = false;
    std::vector<std::string> deltas = Stream(output, text, &stopped);
    EXPECT_FALSE(stopped);
    for (const auto& delta : deltas) EXPECT_TRUE(WholeCharacters(delta)) << delta;
    EXPECT_EQ(Join(deltas), " " + text);
  }
}

TEST_F(OutputTextTest, StopStringInsideAMultiByteRun) {
  OutputText output(*tokenizer_, {"京"});
  bool stopped = false;
  std::vector<std::string> deltas = Stream(output, "Tokyo 東京 and more", &stopped);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(output.text(), " Tokyo 東");
  EXPECT_EQ(Join(deltas), " Tokyo 東");
}

TEST_F(OutputTextTest, TakeTextMovesTheWholeText) {
  OutputText output(*tokenizer_, {"zz"});
  bool stopped = false;
  Stream(output, "abc", &stopped);
  EXPECT_EQ(output.TakeText(), " abc");
}

}  // namespace
}  // namespace reprise
