#include "tokenizer/chat_template.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace reprise {
namespace {

// The families' published formats, written as Jinja. chatml: Qwen, Yi and many fine-tunes.
constexpr std::string_view kChatml =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

// Llama 2 chat: the system text inside the first [INST] block; roles must alternate.
constexpr std::string_view kLlama2 =
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content'] %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set system_message = none %}{%- set loop_messages = messages %}{%- endif %}"
    "{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif %}"
    "{%- set content = message['content'] %}"
    "{%- if loop.first and system_message is not none %}"
    "{%- set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + content %}"
    "{%- endif %}"
    "{%- if message['role'] == 'user' %}"
    "{{- bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{%- else %}{{- ' ' + content.strip() + ' ' + eos_token }}{%- endif %}"
    "{%- endfor %}";

// Llama 3 instruct: header blocks, contents trimmed, BOS in front.
constexpr std::string_view kLlama3 =
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

// Mistral instruct: [INST] blocks, a system text in front of the first user turn; roles must
// alternate.
constexpr std::string_view kMistral =
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content'] %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set system_message = none %}{%- set loop_messages = messages %}{%- endif %}"
    "{{- bos_token }}"
    "{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif %}"
    "{%- if message['role'] == 'user' %}"
    "{%- if loop.first and system_message is not none %}"
    "{{- '[INST] ' + system_message + '\\n\\n' + message['content'] + '[/INST]' }}"
    "{%- else %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- endif %}"
    "{%- else %}{{- ' ' + message['content'] + eos_token }}{%- endif %}"
    "{%- endfor %}";

constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kBuiltins = {{
    {"chatml", kChatml},
    {"llama2", kLlama2},
    {"llama3", kLlama3},
    {"mistral", kMistral},
}};

// Template files are small; this bounds what a mistaken path can make us read.
constexpr uintmax_t kMaxTemplateFileBytes = uintmax_t{1} << 20;

std::string TokenText(const Tokenizer& tokenizer, int32_t id) {
  return id >= 0 ? tokenizer.vocab().token(id).text : std::string();
}

std::string ReadTemplateFile(const std::string& path) {
  std::error_code error;
  uintmax_t size = std::filesystem::file_size(path, error);
  if (error)
    throw Error(fmt::format("cannot read chat template file '{}': {}", path, error.message()));
  if (size > kMaxTemplateFileBytes) {
    throw Error(fmt::format("chat template file '{}' is larger than 1 MiB", path));
  }
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) throw Error(fmt::format("cannot read chat template file '{}'", path));
  return text.str();
}

jinja::Value MessagesValue(const std::vector<ChatMessage>& messages) {
  jinja::Array list;
  for (const ChatMessage& message : messages) {
    jinja::Object object;
    object.items = {{"role", jinja::Value(message.role)},
                    {"content", jinja::Value(message.content)}};
    list.push_back(jinja::Value(std::move(object)));
  }
  return jinja::Value(std::move(list));
}

}  // namespace

std::optional<std::string_view> BuiltinChatTemplate(std::string_view name) {
  for (const auto& [builtin, text] : kBuiltins) {
    if (builtin == name) return text;
  }
  return std::nullopt;
}

ChatTemplate::ChatTemplate(std::string_view text, std::string bos, std::string eos,
                           std::string description)
    : template_(jinja::Template::Parse(text)),
      bos_(std::move(bos)),
      eos_(std::move(eos)),
      description_(std::move(description)) {}

ChatTemplate ChatTemplate::Resolve(const std::string& spec, const Tokenizer& tokenizer) {
  std::string text;
  std::string description;
  if (spec.empty()) {
    text = tokenizer.chat_template();
    description = "the model's chat template";
    if (text.empty()) {
      spdlog::warn(
          "the model has no chat template; chat prompts use the generic chatml template "
          "(<|im_start|>role ... <|im_end|>); choose another with --chat-template "
          "({}, a file, or Jinja text)",
          kBuiltinChatTemplateNames);
      text = kChatml;
      description = "built-in chat template chatml (the model has none)";
    }
  } else if (std::optional<std::string_view> builtin = BuiltinChatTemplate(spec)) {
    text = *builtin;
    description = "built-in chat template " + spec;
  } else if (std::filesystem::is_regular_file(spec)) {
    text = ReadTemplateFile(spec);
    description = "chat template file " + spec;
  } else if (spec.find("{{") != std::string::npos || spec.find("{%") != std::string::npos) {
    text = spec;
    description = "the chat template given as text";
  } else {
    throw Error(
        fmt::format("unknown chat template '{}': not a built-in name ({}), a file, or "
                    "Jinja template text",
                    spec, kBuiltinChatTemplateNames));
  }
  const std::string hint =
      fmt::format("; choose another with --chat-template ({}, a file, or Jinja text)",
                  kBuiltinChatTemplateNames);
  std::optional<ChatTemplate> chat;
  try {
    chat.emplace(text, TokenText(tokenizer, tokenizer.bos_id()),
                 TokenText(tokenizer, tokenizer.eos_id()), description);
  } catch (const jinja::Error& error) {
    throw Error(fmt::format("{} cannot be parsed: {}{}", description, error.what(), hint));
  }
  // The probe: one user message must render, and its text must be in the prompt.
  constexpr std::string_view kProbe = "Hello, this is a probe.";
  try {
    std::string prompt = chat->Render({{"user", std::string(kProbe)}}, true);
    if (prompt.find(kProbe) == std::string::npos) {
      throw Error(
          fmt::format("{} leaves the user's message out of the prompt{}", description, hint));
    }
  } catch (const jinja::Error& error) {
    throw Error(fmt::format("{} fails on a one-message conversation: {}{}", description,
                            error.what(), hint));
  }
  return std::move(*chat);
}

std::string ChatTemplate::RenderMessages(const jinja::Value& messages,
                                         bool add_generation_prompt) const {
  jinja::Object context;
  context.items = {{"messages", messages},
                   {"bos_token", jinja::Value(bos_)},
                   {"eos_token", jinja::Value(eos_)},
                   {"add_generation_prompt", jinja::Value(add_generation_prompt)},
                   // As transformers passes them when a request has none.
                   {"tools", jinja::Value::None()},
                   {"documents", jinja::Value::None()}};
  return template_.Render(jinja::Value(std::move(context)));
}

std::string ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt) const {
  return RenderMessages(MessagesValue(messages), add_generation_prompt);
}

std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tokenizer, std::string_view prompt) {
  return tokenizer.EncodePrompt(prompt, /*add_bos=*/true);
}

}  // namespace reprise
