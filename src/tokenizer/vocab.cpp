#include "tokenizer/vocab.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/unicode.h"

namespace reprise {
namespace {

uint32_t AttrOfType(int64_t type) {
  switch (type) {
    case gguf::token_type::kNormal:
      return kAttrNormal;
    case gguf::token_type::kUnknown:
      return kAttrUnknown;
    case gguf::token_type::kControl:
      return kAttrControl;
    case gguf::token_type::kUserDefined:
      return kAttrUserDefined;
    case gguf::token_type::kUnused:
      return kAttrUnused;
    case gguf::token_type::kByte:
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

bool IsOneOf(std::string_view text, std::initializer_list<std::string_view> options) {
  return std::find(options.begin(), options.end(), text) != options.end();
}

}  // namespace

Vocab Vocab::FromGguf(const gguf::GgufFile& file) {
  Vocab vocab;
  vocab.model_name_ = file.GetString("tokenizer.ggml.model", "");
  if (vocab.model_name_ == "llama") {
    vocab.type_ = VocabType::kSpm;
    vocab.bos_id_ = 1;
    vocab.eos_id_ = 2;
    vocab.unk_id_ = 0;
  } else if (vocab.model_name_ == "gpt2") {
    vocab.type_ = VocabType::kBpe;
    vocab.bos_id_ = 11;
    vocab.eos_id_ = 11;
  } else if (vocab.model_name_.empty()) {
    throw Error(fmt::format("{}: no tokenizer (metadata key tokenizer.ggml.model is missing)",
                            file.path()));
  } else {
    throw Error(fmt::format("{}: unsupported tokenizer model '{}' (supported: llama, gpt2)",
                            file.path(), vocab.model_name_));
  }
  vocab.LoadSettings(file, file.GetString("tokenizer.ggml.pre", ""));
  vocab.LoadTokens(file);
  if (vocab.type_ == VocabType::kBpe) {
    vocab.LoadMerges(file);
    if (const int missing = vocab.MissingByteTokens(); missing > 0) {
      spdlog::warn(
          "{}: {} of the bytes that occur in UTF-8 have no token; text holding them loses "
          "them when encoded",
          file.path(), missing);
    }
  }
  vocab.LoadSpecialIds(file);
  vocab.FindEndOfGeneration();
  vocab.BuildSpecialTokens(file);
  vocab.chat_template_ = file.GetString("tokenizer.chat_template", "");
  return vocab;
}

void Vocab::LoadSettings(const gguf::GgufFile& file, const std::string& pre_name) {
  if (type_ == VocabType::kSpm) {
    pre_tokenizer_ = PreTokenizerKind::kDefault;  // SPM does not split words
    add_space_prefix_ = true;
    add_bos_ = true;
    add_eos_ = false;
  } else {
    add_space_prefix_ = false;
    if (pre_name.empty()) {
      spdlog::warn("{}: no tokenizer.ggml.pre; using the 'default' pre-tokenizer", file.path());
      pre_tokenizer_ = PreTokenizerKind::kDefault;
    } else if (auto kind = ParsePreTokenizer(pre_name)) {
      pre_tokenizer_ = *kind;
    } else {
      throw Error(fmt::format("{}: unsupported pre-tokenizer '{}' (tokenizer.ggml.pre)",
                              file.path(), pre_name));
    }
    if (pre_tokenizer_ == PreTokenizerKind::kLlama3 ||
        pre_tokenizer_ == PreTokenizerKind::kTekken) {
      ignore_merges_ = true;
      add_bos_ = true;
    }
  }
  add_space_prefix_ = file.GetBool("tokenizer.ggml.add_space_prefix", add_space_prefix_);
}

void Vocab::LoadTokens(const gguf::GgufFile& file) {
  const gguf::ArrayValue& texts = file.GetArray("tokenizer.ggml.tokens");
  if (texts.strings.size() != texts.size() || texts.size() == 0) {
    throw Error(
        fmt::format("{}: tokenizer.ggml.tokens must be a non-empty array of strings", file.path()));
  }
  const size_t n = texts.size();
  if (n > static_cast<size_t>(INT32_MAX)) {
    throw Error(fmt::format("{}: vocabulary too large ({} tokens)", file.path(), n));
  }
  const gguf::ArrayValue* scores = file.FindArray("tokenizer.ggml.scores");
  if (scores != nullptr && scores->floats.size() != n) {
    throw Error(fmt::format("{}: tokenizer.ggml.scores has {} floats for {} tokens", file.path(),
                            scores->floats.size(), n));
  }
  const gguf::ArrayValue* types = file.FindArray("tokenizer.ggml.token_type");
  if (types != nullptr && types->integers.size() != n && types->unsigned_integers.size() != n) {
    throw Error(fmt::format("{}: tokenizer.ggml.token_type has {} entries for {} tokens",
                            file.path(), types->size(), n));
  }
  tokens_.resize(n);
  token_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TokenData& token = tokens_[i];
    token.text = texts.strings[i];
    if (token.text.empty()) {
      token.text = fmt::format("[EMPTY_{}]", i);  // as llama.cpp, so that every text is unique
    }
    token.score = scores != nullptr ? static_cast<float>(scores->floats[i]) : 0.0f;
    if (types != nullptr) {
      const int64_t type = types->integers.size() == n
                               ? types->integers[i]
                               : static_cast<int64_t>(types->unsigned_integers[i]);
      token.attr = AttrOfType(type);
    }
    if (!token_to_id_.emplace(token.text, static_cast<int32_t>(i)).second) {
      throw Error(fmt::format("{}: token text '{}' appears twice in tokenizer.ggml.tokens",
                              file.path(), token.text));
    }
  }
}

void Vocab::LoadMerges(const gguf::GgufFile& file) {
  const gguf::ArrayValue* merges = file.FindArray("tokenizer.ggml.merges");
  if (merges == nullptr || merges->strings.size() != merges->size()) {
    throw Error(
        fmt::format("{}: a gpt2 tokenizer needs tokenizer.ggml.merges (strings)", file.path()));
  }
  merge_ranks_.reserve(merges->size());
  for (size_t i = 0; i < merges->strings.size(); ++i) {
    const std::string& merge = merges->strings[i];
    if (merge.size() < 3 || merge.find(' ', 1) == std::string::npos) {
      throw Error(fmt::format("{}: bad BPE merge #{}: '{}'", file.path(), i, merge));
    }
    merge_ranks_.emplace(merge, static_cast<int32_t>(i));  // a repeated merge keeps its first rank
  }
}

void Vocab::LoadSpecialIds(const gguf::GgufFile& file) {
  const auto load = [&](const char* key, int32_t& id) {
    const int64_t value = file.GetInt(key, -1);
    if (value < 0) {
      return;
    }
    if (value >= size()) {
      // llama.cpp also ignores out-of-range ids (converters write 0xFFFFFFFF for "none").
      if (value != 0xFFFFFFFF) {
        spdlog::warn("{}: ignoring {} = {} (vocabulary has {} tokens)", file.path(), key, value,
                     size());
      }
      return;
    }
    id = static_cast<int32_t>(value);
  };
  load("tokenizer.ggml.bos_token_id", bos_id_);
  load("tokenizer.ggml.eos_token_id", eos_id_);
  load("tokenizer.ggml.eot_token_id", eot_id_);
  load("tokenizer.ggml.eom_token_id", eom_id_);
  load("tokenizer.ggml.unknown_token_id", unk_id_);
  if (!Contains(unk_id_)) {
    unk_id_ = -1;
  }
  if (!Contains(bos_id_)) {
    bos_id_ = -1;
  }
  if (!Contains(eos_id_)) {
    eos_id_ = -1;
  }
  add_bos_ = file.GetBool("tokenizer.ggml.add_bos_token", add_bos_);
  add_eos_ = file.GetBool("tokenizer.ggml.add_eos_token", add_eos_);
  add_bos_ = add_bos_ && bos_id_ >= 0;
  add_eos_ = add_eos_ && eos_id_ >= 0;
}

void Vocab::FindEndOfGeneration() {
  // llama.cpp recognises turn-ending tokens by their text; such tokens are made CONTROL (so they
  // are never matched in plain text with parse_special=false, and not printed).
  const auto make_control = [&](int32_t id) {
    tokens_[static_cast<size_t>(id)].attr = kAttrControl;
  };
  const auto ensure_control = [&](int32_t id) {
    if ((token(id).attr & kAttrControl) == 0) {
      spdlog::debug("token {} '{}' looks like a control token; marking it CONTROL", id,
                    token(id).text);
      make_control(id);
    }
  };
  for (int32_t id = 0; id < size() && eot_id_ < 0; ++id) {
    if (IsOneOf(token(id).text, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                 "<|endoftext|>", "<EOT>", "_<EOT>",
                                 "<\xEF\xBD\x9C"
                                 "end\xE2\x96\x81"
                                 "of\xE2\x96\x81"
                                 "sentence\xEF\xBD\x9C>"})) {
      eot_id_ = id;
      ensure_control(id);
    }
  }
  for (int32_t id = 0; id < size() && eom_id_ < 0; ++id) {
    if (token(id).text == "<|eom_id|>") {
      eom_id_ = id;
      ensure_control(id);
    }
  }
  for (int32_t id = 0; id < size(); ++id) {
    const std::string& text = token(id).text;
    if (IsOneOf(text, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                       "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>"})) {
      end_of_generation_.insert(id);
      ensure_control(id);
    } else if (IsOneOf(text,
                       {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<|fim_repo|>", "<|repo_name|>",
                        "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>"})) {
      // fill-in-the-middle separators end a generation too
      end_of_generation_.insert(id);
      ensure_control(id);
    }
  }
  for (int32_t id : {eos_id_, eot_id_, eom_id_}) {
    if (Contains(id)) {
      end_of_generation_.insert(id);
    }
  }
}

void Vocab::BuildSpecialTokens(const gguf::GgufFile& file) {
  for (int32_t id = 0; id < size(); ++id) {
    if (token(id).attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      special_tokens_.push_back(id);
    }
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [&](int32_t a, int32_t b) {
    return token(a).text.size() > token(b).text.size();
  });

  // Per-model attributes that GGUF does not carry (llama.cpp sets them by model name): Phi-3's
  // special tokens swallow the whitespace that follows them.
  std::string name = file.GetString("general.name", "");
  std::transform(name.begin(), name.end(), name.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    const auto set_rstrip = [&](int32_t id, bool on) {
      uint32_t& attr = tokens_[static_cast<size_t>(id)].attr;
      attr = on ? (attr | kAttrRstrip) : (attr & ~kAttrRstrip);
    };
    for (int32_t id : special_tokens_) {
      set_rstrip(id, true);
    }
    for (const char* text : {"</s>"}) {
      if (int32_t id = TextToToken(text); id >= 0) set_rstrip(id, true);
    }
    for (const char* text : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (int32_t id = TextToToken(text); id >= 0) set_rstrip(id, false);
    }
  }
}

int32_t Vocab::TextToToken(std::string_view text) const {
  const auto it = token_to_id_.find(text);
  return it == token_to_id_.end() ? -1 : it->second;
}

int32_t Vocab::ByteToToken(uint8_t byte) const {
  const int32_t id = TextToToken(fmt::format("<0x{:02X}>", byte));
  if (id >= 0) {
    return id;
  }
  const char single[1] = {static_cast<char>(byte)};
  const int32_t plain = TextToToken(std::string_view(single, 1));
  return plain >= 0 ? plain : unk_id_;
}

int Vocab::MissingByteTokens() const {
  int missing = 0;
  for (int byte = 0; byte < 256; ++byte) {
    if (byte == 0xC0 || byte == 0xC1 || byte >= 0xF5) {
      continue;  // never in UTF-8: invalid input is read as U+FFFD before it is encoded
    }
    const char raw = static_cast<char>(byte);
    std::string character;
    unicode::AppendByteEncoded(std::string_view(&raw, 1), character);
    missing += TextToToken(character) < 0 ? 1 : 0;
  }
  return missing;
}

int32_t Vocab::MergeRank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left).append(1, ' ').append(right);
  const auto it = merge_ranks_.find(key);
  return it == merge_ranks_.end() ? -1 : it->second;
}

}  // namespace reprise
