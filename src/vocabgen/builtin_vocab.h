// The vocabulary built into `reprise`: byte-level BPE that TrainBpe learns over corpus.txt (text
// written for this project and compiled into the binary), with ChatML's special tokens and chat
// template, so that make-model and the demo need no vocabulary file.
#pragma once

#include <string>
#include <string_view>

#include "vocabgen/bpe_trainer.h"

namespace reprise::gguf {
class GgufWriter;
}

namespace reprise::vocabgen {

// The training text (corpus.txt).
std::string_view BuiltinCorpus();

// Trains the vocabulary (deterministic; about a second).
BpeVocab BuiltinVocab();

// A short fingerprint of the built-in vocabulary (hex), e.g. to name cached files made with it.
std::string BuiltinVocabFingerprint(const BpeVocab& vocab);

// Writes `vocab` as GGUF tokenizer.* metadata: the "gpt2" model with the "gpt-2" pre-tokenizer,
// <|endoftext|> as BOS/EOS, <|im_end|> as end of turn, and the ChatML chat template.
void WriteTokenizerMetadata(const BpeVocab& vocab, gguf::GgufWriter& writer);

}  // namespace reprise::vocabgen
