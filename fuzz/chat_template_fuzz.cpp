// Fuzz target: the hand-written chat formats (src/tokenizer/chat_template): template detection
// on arbitrary Jinja text, and rendering arbitrary conversations in every known format, then
// encoding them as the engine does. The Jinja interpreter has its own target (jinja_fuzz.cpp).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "gguf/gguf_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace {

const reprise::Tokenizer& Vocabulary() {
  static const auto tokenizer = [] {
    auto file =
        reprise::gguf::GgufFile::Open(reprise::fuzz::Fixture("vocab/ggml-vocab-llama-bpe.gguf"));
    return std::make_unique<reprise::Tokenizer>(reprise::Tokenizer::FromGguf(file));
  }();
  return *tokenizer;
}

constexpr reprise::ChatTemplateKind kKinds[] = {
    reprise::ChatTemplateKind::kChatML,         reprise::ChatTemplateKind::kLlama2,
    reprise::ChatTemplateKind::kLlama2Sys,      reprise::ChatTemplateKind::kLlama2SysBos,
    reprise::ChatTemplateKind::kLlama2SysStrip, reprise::ChatTemplateKind::kMistralV1,
    reprise::ChatTemplateKind::kMistralV3,      reprise::ChatTemplateKind::kMistralV3Tekken,
    reprise::ChatTemplateKind::kMistralV7,      reprise::ChatTemplateKind::kLlama3,
    reprise::ChatTemplateKind::kPhi3,           reprise::ChatTemplateKind::kZephyr,
    reprise::ChatTemplateKind::kGemma,
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  reprise::fuzz::QuietLogging();
  Vocabulary();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  reprise::fuzz::InputReader input(data, size);
  const uint8_t choice = input.Byte();
  if (choice & 0x80) {
    // The input is a model's template text.
    std::string jinja(input.Rest());
    if (auto kind = reprise::DetectChatTemplate(jinja)) reprise::ChatTemplateName(*kind);
    return 0;
  }
  const reprise::ChatTemplateKind kind = kKinds[choice % std::size(kKinds)];
  const bool add_generation_prompt = choice & 0x40;
  std::vector<reprise::ChatMessage> messages;
  while (!input.empty() && messages.size() < 64) {
    std::string role(input.Field('\x02'));
    std::string content(input.Field('\x01'));
    messages.push_back({std::move(role), std::move(content)});
  }
  try {
    std::string prompt =
        reprise::ApplyChatTemplate(kind, messages, add_generation_prompt, Vocabulary());
    reprise::EncodeChatPrompt(Vocabulary(), prompt);
  } catch (const reprise::Error&) {
    // A conversation the format cannot express (e.g. roles out of order) is refused.
  }
  return 0;
}
