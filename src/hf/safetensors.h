// Reads safetensors files (a JSON header, then raw little-endian tensor data): memory-mapped,
// every header field validated, since a model folder is as untrusted as a GGUF file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "gguf/gguf_types.h"

namespace reprise::hf {

struct SafetensorsTensor {
  std::string name;
  gguf::TensorType type = gguf::TensorType::kF32;  // F32, F16 or BF16
  std::vector<uint64_t> shape;  // as stored: shape[0] is the outermost dimension (rows)
  const uint8_t* data = nullptr;
  size_t num_bytes = 0;
};

// The tensor table of a safetensors image of `size` bytes, in data order. Throws Error("<what>:
// <problem>") naming the tensor and field: a header length beyond the file or the size limit,
// bad JSON, an unsupported dtype, offsets out of range or overlapping, a shape that does not
// match its byte count, a duplicate name.
std::vector<SafetensorsTensor> ParseSafetensors(const uint8_t* data, size_t size,
                                                std::string_view what);

// A mapped safetensors file and its tensors (which point into the mapping).
class SafetensorsFile {
 public:
  // Throws Error("<path>: <problem>").
  static SafetensorsFile Open(const std::string& path,
                              FileResidence residence = FileResidence::kMapped);

  const std::string& path() const { return file_.path(); }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // The length prefix and JSON header: what identifies the file's content besides its data.
  std::string_view HeaderBytes() const { return header_; }
  const SafetensorsTensor* Find(std::string_view name) const;
  // MappedFile::Rewrite on the file's bytes (every tensor's data points into them).
  bool Rewrite(const std::function<void(std::span<uint8_t> bytes)>& edit) {
    return file_.Rewrite(edit);
  }

 private:
  MappedFile file_;
  std::string_view header_;
  std::vector<SafetensorsTensor> tensors_;
};

}  // namespace reprise::hf
