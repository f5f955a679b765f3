// Text <-> token ids for llama-family GGUF models: SentencePiece-style BPE ("llama") and
// byte-level BPE ("gpt2") vocabularies, with the same results as llama.cpp's tokenizer.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace reprise {

namespace gguf {
class GgufFile;
}

struct DecodeOptions {
  // Drop a leading BOS (when the model adds one) and a trailing EOS (when the model adds one).
  bool remove_special = false;
  // Print CONTROL and UNKNOWN tokens as their text ("<|eot_id|>"); by default they print nothing.
  bool unparse_special = false;
};

// Immutable once loaded: one Tokenizer may serve many threads at once.
class Tokenizer {
 public:
  // Throws Error for an unsupported or broken vocabulary.
  static Tokenizer FromGguf(const gguf::GgufFile& file);

  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;
  Tokenizer(const Tokenizer&) = delete;  // large: share by reference
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: prepend BOS if add_bos(), append EOS if add_eos().
  // parse_special: text of CONTROL tokens in `text` becomes those tokens (USER_DEFINED tokens
  // are matched either way); otherwise it is tokenized as plain text.
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;

  // A prompt as the model sees it (the one BOS rule): special-token texts become tokens, and
  // with `add_bos` a BOS is prepended when the model asks for one and the text does not already
  // start with it (chat templates that write the BOS text). EOS is never added.
  std::vector<int32_t> EncodePrompt(std::string_view text, bool add_bos) const;

  // The bytes the token stands for: byte tokens give their byte, SPM pieces have U+2581 turned
  // into spaces, byte-level BPE pieces are mapped back to bytes; CONTROL, USER_DEFINED and
  // UNKNOWN tokens give their text. May be part of a UTF-8 character. Throws Error for an id
  // outside the vocabulary.
  std::string TokenToPiece(int32_t id) const;

  // Concatenates the pieces as llama.cpp's detokenize does: CONTROL/UNKNOWN tokens print nothing
  // unless options.unparse_special; for vocabularies that prepend a space (SPM) the first
  // piece's leading space is removed, except after a BOS. Spaces are never "cleaned" (so
  // Decode(Encode(text, false, false)) == text for valid UTF-8). Throws Error for a bad id.
  std::string Decode(std::span<const int32_t> ids, DecodeOptions options = {}) const;

  int32_t bos_id() const { return vocab_.bos_id(); }  // -1 if none
  int32_t eos_id() const { return vocab_.eos_id(); }  // -1 if none
  bool add_bos() const { return vocab_.add_bos(); }
  bool add_eos() const { return vocab_.add_eos(); }
  // EOS, EOT, EOM and turn-ending tokens known by text (<|eot_id|>, <|im_end|>, <|end|>, ...).
  bool IsEndOfGeneration(int32_t id) const { return vocab_.IsEndOfGeneration(id); }
  bool IsControl(int32_t id) const { return vocab_.HasAttr(id, kAttrControl); }
  int32_t vocab_size() const { return vocab_.size(); }
  // The id of the token whose text is exactly `text` (token text as stored: "▁the", "Ġthe").
  std::optional<int32_t> FindToken(std::string_view text) const;
  const std::string& model_name() const { return vocab_.model_name(); }        // "llama" or "gpt2"
  const std::string& chat_template() const { return vocab_.chat_template(); }  // or ""
  const Vocab& vocab() const { return vocab_; }

 private:
  explicit Tokenizer(Vocab vocab);
  void EncodeText(std::string_view text, bool after_special, std::vector<int32_t>& out) const;
  bool PrintsNothing(int32_t id) const;
  friend class StreamingDetokenizer;

  Vocab vocab_;
  std::vector<std::string> pieces_;  // [vocab size] TokenToPiece of each token
};

}  // namespace reprise
