// Crafted GGUF files for loader tests: a copy of a real file with metadata values replaced,
// added or removed, tensors dropped or added, written with the project's own GGUF writer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace reprise::testing {

struct GgufEdit {
  // Values set (replacing or adding), and keys removed.
  std::map<std::string, gguf::Value> set;
  std::set<std::string> remove;
  // Tensors dropped, and tensors added (a copy of tensor `from` under a new name).
  std::function<bool(const std::string& name)> drop_tensor;
  std::vector<std::pair<std::string, std::string>> copy_tensor;  // {new name, from}
  // Applied last to each kept metadata value (e.g. to shorten arrays).
  std::function<void(const std::string& key, gguf::Value& value)> transform;
};

inline gguf::Value Uint64Value(uint64_t number) { return {gguf::ValueType::kUint64, number}; }
inline gguf::Value Uint32Value(uint32_t number) {
  return {gguf::ValueType::kUint32, uint64_t{number}};
}
inline gguf::Value Float32Value(double number) { return {gguf::ValueType::kFloat32, number}; }
inline gguf::Value StringValue(std::string text) {
  return {gguf::ValueType::kString, std::move(text)};
}

inline void RewriteGguf(const std::string& from, const std::string& to, const GgufEdit& edit) {
  gguf::GgufFile file = gguf::GgufFile::Open(from);
  gguf::GgufWriter writer(file.alignment());
  for (const auto& [key, value] : file.metadata()) {
    if (edit.remove.count(key) != 0 || edit.set.count(key) != 0) continue;
    gguf::Value copy = value;
    if (edit.transform) edit.transform(key, copy);
    writer.CopyValue(key, copy);
  }
  for (const auto& [key, value] : edit.set) writer.CopyValue(key, value);
  auto add = [&](const std::string& name, const gguf::TensorInfo& tensor) {
    writer.AddTensor(name, tensor.type, tensor.shape,
                     std::vector<uint8_t>(tensor.data, tensor.data + tensor.num_bytes));
  };
  for (const auto& tensor : file.tensors()) {
    if (edit.drop_tensor && edit.drop_tensor(tensor.name)) continue;
    add(tensor.name, tensor);
  }
  for (const auto& [name, source] : edit.copy_tensor) add(name, *file.FindTensor(source));
  writer.Write(to);
}

}  // namespace reprise::testing
