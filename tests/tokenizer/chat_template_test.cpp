// Chat templates: the models' own Jinja templates and the built-in ones rendered for simple
// conversations, the BOS contract, and how --chat-template's NAME|FILE|TEXT is resolved and
// checked. (Equality with python3-jinja2 over many conversations is tests/jinja's job.)
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "vocab_cache.h"

namespace reprise {
namespace {

using ::reprise::testing::VocabTokenizer;

const std::vector<ChatMessage> kSystemUser = {{"system", "You are helpful."}, {"user", "Hi!"}};
const std::vector<ChatMessage> kTwoTurns = {{"system", "You are helpful."},
                                            {"user", "Hi!"},
                                            {"assistant", "Hello! How can I help?"},
                                            {"user", "Tell me a joke."}};

std::string ErrorOf(const std::string& spec, const Tokenizer& tokenizer) {
  try {
    ChatTemplate::Resolve(spec, tokenizer);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(TokenizerChatTemplate, Llama3ModelTemplateAndBuiltin) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-bpe");
  const std::string expected =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful."
      "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(ChatTemplate::Resolve("", tokenizer).Render(kSystemUser, true), expected);
  EXPECT_EQ(ChatTemplate::Resolve("llama3", tokenizer).Render(kSystemUser, true), expected);
  // Contents are trimmed, as `| trim` does.
  EXPECT_EQ(ChatTemplate::Resolve("llama3", tokenizer).Render({{"user", "  spaced \n"}}, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nspaced<|eot_id|>");
}

TEST(TokenizerChatTemplate, Llama3PromptHasOneBos) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-bpe");
  const std::string prompt = ChatTemplate::Resolve("", tokenizer).Render(kSystemUser, true);
  const std::vector<int32_t> ids = EncodeChatPrompt(tokenizer, prompt);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], 128000);
  EXPECT_NE(ids[1], 128000);
  EXPECT_EQ(ids[1], *tokenizer.FindToken("<|start_header_id|>"));
  EXPECT_EQ(ids.back(), tokenizer.Encode("\n\n", false, false).back());
  // A prompt without the BOS text gets one too.
  const std::vector<int32_t> no_bos = EncodeChatPrompt(tokenizer, prompt.substr(17));
  EXPECT_EQ(no_bos, ids);
}

TEST(TokenizerChatTemplate, QwenModelTemplateIsChatml) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("qwen2");
  const ChatTemplate chat = ChatTemplate::Resolve("", tokenizer);
  const std::string expected =
      "<|im_start|>system\nYou are helpful.<|im_end|>\n"
      "<|im_start|>user\nHi!<|im_end|>\n"
      "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
      "<|im_start|>user\nTell me a joke.<|im_end|>\n"
      "<|im_start|>assistant\n";
  EXPECT_EQ(chat.Render(kTwoTurns, true), expected);
  EXPECT_EQ(ChatTemplate::Resolve("chatml", tokenizer).Render(kTwoTurns, true), expected);
  // Qwen adds no BOS: the prompt starts with <|im_start|>.
  const std::string prompt = chat.Render(kSystemUser, true);
  const std::vector<int32_t> ids = EncodeChatPrompt(tokenizer, prompt);
  EXPECT_EQ(ids.front(), *tokenizer.FindToken("<|im_start|>"));
  EXPECT_EQ(tokenizer.Decode(ids, {.unparse_special = true}), prompt);
}

TEST(TokenizerChatTemplate, Phi3ModelTemplate) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("phi-3");
  const std::string prompt = ChatTemplate::Resolve("", tokenizer).Render({{"user", "Hi!"}}, true);
  EXPECT_NE(prompt.find("<|user|>\nHi!<|end|>\n<|assistant|>\n"), std::string::npos) << prompt;
  const std::vector<int32_t> ids = EncodeChatPrompt(tokenizer, prompt);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 1);
}

TEST(TokenizerChatTemplate, Llama2AndMistralBuiltins) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-spm");  // bos "<s>", eos "</s>"
  const std::vector<ChatMessage> chat = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};
  EXPECT_EQ(ChatTemplate::Resolve("llama2", tokenizer).Render(chat, true),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Bye [/INST]");
  EXPECT_EQ(ChatTemplate::Resolve("mistral", tokenizer).Render(chat, true),
            "<s>[INST] Be brief.\n\nHi[/INST] Hello</s>[INST] Bye[/INST]");
  // Both refuse roles that do not alternate.
  for (const char* name : {"llama2", "mistral"}) {
    EXPECT_THROW(
        ChatTemplate::Resolve(name, tokenizer).Render({{"user", "a"}, {"user", "b"}}, true),
        jinja::Error)
        << name;
  }
  // One BOS token, not two, and "[INST]" follows it as SPM text after a special token.
  const std::vector<int32_t> ids =
      EncodeChatPrompt(tokenizer, ChatTemplate::Resolve("llama2", tokenizer).Render(chat, true));
  EXPECT_EQ(ids[0], 1);
  EXPECT_NE(ids[1], 1);
  const std::vector<int32_t> inst = tokenizer.Encode("[INST]", false, false);  // "▁[INST]"
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + 1, ids.begin() + 1 + static_cast<long>(inst.size())),
            inst);
}

TEST(TokenizerChatTemplate, ModelWithoutTemplateGetsChatml) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("gpt-2");
  ASSERT_EQ(tokenizer.chat_template(), "");
  const ChatTemplate chat = ChatTemplate::Resolve("", tokenizer);
  EXPECT_NE(chat.description().find("chatml"), std::string::npos);
  EXPECT_EQ(chat.Render({{"user", "Hi"}}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(TokenizerChatTemplate, SpecIsANameAFileOrText) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-spm");
  const std::string text = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}";
  EXPECT_EQ(ChatTemplate::Resolve(text, tokenizer).Render({{"user", "Hi"}}, true), "<user>Hi");

  const auto path = testing::ScratchDir() / "template.jinja";
  std::ofstream(path) << text << "{% if add_generation_prompt %}<assistant>{% endif %}\n";
  const ChatTemplate from_file = ChatTemplate::Resolve(path.string(), tokenizer);
  EXPECT_EQ(from_file.Render({{"user", "Hi"}}, true), "<user>Hi<assistant>");
  EXPECT_NE(from_file.description().find(path.string()), std::string::npos);

  // Each failure names the problem and --chat-template.
  std::string unknown = ErrorOf("vicuna", tokenizer);
  EXPECT_NE(unknown.find("unknown chat template 'vicuna'"), std::string::npos) << unknown;
  std::string syntax = ErrorOf("{% for m in messages %}", tokenizer);
  EXPECT_NE(syntax.find("cannot be parsed"), std::string::npos) << syntax;
  EXPECT_NE(syntax.find("endfor"), std::string::npos) << syntax;
  EXPECT_NE(syntax.find("--chat-template"), std::string::npos) << syntax;
  std::string raises = ErrorOf("{{ raise_exception('no users here') }}", tokenizer);
  EXPECT_NE(raises.find("no users here"), std::string::npos) << raises;
  std::string ignores =
      ErrorOf("{{ bos_token }}{% if false %}{{ messages }}{% endif %}", tokenizer);
  EXPECT_NE(ignores.find("leaves the user's message out"), std::string::npos) << ignores;
  std::string undefined = ErrorOf("{{ messages[0].content.nothing.deeper }}", tokenizer);
  EXPECT_NE(undefined.find("undefined"), std::string::npos) << undefined;
}

}  // namespace
}  // namespace reprise
