// Pre-tokenizer splits on small inputs, one family at a time, and the Unicode helpers under them.
#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/unicode.h"

namespace reprise {
namespace {

std::vector<std::string> Split(PreTokenizerKind kind, const std::string& text) {
  const std::vector<uint32_t> codepoints = unicode::DecodeUtf8(text);
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t length : SplitWords(kind, codepoints)) {
    std::string word;
    for (size_t i = start; i < start + length; ++i) {
      unicode::AppendUtf8(codepoints[i], word);
    }
    words.push_back(word);
    start += length;
  }
  EXPECT_EQ(start, codepoints.size());
  return words;
}

using Words = std::vector<std::string>;

TEST(TokenizerPreTokenizer, Names) {
  EXPECT_EQ(ParsePreTokenizer("llama-bpe"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(ParsePreTokenizer("llama3"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(ParsePreTokenizer("qwen2"), PreTokenizerKind::kQwen2);
  EXPECT_EQ(ParsePreTokenizer("gpt-2"), PreTokenizerKind::kGpt2);
  EXPECT_EQ(ParsePreTokenizer("mpt"), PreTokenizerKind::kGpt2);
  EXPECT_EQ(ParsePreTokenizer("refact"), PreTokenizerKind::kStarcoder);
  EXPECT_EQ(ParsePreTokenizer("command-r"), PreTokenizerKind::kStarcoder);
  EXPECT_EQ(ParsePreTokenizer("poro-chat"), PreTokenizerKind::kBloom);
  EXPECT_EQ(ParsePreTokenizer("nonsense"), std::nullopt);
}

TEST(TokenizerPreTokenizer, Llama3) {
  EXPECT_EQ(Split(PreTokenizerKind::kLlama3, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(Split(PreTokenizerKind::kLlama3, "12345"), (Words{"123", "45"}));
  EXPECT_EQ(Split(PreTokenizerKind::kLlama3, "I'M here"), (Words{"I", "'M", " here"}));
  EXPECT_EQ(Split(PreTokenizerKind::kLlama3, "a  b"), (Words{"a", " ", " b"}));
  EXPECT_EQ(Split(PreTokenizerKind::kLlama3, "x \n\n y"), (Words{"x", " \n\n", " y"}));
  EXPECT_EQ(Split(PreTokenizerKind::kLlama3, "ok!!\n\nnext"), (Words{"ok", "!!\n\n", "next"}));
  EXPECT_EQ(Split(PreTokenizerKind::kLlama3, "end   "), (Words{"end", "   "}));
}

TEST(TokenizerPreTokenizer, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(Split(PreTokenizerKind::kQwen2, "x2024"), (Words{"x", "2", "0", "2", "4"}));
}

TEST(TokenizerPreTokenizer, Gpt2) {
  // Contractions are case-sensitive; spaces attach to the following word.
  EXPECT_EQ(Split(PreTokenizerKind::kGpt2, "I'M he's"), (Words{"I", "'", "M", " he", "'s"}));
  EXPECT_EQ(Split(PreTokenizerKind::kGpt2, "12345 abc"), (Words{"12345", " abc"}));
  EXPECT_EQ(Split(PreTokenizerKind::kGpt2, "a \n b"), (Words{"a", " \n", " b"}));
}

TEST(TokenizerPreTokenizer, DigitRules) {
  EXPECT_EQ(Split(PreTokenizerKind::kStarcoder, "ab 123"), (Words{"ab", " ", "1", "2", "3"}));
  EXPECT_EQ(Split(PreTokenizerKind::kDeepseekCoder, "x=12"), (Words{"x", "=", "1", "2"}));
  EXPECT_EQ(Split(PreTokenizerKind::kFalcon, "12345"), (Words{"123", "45"}));
  EXPECT_EQ(Split(PreTokenizerKind::kDeepseekLlm, "v1234"), (Words{"v", "1234"}));
}

TEST(TokenizerPreTokenizer, DeepseekKeepsCjkApart) {
  EXPECT_EQ(Split(PreTokenizerKind::kDeepseekLlm, "我想在apple工作"),
            (Words{"我想在", "apple", "工作"}));
}

// A prompt may hold a million digits (a data dump): each piece of a run is found by looking at
// no more than the piece. The number rules once scanned the whole rest of the run for every
// piece of at most three digits, quadratic: 100,000 digits took 10-27 s, a million would take
// hours and so run past this test's time limit.
TEST(TokenizerPreTokenizer, LongRunsSplitInLinearTime) {
  const size_t length = 1'000'000;
  const std::vector<uint32_t> digits(length, '7');
  EXPECT_EQ(SplitWords(PreTokenizerKind::kLlama3, digits).size(), (length + 2) / 3);
  EXPECT_EQ(SplitWords(PreTokenizerKind::kQwen2, digits).size(), length);
  EXPECT_EQ(SplitWords(PreTokenizerKind::kGpt2, digits).size(), 1u);
  // Every family over runs of each class of character and a mix: the words cover the text.
  std::vector<std::vector<uint32_t>> texts = {digits, std::vector<uint32_t>(length, ' '),
                                              std::vector<uint32_t>(length, '\n'),
                                              std::vector<uint32_t>(length, '!')};
  std::vector<uint32_t> mixed;
  while (mixed.size() < length) {
    for (uint32_t c : {'a', '1', '!', '\n', ' ', '\''}) mixed.push_back(c);
  }
  texts.push_back(mixed);
  for (int kind = 0; kind <= static_cast<int>(PreTokenizerKind::kGpt4o); ++kind) {
    for (const std::vector<uint32_t>& text : texts) {
      size_t covered = 0;
      for (size_t word : SplitWords(static_cast<PreTokenizerKind>(kind), text)) covered += word;
      ASSERT_EQ(covered, text.size()) << "kind " << kind;
    }
  }
}

TEST(TokenizerPreTokenizer, EmptyText) {
  EXPECT_TRUE(Split(PreTokenizerKind::kLlama3, "").empty());
}

TEST(TokenizerUnicode, DecodeIsLossyLikeLlamaCpp) {
  EXPECT_EQ(unicode::DecodeUtf8("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  EXPECT_EQ(unicode::DecodeUtf8("\xFF"
                                "a"),
            (std::vector<uint32_t>{0xFFFD, 'a'}));
  EXPECT_EQ(unicode::DecodeUtf8("\xE2\x82"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
}

TEST(TokenizerUnicode, IncompleteSuffix) {
  EXPECT_EQ(unicode::IncompleteUtf8Suffix("abc"), 0u);
  EXPECT_EQ(unicode::IncompleteUtf8Suffix("a\xF0\x9F"), 2u);
  EXPECT_EQ(unicode::IncompleteUtf8Suffix("a\xF0\x9F\xA6"), 3u);
  EXPECT_EQ(unicode::IncompleteUtf8Suffix("a\xF0\x9F\xA6\x99"), 0u);
  EXPECT_EQ(unicode::IncompleteUtf8Suffix("\xC3"), 1u);
  EXPECT_EQ(unicode::IncompleteUtf8Suffix("\x80"), 0u);  // invalid, not incomplete
}

TEST(TokenizerUnicode, Validity) {
  EXPECT_TRUE(unicode::IsValidUtf8("héllo 🦙"));
  EXPECT_FALSE(unicode::IsValidUtf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(unicode::IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(unicode::IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(unicode::IsValidUtf8("\xE2\x82"));          // truncated
}

TEST(TokenizerUnicode, Classes) {
  EXPECT_TRUE(unicode::IsLetter('a'));
  EXPECT_TRUE(unicode::IsLetter(0x4E2D));  // 中
  EXPECT_TRUE(unicode::IsNumber('7'));
  EXPECT_TRUE(unicode::IsNumber(0x0663));  // Arabic-Indic three
  EXPECT_TRUE(unicode::IsPunctuation(','));
  EXPECT_FALSE(unicode::IsPunctuation('$'));  // a symbol
  EXPECT_TRUE(unicode::IsWhitespace(0x3000));
  EXPECT_TRUE(unicode::IsWhitespace('\n'));
  EXPECT_FALSE(unicode::IsWhitespace(0x200B));  // zero width space is not White_Space
}

TEST(TokenizerUnicode, Gpt2ByteMappingIsABijection) {
  for (int byte = 0; byte < 256; ++byte) {
    const uint32_t codepoint = unicode::ByteToCodepoint(static_cast<uint8_t>(byte));
    EXPECT_EQ(unicode::CodepointToByte(codepoint), byte);
  }
  EXPECT_EQ(unicode::ByteToCodepoint(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(unicode::ByteToCodepoint('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(unicode::ByteToCodepoint('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(unicode::CodepointToByte(0x4E2D), -1);
}

}  // namespace
}  // namespace reprise

namespace reprise {
namespace {

TEST(TokenizerPreTokenizer, TekkenSplitsAtCaseChanges) {
  EXPECT_EQ(ParsePreTokenizer("tekken"), PreTokenizerKind::kTekken);
  EXPECT_EQ(Split(PreTokenizerKind::kTekken, "HelloWorld"), (Words{"Hello", "World"}));
  EXPECT_EQ(Split(PreTokenizerKind::kTekken, "HELLOworld"), (Words{"HELLOworld"}));
  EXPECT_EQ(Split(PreTokenizerKind::kTekken, "HELLO world"), (Words{"HELLO", " world"}));
  EXPECT_EQ(Split(PreTokenizerKind::kTekken, "x=2024"), (Words{"x", "=", "2", "0", "2", "4"}));
  EXPECT_EQ(Split(PreTokenizerKind::kTekken, "a/b//\nc"), (Words{"a", "/b", "//\n", "c"}));
  EXPECT_EQ(Split(PreTokenizerKind::kTekken, "don't"), (Words{"don", "'t"}));
  EXPECT_EQ(Split(PreTokenizerKind::kTekken, "Führer Ünïcode"), (Words{"Führer", " Ünïcode"}));
}

TEST(TokenizerPreTokenizer, Gpt4oKeepsContractionsAndThreeDigits) {
  EXPECT_EQ(ParsePreTokenizer("llama4"), PreTokenizerKind::kGpt4o);
  EXPECT_EQ(Split(PreTokenizerKind::kGpt4o, "don't"), (Words{"don't"}));
  EXPECT_EQ(Split(PreTokenizerKind::kGpt4o, "We'VE 12345"), (Words{"We'VE", " ", "123", "45"}));
  EXPECT_EQ(Split(PreTokenizerKind::kGpt4o, "camelCase"), (Words{"camel", "Case"}));
}

}  // namespace
}  // namespace reprise
