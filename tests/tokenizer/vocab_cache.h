// Test helper: loads each fixture tokenizer once per test binary (the big vocabularies take a
// few hundred milliseconds to load).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace reprise::testing {

// `relative` is a path under the fixtures folder, e.g. "vocab/ggml-vocab-qwen2.gguf".
inline const Tokenizer& FixtureTokenizer(const std::string& relative) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[relative];
  if (!slot) {
    const gguf::GgufFile file = gguf::GgufFile::Open(Fixture(relative));
    slot = std::make_unique<Tokenizer>(Tokenizer::FromGguf(file));
  }
  return *slot;
}

inline const Tokenizer& VocabTokenizer(const std::string& name) {
  return FixtureTokenizer("vocab/ggml-vocab-" + name + ".gguf");
}

}  // namespace reprise::testing
