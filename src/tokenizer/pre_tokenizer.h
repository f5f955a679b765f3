// Pre-tokenizers of byte-level BPE vocabularies: split text into words before BPE merging, with
// the same splits as the models' Hugging Face regexes (as llama.cpp applies them, pass by pass).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace reprise {

enum class PreTokenizerKind {
  kDefault,        // "default" (and a missing tokenizer.ggml.pre)
  kLlama3,         // "llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", ...
  kQwen2,          // "qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"
  kGpt2,           // "gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-*", ...
  kDeepseekLlm,    // "deepseek-llm"
  kDeepseekCoder,  // "deepseek-coder"
  kDeepseek3,      // "deepseek-v3"
  kFalcon,         // "falcon"
  kStarcoder,      // "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", ...
  kBloom,          // "bloom", "poro-chat", "gpt3-finnish"
  kViking,         // "viking"
  kTekken,         // "tekken" (Mistral Nemo, Mistral Small 3)
  kGpt4o,          // "gpt-4o", "llama4"
};

// Maps a tokenizer.ggml.pre name to its pre-tokenizer; std::nullopt for names not supported.
std::optional<PreTokenizerKind> ParsePreTokenizer(std::string_view name);

// Splits `text` (code points) into words; returns the length in code points of each word, in
// order (the lengths add up to text.size()).
std::vector<size_t> SplitWords(PreTokenizerKind kind, std::span<const uint32_t> text);

}  // namespace reprise
