// The vocabulary read from GGUF tokenizer metadata: token texts, scores and attributes, BPE merge
// ranks, special token ids and the model's tokenization settings (llama.cpp's rules and defaults).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

namespace reprise::gguf {
class GgufFile;
}

namespace reprise {

enum class VocabType {
  kSpm,  // tokenizer.ggml.model "llama": SentencePiece-style BPE over scores, byte fallback
  kBpe,  // tokenizer.ggml.model "gpt2": byte-level BPE over merge ranks
};

// Token attributes (bit set), derived from tokenizer.ggml.token_type plus per-model fix-ups.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1 << 0,
  kAttrUnused = 1 << 1,
  kAttrNormal = 1 << 2,
  kAttrControl = 1 << 3,
  kAttrUserDefined = 1 << 4,
  kAttrByte = 1 << 5,
  kAttrLstrip = 1 << 6,  // when matched as a special token, eat whitespace on its left
  kAttrRstrip = 1 << 7,  // ... and on its right
};

struct TokenData {
  std::string text;
  float score = 0.0f;
  uint32_t attr = kAttrNormal;
};

class Vocab {
 public:
  // Throws Error for a missing/unsupported tokenizer model, unknown pre-tokenizer or bad arrays.
  static Vocab FromGguf(const gguf::GgufFile& file);

  Vocab() = default;
  Vocab(Vocab&&) noexcept = default;
  Vocab& operator=(Vocab&&) noexcept = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  VocabType type() const { return type_; }
  const std::string& model_name() const { return model_name_; }
  PreTokenizerKind pre_tokenizer() const { return pre_tokenizer_; }
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  bool Contains(int32_t id) const { return id >= 0 && id < size(); }
  const TokenData& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  bool HasAttr(int32_t id, uint32_t attr) const { return Contains(id) && (token(id).attr & attr); }

  // The id of the token whose text is exactly `text`, or -1.
  int32_t TextToToken(std::string_view text) const;
  // SPM byte fallback: "<0xNN>", else the byte itself as a token, else the unknown token (-1 if
  // there is none).
  int32_t ByteToToken(uint8_t byte) const;
  // Rank of the BPE merge "left right" (lower merges first), or -1 when there is no such merge.
  int32_t MergeRank(std::string_view left, std::string_view right) const;
  // Byte-level BPE: how many of the bytes that occur in UTF-8 text have no byte-character token.
  // Text holding such a byte loses it when encoded (as in llama.cpp, and in Hugging Face
  // tokenizers without an unknown token).
  int MissingByteTokens() const;

  // Tokens matched as whole units before the text is split (CONTROL, USER_DEFINED and UNKNOWN),
  // longest text first.
  const std::vector<int32_t>& special_tokens() const { return special_tokens_; }

  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t eot_id() const { return eot_id_; }
  int32_t unk_id() const { return unk_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool ignore_merges() const { return ignore_merges_; }
  bool IsEndOfGeneration(int32_t id) const { return end_of_generation_.count(id) > 0; }
  const std::string& chat_template() const { return chat_template_; }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  void LoadTokens(const gguf::GgufFile& file);
  void LoadMerges(const gguf::GgufFile& file);
  void LoadSettings(const gguf::GgufFile& file, const std::string& pre_name);
  void LoadSpecialIds(const gguf::GgufFile& file);
  void FindEndOfGeneration();
  void BuildSpecialTokens(const gguf::GgufFile& file);

  VocabType type_ = VocabType::kSpm;
  std::string model_name_;
  PreTokenizerKind pre_tokenizer_ = PreTokenizerKind::kDefault;
  std::vector<TokenData> tokens_;  // [vocab size]
  StringMap token_to_id_;
  StringMap merge_ranks_;  // key: "left right", as in tokenizer.ggml.merges
  std::vector<int32_t> special_tokens_;
  std::set<int32_t> end_of_generation_;

  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t eot_id_ = -1;
  int32_t eom_id_ = -1;
  int32_t unk_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  bool ignore_merges_ = false;
  std::string chat_template_;
};

}  // namespace reprise
