// Shared set-up for the Hugging Face folder tests: the fixture folder, copies of it written into
// the test's scratch folder (with weights re-saved, sharded or converted), and a safetensors
// writer for well-formed and malformed files.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "hf/safetensors.h"
#include "test_support.h"

namespace reprise::testing {

inline std::string HfFixture() { return Fixture("hf/TinyStories-656K"); }
inline std::string GgufFixture() { return Fixture("models/TinyStories-656K-f32.gguf"); }

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A tensor to write: safetensors dtype name, shape as stored (rows first), raw bytes.
struct TensorBytes {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::string bytes;
};

// Writes a safetensors file: an 8-byte little-endian header length, `header`, then `data`.
inline void WriteRawSafetensors(const std::string& path, const std::string& header,
                                const std::string& data, uint64_t header_length) {
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i)
    prefix[static_cast<size_t>(i)] = static_cast<char>(header_length >> (8 * i));
  WriteText(path, prefix + header + data);
}

inline void WriteSafetensors(const std::string& path, const std::vector<TensorBytes>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const TensorBytes& tensor : tensors) {
    header[tensor.name] = {{"dtype", tensor.dtype},
                           {"shape", tensor.shape},
                           {"data_offsets", {data.size(), data.size() + tensor.bytes.size()}}};
    data += tensor.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data aligned to 8 bytes, as writers pad it
  WriteRawSafetensors(path, text, data, text.size());
}

// The fixture's tensors, in file order.
inline std::vector<TensorBytes> FixtureTensors() {
  hf::SafetensorsFile file = hf::SafetensorsFile::Open(HfFixture() + "/model.safetensors");
  std::vector<TensorBytes> tensors;
  for (const hf::SafetensorsTensor& tensor : file.tensors()) {
    EXPECT_EQ(tensor.type, gguf::TensorType::kF32);
    tensors.push_back({tensor.name, "F32", tensor.shape,
                       std::string(reinterpret_cast<const char*>(tensor.data), tensor.num_bytes)});
  }
  return tensors;
}

// A fresh folder `name` in the scratch folder holding the fixture's JSON files (and, with
// `weights`, its model.safetensors).
inline std::string CopyHfFixture(const std::string& name, bool weights = true) {
  namespace fs = std::filesystem;
  fs::path dir = ScratchDir() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(HfFixture())) {
    std::string file = entry.path().filename().string();
    if (!weights && file.ends_with(".safetensors")) continue;
    WriteText((dir / file).string(), ReadText(entry.path().string()));
  }
  return dir.string();
}

// The message of the Error that `load` throws (a failure when it throws nothing).
inline std::string ErrorOf(const std::function<void()>& load) {
  try {
    load();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

}  // namespace reprise::testing
