#include "hf/hf_tokenizer.h"

#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "gguf/gguf_types.h"
#include "hf/json_file.h"

namespace reprise::hf {

namespace {

using nlohmann::json;

namespace token_type = gguf::token_type;

// The Split regexes of Hugging Face byte-level tokenizers, by the pre-tokenizer that applies them.
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// True when `node` or anything nested in it is an object of "type" `type`.
bool HasType(const json& node, std::string_view type) {
  if (node.is_object()) {
    auto it = node.find("type");
    if (it != node.end() && it->is_string() && it->get<std::string>() == type) return true;
  }
  if (node.is_object() || node.is_array()) {
    for (const json& child : node) {
      if (HasType(child, type)) return true;
    }
  }
  return false;
}

// A list of pre-tokenizers: the members of a Sequence, or the one given.
std::vector<json> Steps(const json& node) {
  if (node.is_object() && node.value("type", json()) == "Sequence") {
    auto it = node.find("pretokenizers");
    if (it != node.end() && it->is_array()) return std::vector<json>(it->begin(), it->end());
  }
  return {node};
}

// The tokenizer.ggml.pre name of a byte-level pre-tokenizer; Error for one Reprise does not know.
std::string ByteLevelPreTokenizer(const json& pre, const std::string& path) {
  std::vector<json> steps = Steps(pre);
  auto type_of = [](const json& step) {
    return step.is_object() ? step.value("type", std::string()) : std::string();
  };
  auto uses_regex = [](const json& step) {
    auto it = step.find("use_regex");
    return it == step.end() || (it->is_boolean() && it->get<bool>());
  };
  if (steps.size() == 1 && type_of(steps[0]) == "ByteLevel" && uses_regex(steps[0])) {
    return "gpt-2";
  }
  if (steps.size() == 2 && type_of(steps[0]) == "Digits" && type_of(steps[1]) == "ByteLevel" &&
      steps[0].value("individual_digits", false) && uses_regex(steps[1])) {
    return "starcoder";
  }
  if (steps.size() == 2 && type_of(steps[0]) == "Split" && type_of(steps[1]) == "ByteLevel" &&
      !uses_regex(steps[1])) {
    const json& pattern = steps[0].value("pattern", json());
    std::string regex = pattern.is_object() ? pattern.value("Regex", std::string()) : "";
    if (regex == kLlama3Regex) return "llama-bpe";
    if (regex == kQwen2Regex) return "qwen2";
  }
  throw Error(
      fmt::format("{}: field 'pre_tokenizer' ({}) is not a pre-tokenizer Reprise knows "
                  "(GPT-2, Llama 3, Qwen2 and StarCoder-style byte-level ones are)",
                  path, pre.dump().substr(0, 200)));
}

// A special token field of tokenizer_config.json: a string or {"content": ...}.
std::optional<std::string> TokenText(const json& object, const char* key, const std::string& path) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return GetString(*it, "content", path + " " + key);
  throw Error(fmt::format("{}: field '{}' is {}, expected a string or an object", path, key,
                          it->type_name()));
}

// Whether the post-processor wraps a single sequence in `text` first (or last).
std::optional<bool> PostProcessorAdds(const json& tokenizer, const std::string& text, bool first) {
  auto it = tokenizer.find("post_processor");
  if (it == tokenizer.end() || !it->is_object()) return std::nullopt;
  std::vector<json> processors = {*it};
  if (it->value("type", std::string()) == "Sequence") {
    auto list = it->find("processors");
    if (list == it->end() || !list->is_array()) return std::nullopt;
    processors.assign(list->begin(), list->end());
  }
  for (const json& processor : processors) {
    if (!processor.is_object() || processor.value("type", std::string()) != "TemplateProcessing") {
      continue;
    }
    auto single = processor.find("single");
    if (single == processor.end() || !single->is_array() || single->empty()) return false;
    const json& piece = first ? single->front() : single->back();
    if (!piece.is_object() || !piece.contains("SpecialToken")) return false;
    const json& special = piece["SpecialToken"];
    return special.is_object() && special.value("id", std::string()) == text;
  }
  return std::nullopt;
}

// bos_token_id / eos_token_id of config.json: an id, or a list of ids (the first is taken);
// -1 when absent.
int64_t ConfigTokenId(const json& config, const char* key, const std::string& path,
                      int64_t vocab_size) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return -1;
  const json& value = it->is_array() && !it->empty() ? it->front() : *it;
  return GetInt(json{{key, value}}, key, path, 0, vocab_size - 1).value_or(-1);
}

class TokenTable {
 public:
  TokenTable(const std::string& path, int64_t vocab_size) : path_(path), limit_(vocab_size) {}

  void Place(const std::string& text, const json& id_value, int32_t type) {
    if (!id_value.is_number_integer() || id_value.get<int64_t>() < 0 ||
        id_value.get<int64_t>() >= limit_) {
      throw Error(fmt::format("{}: token '{}' has id {}, outside the model's vocabulary of {}",
                              path_, text, id_value.dump(), limit_));
    }
    auto id = static_cast<size_t>(id_value.get<int64_t>());
    if (texts_.size() <= id) {
      texts_.resize(id + 1);
      types_.resize(id + 1, 0);
    }
    if (!texts_[id].empty() && texts_[id] != text) {
      throw Error(
          fmt::format("{}: id {} is given to both '{}' and '{}'", path_, id, texts_[id], text));
    }
    auto [it, inserted] = ids_.emplace(text, static_cast<int32_t>(id));
    if (!inserted && it->second != static_cast<int32_t>(id)) {
      throw Error(
          fmt::format("{}: token '{}' has two ids, {} and {}", path_, text, it->second, id));
    }
    texts_[id] = text;
    if (type != 0) types_[id] = type;
  }

  int32_t Find(const std::string& text) const {
    auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
  }
  void SetType(int32_t id, int32_t type) { types_[static_cast<size_t>(id)] = type; }

  // Ids no token claims (and those up to the model's vocabulary) become unused padding, as
  // llama.cpp's converter writes them.
  void Finish() {
    texts_.resize(static_cast<size_t>(limit_));
    types_.resize(static_cast<size_t>(limit_), 0);
    for (size_t id = 0; id < texts_.size(); ++id) {
      if (texts_[id].empty()) {
        texts_[id] = fmt::format("[PAD{}]", id);
        types_[id] = token_type::kUnused;
      } else if (types_[id] == 0) {
        types_[id] = token_type::kNormal;
      }
    }
  }

  std::vector<std::string>& texts() { return texts_; }
  std::vector<int32_t>& types() { return types_; }

 private:
  std::string path_;
  int64_t limit_;
  std::vector<std::string> texts_;
  std::vector<int32_t> types_;
  std::unordered_map<std::string, int32_t> ids_;
};

// Merges as "left right" pairs, from either form tokenizer.json uses ("a b" or ["a", "b"]).
std::vector<std::pair<std::string, std::string>> ReadMerges(const json& model,
                                                            const std::string& path) {
  std::vector<std::pair<std::string, std::string>> merges;
  const json* list = GetArray(model, "merges", path + " model");
  if (list == nullptr) return merges;
  merges.reserve(list->size());
  for (const json& merge : *list) {
    if (merge.is_string()) {
      const std::string& text = merge.get_ref<const std::string&>();
      size_t space = text.find(' ', 1);
      if (space == std::string::npos) {
        throw Error(fmt::format("{}: merge '{}' is not two tokens", path, text));
      }
      merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      throw Error(fmt::format("{}: merge {} is not two tokens", path, merge.dump().substr(0, 100)));
    }
  }
  return merges;
}

std::string ChatTemplate(const std::string& dir, const json& tokenizer_config,
                         const std::string& config_path, Metadata& metadata) {
  const std::string jinja_path = dir + "/chat_template.jinja";
  if (std::filesystem::is_regular_file(jinja_path)) {
    MappedFile file = MappedFile::Open(jinja_path);
    return std::string(reinterpret_cast<const char*>(file.data()), file.size());
  }
  auto it = tokenizer_config.find("chat_template");
  if (it == tokenizer_config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    throw Error(fmt::format("{}: field 'chat_template' is {}, expected a string or a list",
                            config_path, it->type_name()));
  }
  // Named templates: "default" is the chat template; the others are kept under their names.
  std::string chosen;
  for (const json& entry : *it) {
    auto name = GetString(entry, "name", config_path + " chat_template");
    auto text = GetString(entry, "template", config_path + " chat_template");
    if (!name || !text) {
      throw Error(fmt::format("{}: field 'chat_template' has an entry without name and template",
                              config_path));
    }
    if (*name == "default") {
      chosen = *text;
    } else {
      PutString(metadata, "tokenizer.chat_template." + *name, *text);
    }
  }
  return chosen;
}

}  // namespace

void ReadTokenizer(const std::string& dir, const json& config, int64_t vocab_size,
                   Metadata& metadata) {
  const std::string path = dir + "/tokenizer.json";
  const json tokenizer = ReadJsonFile(path);
  const std::string config_path = dir + "/tokenizer_config.json";
  const json tokenizer_config =
      std::filesystem::is_regular_file(config_path) ? ReadJsonFile(config_path) : json::object();
  if (!tokenizer.is_object() || !tokenizer_config.is_object()) {
    throw Error(fmt::format("{}: not a JSON object", tokenizer.is_object() ? config_path : path));
  }
  const json* model = GetObject(tokenizer, "model", path);
  if (model == nullptr) throw Error(fmt::format("{}: missing field 'model'", path));
  std::string type = GetString(*model, "type", path + " model").value_or("");
  if (type != "BPE") {
    throw Error(fmt::format("{}: field 'model.type' is '{}'; only BPE tokenizers are supported",
                            path, type));
  }
  const json* vocab = GetObject(*model, "vocab", path + " model");
  if (vocab == nullptr) throw Error(fmt::format("{}: missing field 'model.vocab'", path));

  const bool byte_level = HasType(tokenizer.value("pre_tokenizer", json()), "ByteLevel") ||
                          HasType(tokenizer.value("decoder", json()), "ByteLevel");
  const bool byte_fallback = GetBool(*model, "byte_fallback", path).value_or(false);

  TokenTable table(path, vocab_size);
  for (const auto& [text, id] : vocab->items()) {
    bool is_byte = byte_fallback && text.size() == 6 && text.starts_with("<0x") &&
                   text.ends_with(">") && std::isxdigit(static_cast<unsigned char>(text[3])) &&
                   std::isxdigit(static_cast<unsigned char>(text[4]));
    table.Place(text, id, is_byte ? token_type::kByte : 0);
  }
  if (const json* added = GetArray(tokenizer, "added_tokens", path)) {
    for (const json& token : *added) {
      auto content = GetString(token, "content", path + " added_tokens");
      if (!content || !token.contains("id")) {
        throw Error(fmt::format("{}: an entry of 'added_tokens' lacks id or content", path));
      }
      bool special = GetBool(token, "special", path + " added_tokens").value_or(false);
      table.Place(*content, token["id"], special ? token_type::kControl : token_type::kUserDefined);
    }
  }
  if (auto unk = GetString(*model, "unk_token", path + " model")) {
    int32_t id = table.Find(*unk);
    if (id < 0) throw Error(fmt::format("{}: unk_token '{}' is not in the vocabulary", path, *unk));
    table.SetType(id, token_type::kUnknown);
    PutUint32(metadata, "tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(id));
  }

  auto merges = ReadMerges(*model, path);
  std::vector<std::string>& texts = table.texts();
  if (byte_level) {
    PutString(metadata, "tokenizer.ggml.model", "gpt2");
    PutString(metadata, "tokenizer.ggml.pre",
              ByteLevelPreTokenizer(tokenizer.value("pre_tokenizer", json()), path));
    std::vector<std::string> merge_texts;
    merge_texts.reserve(merges.size());
    for (const auto& [left, right] : merges) {
      if (left.find(' ') != std::string::npos || right.find(' ') != std::string::npos) {
        throw Error(fmt::format("{}: merge of '{}' and '{}' holds a space", path, left, right));
      }
      merge_texts.push_back(left + " " + right);
    }
    PutStrings(metadata, "tokenizer.ggml.merges", std::move(merge_texts));
    table.Finish();
  } else {
    // SentencePiece-style: the merge ranks become scores (a token made by an earlier merge scores
    // higher), which is the order in which both BPE forms merge.
    PutString(metadata, "tokenizer.ggml.model", "llama");
    PutString(metadata, "tokenizer.ggml.pre", "default");
    const bool prefix = HasType(tokenizer.value("normalizer", json()), "Prepend") ||
                        HasType(tokenizer.value("pre_tokenizer", json()), "Metaspace");
    PutBool(metadata, "tokenizer.ggml.add_space_prefix", prefix);
    table.Finish();
    std::vector<float> scores(texts.size(), 0.0f);
    std::vector<bool> scored(texts.size(), false);
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      int32_t id = table.Find(merges[rank].first + merges[rank].second);
      if (id >= 0 && !scored[static_cast<size_t>(id)]) {
        scores[static_cast<size_t>(id)] = -static_cast<float>(rank);
        scored[static_cast<size_t>(id)] = true;
      }
    }
    PutFloats(metadata, "tokenizer.ggml.scores", scores);
  }

  // Special ids: tokenizer_config.json names them by text; config.json gives ids.
  for (const auto& [field, key, id_field] :
       {std::tuple{"bos_token", "tokenizer.ggml.bos_token_id", "bos_token_id"},
        std::tuple{"eos_token", "tokenizer.ggml.eos_token_id", "eos_token_id"}}) {
    int64_t id = -1;
    if (auto text = TokenText(tokenizer_config, field, config_path)) {
      id = table.Find(*text);
      if (id < 0) {
        throw Error(fmt::format("{}: field '{}' is '{}', which is not in the vocabulary",
                                config_path, field, *text));
      }
    } else {
      id = ConfigTokenId(config, id_field, dir + "/config.json", vocab_size);
    }
    if (id >= 0) PutUint32(metadata, key, static_cast<uint32_t>(id));
  }
  for (const auto& [field, key, token_field, first] :
       {std::tuple{"add_bos_token", "tokenizer.ggml.add_bos_token", "bos_token", true},
        std::tuple{"add_eos_token", "tokenizer.ggml.add_eos_token", "eos_token", false}}) {
    std::optional<bool> add = GetBool(tokenizer_config, field, config_path);
    if (!add) {
      if (auto text = TokenText(tokenizer_config, token_field, config_path)) {
        add = PostProcessorAdds(tokenizer, *text, first);
      }
    }
    if (add) PutBool(metadata, key, *add);
  }
  std::string chat_template = ChatTemplate(dir, tokenizer_config, config_path, metadata);
  if (!chat_template.empty()) PutString(metadata, "tokenizer.chat_template", chat_template);

  PutInt32s(metadata, "tokenizer.ggml.token_type", table.types());
  PutStrings(metadata, "tokenizer.ggml.tokens", std::move(texts));
}

}  // namespace reprise::hf
