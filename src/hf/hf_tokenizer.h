// A Hugging Face tokenizer (tokenizer.json, tokenizer_config.json, chat_template.jinja) turned
// into the GGUF tokenizer keys that Vocab reads, so that the one tokenizer serves both formats:
// SentencePiece-style BPE (U+2581 for spaces, byte fallback) as "llama" with scores from the
// merge ranks, byte-level BPE as "gpt2" with its merges and the pre-tokenizer its regex names.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "hf/metadata.h"

namespace reprise::hf {

// Reads the tokenizer files of `dir` into `metadata` (tokenizer.* keys); `config` (config.json)
// supplies bos/eos ids that tokenizer_config.json lacks; `vocab_size` is the model's (the token
// table is padded to it). Throws Error("<file>: ...") naming the field.
void ReadTokenizer(const std::string& dir, const nlohmann::json& config, int64_t vocab_size,
                   Metadata& metadata);

}  // namespace reprise::hf
