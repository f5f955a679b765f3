// Chat prompts without a Jinja engine: the common chat formats written out by hand, recognised
// from a model's tokenizer.chat_template by distinctive substrings (as llama.cpp does).
//
// Contract with the engine (BOS): ApplyChatTemplate returns what the model's Jinja template
// renders, so for families whose templates start with `bos_token` (Llama 2/3, Mistral, Gemma,
// Phi-3) the text starts with the BOS token's text. Encode such a prompt with EncodeChatPrompt
// (parse_special=true, adds BOS only if the text does not already give one), never with
// Encode(prompt, /*add_special=*/true, ...), which would put two BOS tokens in front.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace reprise {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (others are passed through where possible)
  std::string content;
};

enum class ChatTemplateKind {
  kChatML,           // <|im_start|>role\n...<|im_end|>\n (Qwen, Yi, many fine-tunes)
  kLlama2,           // [INST] ... [/INST] without a system block
  kLlama2Sys,        // [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST]
  kLlama2SysBos,     // as kLlama2Sys, each later turn starts with <s>[INST]
  kLlama2SysStrip,   // as kLlama2Sys, contents trimmed
  kMistralV1,        // " [INST] ... [/INST]"
  kMistralV3,        // "[INST] ...[/INST]", assistant contents trimmed
  kMistralV3Tekken,  // "[INST]...[/INST]"
  kMistralV7,        // [SYSTEM_PROMPT] ...[/SYSTEM_PROMPT][INST] ...[/INST]
  kLlama3,           // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  kPhi3,             // <|role|>\n...<|end|>\n
  kZephyr,           // <|role|>\n...<|endoftext|>\n
  kGemma,            // <start_of_turn>user\n...<end_of_turn>\n, "assistant" is "model"
};

// llama.cpp's names: "chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip",
// "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7", "llama3", "phi3", "zephyr",
// "gemma"; "mistral" is taken as "mistral-v3". std::nullopt for others.
std::optional<ChatTemplateKind> ParseChatTemplateName(std::string_view name);
std::string_view ChatTemplateName(ChatTemplateKind kind);

// Recognises the family of a Jinja chat template; std::nullopt when none fits (or empty text).
std::optional<ChatTemplateKind> DetectChatTemplate(const std::string& jinja_text);

// The template chat prompts use: `name` when given (throws Error for an unknown name), else the
// model's own (`model_template`, std::nullopt when not recognised), else, for a model without
// one, chatml, with a warning that names --chat-template.
std::optional<ChatTemplateKind> ResolveChatTemplate(const std::string& name,
                                                    const std::string& model_template);

// Renders a conversation; with add_generation_prompt the text ends with the assistant header so
// that the model continues as the assistant. The tokenizer gives the BOS/EOS texts.
std::string ApplyChatTemplate(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                              bool add_generation_prompt, const Tokenizer& tokenizer);

// Tokenizes a rendered chat prompt: Tokenizer::EncodePrompt(prompt, /*add_bos=*/true).
std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tokenizer, std::string_view prompt);

}  // namespace reprise
