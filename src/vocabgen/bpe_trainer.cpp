#include "vocabgen/bpe_trainer.h"

#include <map>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace reprise::vocabgen {
namespace {

constexpr int32_t kNormal = 1;
constexpr int32_t kControl = 3;

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Each distinct word of the text (its bytes) with how often it occurs.
std::map<std::string, int64_t> CountWords(std::string_view text) {
  std::vector<uint32_t> codepoints = unicode::DecodeUtf8(text);
  std::vector<size_t> lengths = SplitWords(PreTokenizerKind::kGpt2, codepoints);
  std::map<std::string, int64_t> counts;
  size_t start = 0;
  for (size_t length : lengths) {
    std::string word;
    for (size_t i = start; i < start + length; ++i) unicode::AppendUtf8(codepoints[i], word);
    ++counts[word];
    start += length;
  }
  return counts;
}

}  // namespace

BpeVocab TrainBpe(std::string_view text, size_t max_merges,
                  const std::vector<std::string>& special_tokens) {
  BpeVocab vocab;
  std::unordered_map<std::string, int32_t> ids;
  auto add_token = [&](std::string token_text, int32_t type) {
    auto id = static_cast<int32_t>(vocab.tokens.size());
    if (!ids.emplace(token_text, id).second) {
      throw InternalError("BPE training made the token '" + token_text + "' twice");
    }
    vocab.tokens.push_back(std::move(token_text));
    vocab.token_types.push_back(type);
    return id;
  };
  for (int byte = 0; byte < 256; ++byte) {
    std::string mapped;
    unicode::AppendByteEncoded(std::string_view(reinterpret_cast<const char*>(&byte), 1), mapped);
    add_token(std::move(mapped), kNormal);
  }

  struct Word {
    std::vector<int32_t> symbols;
    int64_t count;
  };
  std::vector<Word> words;
  for (const auto& [bytes, count] : CountWords(text)) {
    Word word{{}, count};
    for (char byte : bytes) word.symbols.push_back(static_cast<uint8_t>(byte));
    words.push_back(std::move(word));
  }

  while (vocab.merges.size() < max_merges) {
    std::unordered_map<uint64_t, int64_t> pair_counts;
    for (const Word& word : words) {
      for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
        pair_counts[PairKey(word.symbols[i], word.symbols[i + 1])] += word.count;
      }
    }
    uint64_t best = 0;
    int64_t best_count = 1;  // a pair seen once teaches nothing
    for (const auto& [key, count] : pair_counts) {
      if (count > best_count || (count == best_count && count > 1 && key < best)) {
        best = key;
        best_count = count;
      }
    }
    if (best_count < 2) break;
    auto left = static_cast<int32_t>(best >> 32);
    auto right = static_cast<int32_t>(best & 0xffffffffu);
    std::string merged =
        vocab.tokens[static_cast<size_t>(left)] + vocab.tokens[static_cast<size_t>(right)];
    vocab.merges.push_back(vocab.tokens[static_cast<size_t>(left)] + " " +
                           vocab.tokens[static_cast<size_t>(right)]);
    // Two merge orders can spell the same text ("ab"+"c", "a"+"bc"): one token serves both.
    auto existing = ids.find(merged);
    int32_t id = existing != ids.end() ? existing->second : add_token(merged, kNormal);
    for (Word& word : words) {
      std::vector<int32_t>& symbols = word.symbols;
      size_t out = 0;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          symbols[out++] = id;
          ++i;
        } else {
          symbols[out++] = symbols[i];
        }
      }
      symbols.resize(out);
    }
  }
  for (const std::string& special : special_tokens) add_token(special, kControl);
  return vocab;
}

}  // namespace reprise::vocabgen
