// What the engine derives from a model file and a prompt before any weights are used: the
// chat-templated text, its tokens, and the root fingerprint that every KV block key starts from.
// The engine and `reprise route` (which loads only the tokenizer) both use these, so a router
// computes the very block keys the replicas compute.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "gguf/gguf_file.h"
#include "kernels/paged_attention.h"
#include "reprise/engine.h"
#include "tokenizer/tokenizer.h"

namespace reprise {

// The chat rendered with the named template ("" = the model's own); Error when none applies.
std::string RenderChat(const Tokenizer& tokenizer, const std::vector<Engine::ChatMessage>& messages,
                       const std::string& template_name);

// Engine::Tokenize: with add_special_tokens, BOS is added as the model asks (never twice).
std::vector<int32_t> TokenizePrompt(const Tokenizer& tokenizer, const std::string& text,
                                    bool add_special_tokens);

// The cache's root fingerprint: the model file's weights fingerprint, the KV type and the block
// size. Blocks of another model or KV setting can never match.
Digest KvRootFingerprint(const Digest& weights_fingerprint, kernels::KvType kv_type,
                         int block_size);

}  // namespace reprise
