// The built-in vocabulary: trained deterministically, loadable by the tokenizer as a GGUF "gpt2"
// vocabulary, lossless on any text, compact on text like its corpus, with ChatML's tokens.
#include "vocabgen/builtin_vocab.h"

#include <gtest/gtest.h>

#include <set>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace reprise::vocabgen {
namespace {

Tokenizer LoadTokenizer(const BpeVocab& vocab, const std::string& name) {
  gguf::GgufWriter writer;
  WriteTokenizerMetadata(vocab, writer);
  std::string path = testing::ScratchPath(name);
  writer.Write(path);
  return Tokenizer::FromGguf(gguf::GgufFile::Open(path));
}

TEST(BpeTrainerTest, LearnsTheMostFrequentPairsFirstAndStopsWhenNothingRepeats) {
  BpeVocab vocab = TrainBpe("aaab aaab aaab xy", 100, {"<s>"});
  ASSERT_GE(vocab.merges.size(), 2u);
  EXPECT_EQ(vocab.merges[0], "a a");  // 6 times, more than any other pair
  // "xy" occurs once: never merged. Every merge result is a token, the special one comes last.
  for (const std::string& merge : vocab.merges) EXPECT_EQ(merge.find("x y"), std::string::npos);
  EXPECT_EQ(vocab.tokens.back(), "<s>");
  EXPECT_EQ(vocab.token_types.back(), 3);
  EXPECT_EQ(vocab.tokens.size(), vocab.token_types.size());
  std::set<std::string> distinct(vocab.tokens.begin(), vocab.tokens.end());
  EXPECT_EQ(distinct.size(), vocab.tokens.size());
}

TEST(BuiltinVocabTest, IsDeterministic) {
  BpeVocab first = BuiltinVocab();
  BpeVocab second = BuiltinVocab();
  EXPECT_EQ(first.tokens, second.tokens);
  EXPECT_EQ(first.merges, second.merges);
  EXPECT_EQ(BuiltinVocabFingerprint(first), BuiltinVocabFingerprint(second));
  EXPECT_GT(first.merges.size(), 500u);
}

TEST(BuiltinVocabTest, RoundTripsAnyTextAndCompressesTextLikeItsCorpus) {
  Tokenizer tokenizer = LoadTokenizer(BuiltinVocab(), "builtin_vocab.gguf");
  for (std::string text :
       {std::string("Hello world, the table of people: | 1 | John Doe | 29 |"),
        std::string("KV Cache 复用 (又名:前缀缓存) \xF0\x9F\x98\x80 tabs\tand\nlines  "),
        std::string(BuiltinCorpus().substr(0, 3000))}) {
    std::vector<int32_t> ids = tokenizer.Encode(text, false, false);
    EXPECT_EQ(tokenizer.Decode(ids), text);
  }
  std::string corpus_like(BuiltinCorpus().substr(0, 3000));
  EXPECT_LT(tokenizer.Encode(corpus_like, false, false).size(),
            corpus_like.size() * 2 / 5);  // about 3 bytes a token
}

TEST(BuiltinVocabTest, ChatMlTokensAreSpecialAndTheTemplateIsSet) {
  BpeVocab vocab = BuiltinVocab();
  gguf::GgufWriter writer;
  WriteTokenizerMetadata(vocab, writer);
  std::string path = testing::ScratchPath("builtin_vocab_chat.gguf");
  writer.Write(path);
  gguf::GgufFile file = gguf::GgufFile::Open(path);
  EXPECT_NE(file.GetString("tokenizer.chat_template", "").find("<|im_start|>"), std::string::npos);
  Tokenizer tokenizer = Tokenizer::FromGguf(file);
  std::vector<int32_t> ids = tokenizer.Encode("<|im_start|>user\nhi<|im_end|>", false, true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(vocab.tokens[static_cast<size_t>(ids.front())], "<|im_start|>");
  EXPECT_EQ(vocab.tokens[static_cast<size_t>(ids.back())], "<|im_end|>");
}

}  // namespace
}  // namespace reprise::vocabgen
