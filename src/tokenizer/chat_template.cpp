#include "tokenizer/chat_template.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/text.h"
#include "tokenizer/tokenizer.h"

namespace reprise {
namespace {

constexpr std::array<std::pair<std::string_view, ChatTemplateKind>, 13> kNames = {{
    {"chatml", ChatTemplateKind::kChatML},
    {"llama2", ChatTemplateKind::kLlama2},
    {"llama2-sys", ChatTemplateKind::kLlama2Sys},
    {"llama2-sys-bos", ChatTemplateKind::kLlama2SysBos},
    {"llama2-sys-strip", ChatTemplateKind::kLlama2SysStrip},
    {"mistral-v1", ChatTemplateKind::kMistralV1},
    {"mistral-v3", ChatTemplateKind::kMistralV3},
    {"mistral-v3-tekken", ChatTemplateKind::kMistralV3Tekken},
    {"mistral-v7", ChatTemplateKind::kMistralV7},
    {"llama3", ChatTemplateKind::kLlama3},
    {"phi3", ChatTemplateKind::kPhi3},
    {"zephyr", ChatTemplateKind::kZephyr},
    {"gemma", ChatTemplateKind::kGemma},
}};

// Whether the family's official templates start with {{ bos_token }}.
bool StartsWithBos(ChatTemplateKind kind) {
  return kind != ChatTemplateKind::kChatML && kind != ChatTemplateKind::kZephyr;
}

std::string TokenText(const Tokenizer& tokenizer, int32_t id, std::string_view fallback) {
  return id >= 0 ? tokenizer.vocab().token(id).text : std::string(fallback);
}

void RenderLlama2(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                  const std::string& bos, const std::string& eos, std::string& out) {
  const bool system_block = kind != ChatTemplateKind::kLlama2;
  const bool bos_inside_history = kind == ChatTemplateKind::kLlama2SysBos;
  const bool strip = kind == ChatTemplateKind::kLlama2SysStrip;
  bool inside_turn = true;
  out += "[INST] ";
  for (const ChatMessage& message : messages) {
    const std::string content = strip ? TrimAsciiSpace(message.content) : message.content;
    if (!inside_turn) {
      inside_turn = true;
      out += bos_inside_history ? bos + "[INST] " : "[INST] ";
    }
    if (message.role == "system") {
      if (system_block) {
        out += "<<SYS>>\n" + content + "\n<</SYS>>\n\n";
      } else {
        out += content + "\n";  // no system block: prepend it to the first user message
      }
    } else if (message.role == "user") {
      out += content + " [/INST]";
    } else {
      out += content + eos;
      inside_turn = false;
    }
  }
}

void RenderMistral(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                   const std::string& eos, std::string& out) {
  const std::string leading_space = kind == ChatTemplateKind::kMistralV1 ? " " : "";
  const std::string trailing_space = kind == ChatTemplateKind::kMistralV3Tekken ? "" : " ";
  const bool trim_assistant = kind == ChatTemplateKind::kMistralV3;
  bool inside_turn = false;
  for (const ChatMessage& message : messages) {
    if (!inside_turn) {
      out += leading_space + "[INST]" + trailing_space;
      inside_turn = true;
    }
    if (message.role == "system") {
      out += message.content + "\n\n";
    } else if (message.role == "user") {
      out += message.content + leading_space + "[/INST]";
    } else {
      out += trailing_space +
             (trim_assistant ? TrimAsciiSpace(message.content) : message.content) + eos;
      inside_turn = false;
    }
  }
}

void RenderMistralV7(const std::vector<ChatMessage>& messages, const std::string& eos,
                     std::string& out) {
  for (const ChatMessage& message : messages) {
    if (message.role == "system") {
      out += "[SYSTEM_PROMPT] " + message.content + "[/SYSTEM_PROMPT]";
    } else if (message.role == "user") {
      out += "[INST] " + message.content + "[/INST]";
    } else {
      out += " " + message.content + eos;
    }
  }
}

void RenderGemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                 std::string& out) {
  // Gemma has no system role: the system text goes in front of the next user turn.
  std::string system_prompt;
  for (const ChatMessage& message : messages) {
    if (message.role == "system") {
      system_prompt += TrimAsciiSpace(message.content);
      continue;
    }
    const std::string role = message.role == "assistant" ? "model" : message.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system_prompt.empty() && role != "model") {
      out += system_prompt + "\n\n";
      system_prompt.clear();
    }
    out += TrimAsciiSpace(message.content) + "<end_of_turn>\n";
  }
  if (add_generation_prompt) {
    out += "<start_of_turn>model\n";
  }
}

}  // namespace

std::optional<ChatTemplateKind> ParseChatTemplateName(std::string_view name) {
  if (name == "mistral") {
    return ChatTemplateKind::kMistralV3;
  }
  for (const auto& [known, kind] : kNames) {
    if (known == name) {
      return kind;
    }
  }
  return std::nullopt;
}

std::string_view ChatTemplateName(ChatTemplateKind kind) {
  for (const auto& [name, known] : kNames) {
    if (known == kind) {
      return name;
    }
  }
  return "unknown";
}

std::optional<ChatTemplateKind> DetectChatTemplate(const std::string& jinja_text) {
  const auto contains = [&](std::string_view needle) {
    return jinja_text.find(needle) != std::string::npos;
  };
  if (jinja_text.empty()) {
    return std::nullopt;
  }
  if (contains("<|im_start|>")) {
    return ChatTemplateKind::kChatML;
  }
  if (jinja_text.starts_with("mistral") || contains("[INST]")) {
    if (contains("[SYSTEM_PROMPT]")) {
      return ChatTemplateKind::kMistralV7;
    }
    if (contains("' [INST] ' + system_message") || contains("[AVAILABLE_TOOLS]")) {
      if (contains(" [INST]")) {
        return ChatTemplateKind::kMistralV1;
      }
      if (contains("\"[INST]\"")) {
        return ChatTemplateKind::kMistralV3Tekken;
      }
      return ChatTemplateKind::kMistralV3;
    }
    if (contains("content.strip()")) {
      return ChatTemplateKind::kLlama2SysStrip;
    }
    if (contains("bos_token + '[INST]")) {
      return ChatTemplateKind::kLlama2SysBos;
    }
    return contains("<<SYS>>") ? ChatTemplateKind::kLlama2Sys : ChatTemplateKind::kLlama2;
  }
  if (contains("<|assistant|>") && contains("<|end|>")) {
    return ChatTemplateKind::kPhi3;
  }
  if (contains("<|user|>") && contains("<|endoftext|>")) {
    return ChatTemplateKind::kZephyr;
  }
  if (contains("<start_of_turn>")) {
    return ChatTemplateKind::kGemma;
  }
  if (contains("<|start_header_id|>") && contains("<|end_header_id|>")) {
    return ChatTemplateKind::kLlama3;
  }
  return std::nullopt;
}

std::optional<ChatTemplateKind> ResolveChatTemplate(const std::string& name,
                                                    const std::string& model_template) {
  if (!name.empty()) {
    std::optional<ChatTemplateKind> kind = ParseChatTemplateName(name);
    if (!kind) {
      throw Error(
          fmt::format("unknown chat template '{}' (use llama2, llama3, chatml or mistral)", name));
    }
    return kind;
  }
  if (model_template.empty()) {
    spdlog::warn(
        "the model has no chat template; chat prompts use the generic chatml template "
        "(<|im_start|>role ... <|im_end|>); choose another with --chat-template");
    return ChatTemplateKind::kChatML;
  }
  std::optional<ChatTemplateKind> kind = DetectChatTemplate(model_template);
  if (!kind) {
    spdlog::warn(
        "the model's chat template is not one Reprise recognises; chat requests will "
        "fail until one is chosen with --chat-template");
  }
  return kind;
}

std::string ApplyChatTemplate(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                              bool add_generation_prompt, const Tokenizer& tokenizer) {
  const std::string bos = TokenText(tokenizer, tokenizer.bos_id(), "");
  const std::string eos = TokenText(tokenizer, tokenizer.eos_id(), "</s>");
  std::string out = StartsWithBos(kind) ? bos : "";
  switch (kind) {
    case ChatTemplateKind::kChatML:
      for (const ChatMessage& message : messages) {
        out += "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n";
      }
      if (add_generation_prompt) {
        out += "<|im_start|>assistant\n";
      }
      break;
    case ChatTemplateKind::kLlama2:
    case ChatTemplateKind::kLlama2Sys:
    case ChatTemplateKind::kLlama2SysBos:
    case ChatTemplateKind::kLlama2SysStrip:
      RenderLlama2(kind, messages, bos, eos, out);
      break;
    case ChatTemplateKind::kMistralV1:
    case ChatTemplateKind::kMistralV3:
    case ChatTemplateKind::kMistralV3Tekken:
      RenderMistral(kind, messages, eos, out);
      break;
    case ChatTemplateKind::kMistralV7:
      RenderMistralV7(messages, eos, out);
      break;
    case ChatTemplateKind::kLlama3:
      for (const ChatMessage& message : messages) {
        out += "<|start_header_id|>" + message.role + "<|end_header_id|>\n\n" +
               TrimAsciiSpace(message.content) + "<|eot_id|>";
      }
      if (add_generation_prompt) {
        out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      }
      break;
    case ChatTemplateKind::kPhi3:
      for (const ChatMessage& message : messages) {
        out += "<|" + message.role + "|>\n" + message.content + "<|end|>\n";
      }
      if (add_generation_prompt) {
        out += "<|assistant|>\n";
      }
      break;
    case ChatTemplateKind::kZephyr:
      for (const ChatMessage& message : messages) {
        out += "<|" + message.role + "|>\n" + message.content + "<|endoftext|>\n";
      }
      if (add_generation_prompt) {
        out += "<|assistant|>\n";
      }
      break;
    case ChatTemplateKind::kGemma:
      RenderGemma(messages, add_generation_prompt, out);
      break;
  }
  return out;
}

std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tokenizer, std::string_view prompt) {
  return tokenizer.EncodePrompt(prompt, /*add_bos=*/true);
}

}  // namespace reprise
