// Writes GGUF version 3 files: used by `reprise make-model` and by tests that need model files.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_types.h"
#include "gguf/gguf_value.h"

namespace reprise::gguf {

class GgufWriter {
 public:
  explicit GgufWriter(size_t alignment = 32) : alignment_(alignment) {}

  void SetString(const std::string& key, std::string value);
  void SetUint32(const std::string& key, uint32_t value);
  void SetInt32(const std::string& key, int32_t value);
  void SetFloat32(const std::string& key, float value);
  void SetBool(const std::string& key, bool value);
  void SetStringArray(const std::string& key, std::vector<std::string> values);
  void SetFloat32Array(const std::string& key, std::vector<float> values);
  void SetInt32Array(const std::string& key, std::vector<int32_t> values);
  // Copies a metadata entry of another file verbatim (e.g. a vocabulary).
  void CopyValue(const std::string& key, const Value& value);

  // `data` must hold exactly the bytes that `type` and `shape` imply.
  void AddTensor(const std::string& name, TensorType type, std::vector<uint64_t> shape,
                 std::vector<uint8_t> data);

  // Throws Error if the file cannot be written.
  void Write(const std::string& path) const;

 private:
  void Set(const std::string& key, Value value);

  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> data;
  };
  size_t alignment_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace reprise::gguf
