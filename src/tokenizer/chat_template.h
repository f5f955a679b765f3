// Chat prompts: a Jinja chat template (the model's tokenizer.chat_template, a built-in one, a
// file or template text) rendered by Reprise's Jinja interpreter as Hugging Face renders it.
//
// Contract with the engine (BOS): the rendered text is what the template writes, so for families
// whose templates start with `bos_token` (Llama 2/3, Mistral, Phi-3) the text starts with the BOS
// token's text. Encode such a prompt with EncodeChatPrompt (parse_special=true, adds BOS only if
// the text does not already give one), never with Encode(prompt, /*add_special=*/true, ...),
// which would put two BOS tokens in front.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/template.h"

namespace reprise {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (others are passed through to the template)
  std::string content;
};

// The built-in templates --chat-template names: "chatml", "llama2", "llama3", "mistral".
inline constexpr const char* kBuiltinChatTemplateNames = "chatml, llama2, llama3, mistral";
// The Jinja text of a built-in template; std::nullopt for other names.
std::optional<std::string_view> BuiltinChatTemplate(std::string_view name);

class ChatTemplate {
 public:
  // `spec` chooses the template: empty for the model's own (a model without one gets chatml,
  // with a warning that names --chat-template), else a built-in name, a path to a file, or the
  // template text itself. The template is parsed and a probe conversation rendered; throws
  // reprise::Error naming the problem when either fails.
  static ChatTemplate Resolve(const std::string& spec, const Tokenizer& tokenizer);
  // A template from its text, with the BOS/EOS texts it is given (no probe).
  ChatTemplate(std::string_view text, std::string bos, std::string eos, std::string description);

  // `messages` is a list of {"role", "content", ...} dicts (tool calls and other fields pass
  // through). Throws jinja::Error when the template fails or raises (e.g. on a role order it
  // refuses).
  std::string RenderMessages(const jinja::Value& messages, bool add_generation_prompt) const;
  std::string Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  // Where the template came from, for logs: "the model's", "built-in chatml", "file x.jinja", ...
  const std::string& description() const { return description_; }

 private:
  jinja::Template template_;
  std::string bos_;
  std::string eos_;
  std::string description_;
};

// Tokenizes a rendered chat prompt: Tokenizer::EncodePrompt(prompt, /*add_bos=*/true).
std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tokenizer, std::string_view prompt);

}  // namespace reprise
