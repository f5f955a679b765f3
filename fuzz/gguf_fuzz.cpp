// Fuzz target: an arbitrary file given to the GGUF reader, the model loader (hyper-parameter and
// tensor validation) and the tokenizer loader. Only reprise::Error may come out; when a model
// and its tokenizer load and agree on the vocabulary (what the engine requires), every id must
// have a text.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "fuzz_support.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace {

// The input as a file the loaders can open and map, in memory.
const std::string& WriteInput(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("gguf_fuzz", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 ||
      (size > 0 && ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))) {
    std::abort();
  }
  return path;
}

void ExerciseTokenizer(const reprise::Tokenizer& tokenizer, int64_t model_vocab) {
  if (model_vocab >= 0 && tokenizer.vocab_size() != model_vocab) return;  // refused at load
  const int32_t limit = std::min(tokenizer.vocab_size(), 4096);
  for (int32_t id = 0; id < limit; ++id) tokenizer.TokenToPiece(id);
  auto tokens = tokenizer.Encode("Hello world, <s> 123 \xC3\xA9!", true, true);
  tokenizer.Decode(tokens);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  reprise::fuzz::QuietLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = WriteInput(data, size);
  try {
    auto model = reprise::Model::Load(path);
    auto tokenizer = reprise::Tokenizer::FromGguf(model->file());
    ExerciseTokenizer(tokenizer, model->config().vocab_size);
  } catch (const reprise::Error&) {
    // A refused file: what must happen to a broken one.
  }
  try {
    auto file = reprise::gguf::GgufFile::Open(path);
    ExerciseTokenizer(reprise::Tokenizer::FromGguf(file), -1);
  } catch (const reprise::Error&) {
  }
  return 0;
}
