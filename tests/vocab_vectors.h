// llama.cpp's tokenizer test vectors (fixtures/vocab/ggml-vocab-<name>.gguf.inp/.out), read for
// the tokenizer tests of GGUF vocabularies and of tokenizer.json files.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace reprise::testing {

inline std::string ReadVectorFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Cases are separated by "\n__ggml_vocab_test__\n"; the file ends with the separator.
inline std::vector<std::string> ReadVectorCases(const std::string& path) {
  const std::string text = ReadVectorFile(path);
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find(separator, start);
    if (end == std::string::npos) {
      cases.push_back(text.substr(start));
      break;
    }
    cases.push_back(text.substr(start, end - start));
    start = end + separator.size();
  }
  return cases;
}

// One line per case: ids separated by spaces, surrounding whitespace ignored.
inline std::vector<std::vector<int32_t>> ReadVectorExpected(const std::string& path) {
  std::istringstream in(ReadVectorFile(path));
  std::vector<std::vector<int32_t>> expected;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ids(line);
    std::vector<int32_t> row;
    int32_t id = 0;
    while (ids >> id) {
      row.push_back(id);
    }
    expected.push_back(std::move(row));
  }
  return expected;
}

}  // namespace reprise::testing
