#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "gguf/gguf_file.h"
#include "tokenizer/merge_encoders.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_token_splitter.h"
#include "tokenizer/unicode.h"

namespace reprise {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

std::string EscapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      out += kSpmSpace;
    } else {
      out += c;
    }
  }
  return out;
}

std::string UnescapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
      out += ' ';
      i += kSpmSpace.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xNN>" -> the byte; -1 if the text has another form.
int ParseByteToken(std::string_view text) {
  if (text.size() != 6 || !text.starts_with("<0x") || text.back() != '>') {
    return -1;
  }
  const int high = HexDigit(text[3]);
  const int low = HexDigit(text[4]);
  return (high < 0 || low < 0) ? -1 : high * 16 + low;
}

// Byte-level BPE text back to bytes; a character outside GPT-2's byte mapping is kept as UTF-8.
std::string DecodeByteLevel(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (uint32_t codepoint : unicode::DecodeUtf8(text)) {
    const int byte = unicode::CodepointToByte(codepoint);
    if (byte >= 0) {
      out += static_cast<char>(byte);
    } else {
      unicode::AppendUtf8(codepoint, out);
    }
  }
  return out;
}

// What llama.cpp's token_to_piece gives with special=true.
std::string RenderPiece(const Vocab& vocab, int32_t id) {
  const TokenData& token = vocab.token(id);
  if (token.attr & (kAttrControl | kAttrUnknown | kAttrUserDefined)) {
    return token.text;
  }
  if (vocab.type() == VocabType::kSpm) {
    if (token.attr & kAttrByte) {
      const int byte = ParseByteToken(token.text);
      if (byte < 0) {
        throw Error(fmt::format("byte token {} has text '{}', expected <0xNN>", id, token.text));
      }
      return std::string(1, static_cast<char>(byte));
    }
    if (token.attr & kAttrNormal) {
      return UnescapeSpaces(token.text);
    }
    return "";  // UNUSED and UNDEFINED tokens print nothing
  }
  if (token.attr & (kAttrNormal | kAttrByte)) {
    return DecodeByteLevel(token.text);
  }
  return "";
}

}  // namespace

Tokenizer Tokenizer::FromGguf(const gguf::GgufFile& file) {
  try {
    return Tokenizer(Vocab::FromGguf(file));
  } catch (const Error& e) {
    const std::string message = e.what();
    // Vocab errors already name the file; piece errors do not. Both quote token texts from the
    // file: nothing in them may reach a terminal raw.
    throw Error(EscapeBytes(
        message.starts_with(file.path()) ? message : fmt::format("{}: {}", file.path(), message),
        kMaxMessageBytes));
  }
}

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  pieces_.reserve(static_cast<size_t>(vocab_.size()));
  for (int32_t id = 0; id < vocab_.size(); ++id) {
    pieces_.push_back(RenderPiece(vocab_, id));
  }
}

std::vector<int32_t> Tokenizer::EncodePrompt(std::string_view text, bool add_bos) const {
  std::vector<int32_t> ids = Encode(text, /*add_special=*/false, /*parse_special=*/true);
  if (add_bos && this->add_bos() && (ids.empty() || ids.front() != bos_id())) {
    ids.insert(ids.begin(), bos_id());
  }
  return ids;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && add_bos()) {
    out.push_back(bos_id());
  }
  bool after_special = true;  // SPM prefixes a space to text at the start or after a special token
  for (const Fragment& fragment : SplitOnSpecialTokens(vocab_, text, parse_special)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      after_special = true;
    } else {
      EncodeText(text.substr(fragment.offset, fragment.length), after_special, out);
      after_special = false;
    }
  }
  if (add_special && add_eos()) {
    out.push_back(eos_id());
  }
  return out;
}

void Tokenizer::EncodeText(std::string_view text, bool after_special,
                           std::vector<int32_t>& out) const {
  if (vocab_.type() == VocabType::kSpm) {
    std::string escaped =
        (vocab_.add_space_prefix() && after_special) ? std::string(kSpmSpace) : "";
    escaped += EscapeSpaces(text);
    EncodeSpm(vocab_, escaped, out);
    return;
  }
  const std::vector<uint32_t> codepoints = unicode::DecodeUtf8(text);
  const std::vector<size_t> words = SplitWords(vocab_.pre_tokenizer(), codepoints);
  std::string word;
  std::string utf8;
  size_t start = 0;
  for (size_t length : words) {
    word.clear();
    for (size_t i = start; i < start + length; ++i) {
      utf8.clear();
      unicode::AppendUtf8(codepoints[i], utf8);
      unicode::AppendByteEncoded(utf8, word);
    }
    EncodeBpeWord(vocab_, word, out);
    start += length;
  }
}

std::string Tokenizer::TokenToPiece(int32_t id) const {
  if (!vocab_.Contains(id)) {
    throw Error(fmt::format("token id {} is outside the vocabulary (size {})", id, vocab_size()));
  }
  return pieces_[static_cast<size_t>(id)];
}

bool Tokenizer::PrintsNothing(int32_t id) const {
  return vocab_.HasAttr(id, kAttrControl | kAttrUnknown);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, DecodeOptions options) const {
  bool remove_space = vocab_.add_space_prefix();
  if (options.remove_special && add_bos() && !ids.empty() && ids.front() == bos_id()) {
    remove_space = false;
    ids = ids.subspan(1);
  }
  if (options.remove_special && add_eos() && !ids.empty() && ids.back() == eos_id()) {
    ids = ids.first(ids.size() - 1);
  }
  std::string text;
  for (int32_t id : ids) {
    if (!vocab_.Contains(id)) {
      throw Error(fmt::format("token id {} is outside the vocabulary (size {})", id, vocab_size()));
    }
    if (!options.unparse_special && PrintsNothing(id)) {
      remove_space = false;
      continue;
    }
    std::string_view piece = pieces_[static_cast<size_t>(id)];
    if (remove_space && !piece.empty() && piece.front() == ' ') {
      piece.remove_prefix(1);
    }
    remove_space = false;
    text += piece;
  }
  return text;
}

std::optional<int32_t> Tokenizer::FindToken(std::string_view text) const {
  const int32_t id = vocab_.TextToToken(text);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

}  // namespace reprise
