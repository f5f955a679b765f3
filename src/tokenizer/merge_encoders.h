// The two merge algorithms: SentencePiece-style BPE by token score (vocab type "llama") and
// byte-level BPE by merge rank (vocab type "gpt2"). Both follow llama.cpp's tie-breaking exactly.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace reprise {

// Encodes one SPM fragment whose spaces are already escaped as U+2581: starts from single UTF-8
// characters and repeatedly merges the adjacent pair that forms the token with the highest score
// (leftmost on ties); symbols that are not tokens fall back to byte tokens.
void EncodeSpm(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

// Encodes one pre-tokenized, byte-encoded word: starts from single characters and repeatedly
// merges the adjacent pair with the lowest merge rank (leftmost on ties). With ignore_merges a
// word that is itself a token is taken whole (Llama 3).
void EncodeBpeWord(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out);

}  // namespace reprise
