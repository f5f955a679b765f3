// Chat templates: detection from real Jinja templates, and output equal to what those
// templates render for simple conversations.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

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

TEST(TokenizerChatTemplate, Llama3MatchesTheModelTemplate) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-bpe");
  const auto kind = DetectChatTemplate(tokenizer.chat_template());
  ASSERT_EQ(kind, ChatTemplateKind::kLlama3);
  // What the GGUF's Jinja template renders (it always ends with the assistant header).
  EXPECT_EQ(ApplyChatTemplate(*kind, kSystemUser, true, tokenizer),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful."
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Contents are trimmed, as `| trim` does.
  EXPECT_EQ(ApplyChatTemplate(*kind, {{"user", "  spaced \n"}}, false, tokenizer),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nspaced<|eot_id|>");
}

TEST(TokenizerChatTemplate, Llama3PromptHasOneBos) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-bpe");
  const std::string prompt =
      ApplyChatTemplate(ChatTemplateKind::kLlama3, kSystemUser, true, tokenizer);
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

TEST(TokenizerChatTemplate, QwenChatMLMatchesTheModelTemplate) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("qwen2");
  const auto kind = DetectChatTemplate(tokenizer.chat_template());
  ASSERT_EQ(kind, ChatTemplateKind::kChatML);
  EXPECT_EQ(ApplyChatTemplate(*kind, kTwoTurns, true, tokenizer),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
            "<|im_start|>user\nTell me a joke.<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(ApplyChatTemplate(*kind, {{"user", "Hi!"}}, false, tokenizer),
            "<|im_start|>user\nHi!<|im_end|>\n");
  // Qwen adds no BOS: the prompt starts with <|im_start|>.
  const std::vector<int32_t> ids =
      EncodeChatPrompt(tokenizer, ApplyChatTemplate(*kind, kSystemUser, true, tokenizer));
  EXPECT_EQ(ids.front(), *tokenizer.FindToken("<|im_start|>"));
  EXPECT_EQ(tokenizer.Decode(ids, {.unparse_special = true}),
            ApplyChatTemplate(*kind, kSystemUser, true, tokenizer));
}

TEST(TokenizerChatTemplate, Phi3MatchesTheModelTemplate) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("phi-3");
  const auto kind = DetectChatTemplate(tokenizer.chat_template());
  ASSERT_EQ(kind, ChatTemplateKind::kPhi3);
  EXPECT_EQ(ApplyChatTemplate(*kind, {{"user", "Hi!"}}, true, tokenizer),
            "<s><|user|>\nHi!<|end|>\n<|assistant|>\n");
  const std::vector<int32_t> ids =
      EncodeChatPrompt(tokenizer, "<s><|user|>\nHi!<|end|>\n<|assistant|>\n");
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids[1], *tokenizer.FindToken("<|user|>"));
}

TEST(TokenizerChatTemplate, Llama2AndMistralFormats) {
  REPRISE_REQUIRE_FIXTURES();
  const Tokenizer& tokenizer = VocabTokenizer("llama-spm");  // bos "<s>", eos "</s>"
  const std::vector<ChatMessage> chat = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kLlama2Sys, chat, true, tokenizer),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]Hello</s>[INST] Bye [/INST]");
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kLlama2SysBos, chat, true, tokenizer),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]Hello</s><s>[INST] Bye [/INST]");
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kMistralV1, chat, true, tokenizer),
            "<s> [INST] Be brief.\n\nHi [/INST] Hello</s> [INST] Bye [/INST]");
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kMistralV3, chat, true, tokenizer),
            "<s>[INST] Be brief.\n\nHi[/INST] Hello</s>[INST] Bye[/INST]");
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kMistralV3Tekken, chat, true, tokenizer),
            "<s>[INST]Be brief.\n\nHi[/INST]Hello</s>[INST]Bye[/INST]");
  EXPECT_EQ(
      ApplyChatTemplate(ChatTemplateKind::kMistralV7, chat, true, tokenizer),
      "<s>[SYSTEM_PROMPT] Be brief.[/SYSTEM_PROMPT][INST] Hi[/INST] Hello</s>[INST] Bye[/INST]");
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kGemma, chat, true, tokenizer),
            "<s><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello"
            "<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kZephyr, {{"user", "Hi"}}, true, tokenizer),
            "<|user|>\nHi<|endoftext|>\n<|assistant|>\n");
  // One BOS token, not two, and "[INST]" follows it as SPM text after a special token.
  const std::vector<int32_t> ids = EncodeChatPrompt(
      tokenizer, ApplyChatTemplate(ChatTemplateKind::kLlama2Sys, chat, true, tokenizer));
  EXPECT_EQ(ids[0], 1);
  EXPECT_NE(ids[1], 1);
  const std::vector<int32_t> inst = tokenizer.Encode("[INST]", false, false);  // "▁[INST]"
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + 1, ids.begin() + 1 + static_cast<long>(inst.size())),
            inst);
}

TEST(TokenizerChatTemplate, DetectsFamiliesBySubstrings) {
  EXPECT_EQ(DetectChatTemplate(""), std::nullopt);
  EXPECT_EQ(DetectChatTemplate("{{ messages }}"), std::nullopt);
  EXPECT_EQ(DetectChatTemplate("{{ '<|im_start|>' + role }}"), ChatTemplateKind::kChatML);
  EXPECT_EQ(DetectChatTemplate("{{ bos_token }}[INST] {{ content }} [/INST]"),
            ChatTemplateKind::kLlama2);
  EXPECT_EQ(DetectChatTemplate("[INST] <<SYS>>\n{{ system }}\n<</SYS>>"),
            ChatTemplateKind::kLlama2Sys);
  EXPECT_EQ(DetectChatTemplate("{{ bos_token + '[INST] ' + content.strip() }} <<SYS>>"),
            ChatTemplateKind::kLlama2SysStrip);
  EXPECT_EQ(DetectChatTemplate("[SYSTEM_PROMPT][INST]"), ChatTemplateKind::kMistralV7);
  EXPECT_EQ(DetectChatTemplate("[AVAILABLE_TOOLS] '[INST]' "), ChatTemplateKind::kMistralV3);
  EXPECT_EQ(DetectChatTemplate("[AVAILABLE_TOOLS] \"[INST]\""), ChatTemplateKind::kMistralV3Tekken);
  EXPECT_EQ(DetectChatTemplate("' [INST] ' + system_message"), ChatTemplateKind::kMistralV1);
  EXPECT_EQ(DetectChatTemplate("<|user|>{{ content }}<|end|><|assistant|>"),
            ChatTemplateKind::kPhi3);
  EXPECT_EQ(DetectChatTemplate("<|user|>\n{{ content }}<|endoftext|>"), ChatTemplateKind::kZephyr);
  EXPECT_EQ(DetectChatTemplate("<start_of_turn>user"), ChatTemplateKind::kGemma);
  EXPECT_EQ(DetectChatTemplate("<|start_header_id|>user<|end_header_id|>"),
            ChatTemplateKind::kLlama3);
}

TEST(TokenizerChatTemplate, Names) {
  for (const char* name :
       {"chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "mistral-v1",
        "mistral-v3", "mistral-v3-tekken", "mistral-v7", "llama3", "phi3", "zephyr", "gemma"}) {
    const auto kind = ParseChatTemplateName(name);
    ASSERT_TRUE(kind.has_value()) << name;
    EXPECT_EQ(ChatTemplateName(*kind), name);
  }
  EXPECT_EQ(ParseChatTemplateName("mistral"), ChatTemplateKind::kMistralV3);
  EXPECT_EQ(ParseChatTemplateName("vicuna"), std::nullopt);
}

}  // namespace
}  // namespace reprise
