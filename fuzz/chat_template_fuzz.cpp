// Fuzz target: chat templates (src/tokenizer/chat_template): the built-in templates rendering
// arbitrary conversations, and arbitrary template text (as a model file or --chat-template may
// carry) rendering one, then encoding the prompt as the engine does. The Jinja interpreter's
// parser has its own target (jinja_fuzz.cpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "gguf/gguf_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace {

// The most of a rendered prompt the target encodes.
constexpr size_t kEncodedBytes = size_t{256} << 10;

const reprise::Tokenizer& Vocabulary() {
  static const auto tokenizer = [] {
    auto file =
        reprise::gguf::GgufFile::Open(reprise::fuzz::Fixture("vocab/ggml-vocab-llama-bpe.gguf"));
    return std::make_unique<reprise::Tokenizer>(reprise::Tokenizer::FromGguf(file));
  }();
  return *tokenizer;
}

// The built-in templates, resolved once as --chat-template NAME resolves them.
const std::vector<reprise::ChatTemplate>& Builtins() {
  static const auto templates = [] {
    std::vector<reprise::ChatTemplate> result;
    for (const char* name : {"chatml", "llama2", "llama3", "mistral"}) {
      result.push_back(reprise::ChatTemplate::Resolve(name, Vocabulary()));
    }
    return result;
  }();
  return templates;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  reprise::fuzz::QuietLogging();
  Builtins();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  reprise::fuzz::InputReader input(data, size);
  const uint8_t choice = input.Byte();
  const bool add_generation_prompt = choice & 0x40;
  std::optional<reprise::ChatTemplate> own;
  if (choice & 0x80) {
    // The first field is a model's template text (not a name or a path: no file is read).
    std::string text(input.Field('\x03'));
    try {
      own.emplace(text, "<s>", "</s>", "fuzzed template");
    } catch (const reprise::Error&) {
      return 0;  // a template that does not parse is refused
    }
  }
  const reprise::ChatTemplate& chat = own ? *own : Builtins()[choice % Builtins().size()];
  std::vector<reprise::ChatMessage> messages;
  while (!input.empty() && messages.size() < 64) {
    std::string role(input.Field('\x02'));
    std::string content(input.Field('\x01'));
    messages.push_back({std::move(role), std::move(content)});
  }
  try {
    std::string prompt = chat.Render(messages, add_generation_prompt);
    // Encoding is linear in the prompt (the tokenizer's tests time million-character runs), but a
    // template may repeat a string up to the renderer's 16 MiB limit, and under ASan encoding
    // that much takes about 3 s a MiB: a prefix keeps each input far from the run's timeout.
    reprise::EncodeChatPrompt(Vocabulary(), std::string_view(prompt).substr(0, kEncodedBytes));
  } catch (const reprise::Error&) {
    // A conversation the template refuses (raise_exception, roles out of order) or a template
    // that fails or exceeds its limits while rendering: an error, never a crash.
  }
  return 0;
}
