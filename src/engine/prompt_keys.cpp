#include "engine/prompt_keys.h"

#include <fmt/format.h>

#include <optional>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace reprise {

std::string RenderChat(const Tokenizer& tokenizer, const std::vector<Engine::ChatMessage>& messages,
                       const std::string& template_name) {
  std::optional<ChatTemplateKind> kind;
  if (!template_name.empty()) {
    kind = ParseChatTemplateName(template_name);
    if (!kind) throw Error(fmt::format("unknown chat template '{}'", template_name));
  } else {
    kind = DetectChatTemplate(tokenizer.chat_template());
    if (!kind) {
      throw Error(tokenizer.chat_template().empty()
                      ? "the model has no chat template; start the server with --chat-template "
                        "(llama2, llama3, chatml, mistral)"
                      : "the model's chat template is not one Reprise recognises; start the server "
                        "with --chat-template (llama2, llama3, chatml, mistral)");
    }
  }
  std::vector<reprise::ChatMessage> converted;
  for (const auto& message : messages) converted.push_back({message.role, message.content});
  return reprise::ApplyChatTemplate(*kind, converted, true, tokenizer);
}

std::vector<int32_t> TokenizePrompt(const Tokenizer& tokenizer, const std::string& text,
                                    bool add_special_tokens) {
  return add_special_tokens ? EncodeChatPrompt(tokenizer, text)
                            : tokenizer.Encode(text, false, true);
}

Digest KvRootFingerprint(const Digest& weights_fingerprint, kernels::KvType kv_type,
                         int block_size) {
  Sha256 fingerprint;
  fingerprint.Update("reprise-kv-v1");
  fingerprint.Update(weights_fingerprint.data(), weights_fingerprint.size());
  fingerprint.UpdateValue(static_cast<uint32_t>(kv_type));
  fingerprint.UpdateValue(static_cast<uint32_t>(block_size));
  return fingerprint.Finish();
}

}  // namespace reprise
