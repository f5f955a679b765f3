// Fuzz target: the tokenizers of real vocabularies (SPM and byte-level BPE with several
// pre-tokenizers) on arbitrary text and arbitrary ids: Encode, Decode, TokenToPiece and the
// streaming detokenizer. Beyond not crashing: for valid UTF-8, byte-level BPE decodes what it
// encoded, and streaming its tokens gives the same text as decoding them at once.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "gguf/gguf_file.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace {

struct Loaded {
  std::unique_ptr<reprise::Tokenizer> tokenizer;
  // Byte-level BPE with a token for each of the 256 byte characters: every valid UTF-8 text
  // round-trips. (StarCoder's vocabulary lacks the byte 0xF1, so text in planes 4-7 cannot.)
  bool byte_level = false;
};

std::vector<Loaded>& Vocabularies() {
  static std::vector<Loaded> vocabularies = [] {
    std::vector<Loaded> loaded;
    for (const char* name : {"llama-spm", "llama-bpe", "qwen2", "gpt-2", "starcoder", "phi-3"}) {
      auto file = reprise::gguf::GgufFile::Open(
          reprise::fuzz::Fixture(std::string("vocab/ggml-vocab-") + name + ".gguf"));
      auto tokenizer = std::make_unique<reprise::Tokenizer>(reprise::Tokenizer::FromGguf(file));
      bool byte_level =
          tokenizer->model_name() == "gpt2" && tokenizer->vocab().MissingByteTokens() == 0;
      loaded.push_back({std::move(tokenizer), byte_level});
    }
    return loaded;
  }();
  return vocabularies;
}

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

std::string Stream(const reprise::Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  reprise::StreamingDetokenizer detokenizer(tokenizer);
  std::string text;
  for (int32_t id : ids) {
    std::string piece = detokenizer.Push(id);
    Check(reprise::unicode::IsValidUtf8(piece));  // never half a character
    text += piece;
  }
  std::string rest = detokenizer.Flush();
  Check(reprise::unicode::IsValidUtf8(rest));
  return text + rest;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  reprise::fuzz::QuietLogging();
  Vocabularies();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  reprise::fuzz::InputReader input(data, size);
  const Loaded& loaded = Vocabularies()[input.Byte() % Vocabularies().size()];
  const reprise::Tokenizer& tokenizer = *loaded.tokenizer;
  const uint8_t flags = input.Byte();
  const bool add_special = flags & 1;
  const bool parse_special = flags & 2;

  if (flags & 4) {
    // Arbitrary ids, a few beyond the vocabulary: those are an Error, never a crash.
    std::string_view raw = input.Rest();
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 2 <= raw.size(); i += 2) {
      auto value = static_cast<uint16_t>(static_cast<uint8_t>(raw[i]) |
                                         static_cast<uint8_t>(raw[i + 1]) << 8);
      ids.push_back(static_cast<int32_t>(value % (tokenizer.vocab_size() + 8)));
    }
    try {
      tokenizer.Decode(ids, {.remove_special = add_special, .unparse_special = parse_special});
    } catch (const reprise::Error&) {
    }
    try {
      Stream(tokenizer, ids);
    } catch (const reprise::Error&) {
    }
    return 0;
  }

  std::string_view text = input.Rest();
  std::vector<int32_t> ids = tokenizer.Encode(text, add_special, parse_special);
  for (int32_t id : ids) Check(id >= 0 && id < tokenizer.vocab_size());
  std::string decoded = tokenizer.Decode(ids);
  if (loaded.byte_level && !add_special && !parse_special && reprise::unicode::IsValidUtf8(text)) {
    Check(decoded == text);
    Check(Stream(tokenizer, ids) == decoded);
  } else {
    Stream(tokenizer, ids);
  }
  return 0;
}
