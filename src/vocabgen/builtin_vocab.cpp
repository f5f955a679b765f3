#include "vocabgen/builtin_vocab.h"

#include "core/sha256.h"
#include "gguf/gguf_writer.h"

namespace reprise::vocabgen {
namespace {

// Enough merges to learn every pair the corpus repeats; training stops earlier when it runs out.
constexpr size_t kMaxMerges = 8000;

constexpr const char* kEndOfText = "<|endoftext|>";
constexpr const char* kImStart = "<|im_start|>";
constexpr const char* kImEnd = "<|im_end|>";

// ChatML, as Hugging Face chat templates spell it.
constexpr const char* kChatTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

int32_t IdOf(const BpeVocab& vocab, const std::string& text) {
  for (size_t id = vocab.tokens.size(); id-- > 0;) {
    if (vocab.tokens[id] == text) return static_cast<int32_t>(id);
  }
  return -1;
}

}  // namespace

BpeVocab BuiltinVocab() {
  return TrainBpe(BuiltinCorpus(), kMaxMerges, {kEndOfText, kImStart, kImEnd});
}

std::string BuiltinVocabFingerprint(const BpeVocab& vocab) {
  Sha256 hash;
  for (const std::string& token : vocab.tokens) hash.Update(token + '\n');
  for (const std::string& merge : vocab.merges) hash.Update(merge + '\n');
  return ToHex(hash.Finish()).substr(0, 12);
}

void WriteTokenizerMetadata(const BpeVocab& vocab, gguf::GgufWriter& writer) {
  writer.SetString("tokenizer.ggml.model", "gpt2");
  writer.SetString("tokenizer.ggml.pre", "gpt-2");
  writer.SetStringArray("tokenizer.ggml.tokens", vocab.tokens);
  writer.SetInt32Array("tokenizer.ggml.token_type", vocab.token_types);
  writer.SetStringArray("tokenizer.ggml.merges", vocab.merges);
  writer.SetUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(IdOf(vocab, kEndOfText)));
  writer.SetUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(IdOf(vocab, kEndOfText)));
  writer.SetUint32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(IdOf(vocab, kImEnd)));
  writer.SetBool("tokenizer.ggml.add_bos_token", false);
  writer.SetString("tokenizer.chat_template", kChatTemplate);
}

}  // namespace reprise::vocabgen
