// Reads a GGUF file (versions 2 and 3): memory-mapped, every header field validated, so a
// malformed file is refused with a message naming the problem instead of crashing later.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "gguf/gguf_types.h"
#include "gguf/gguf_value.h"

namespace reprise::gguf {

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::kF32;
  std::vector<uint64_t> shape;  // ggml order: shape[0] is the innermost (contiguous) dimension
  uint64_t offset = 0;          // from the start of the data section
  const uint8_t* data = nullptr;
  size_t num_bytes = 0;
  uint64_t NumElements() const;
  uint64_t Rows() const;  // product of shape[1..]
};

// A model's tensor memory made writable for GgufFile::Rewrite: the spans a tensor's bytes may
// lie in while the edit runs.
class WritableTensors {
 public:
  explicit WritableTensors(std::vector<std::span<uint8_t>> regions)
      : regions_(std::move(regions)) {}
  // The writable address of the `bytes` bytes at `data` (a TensorInfo::data). Throws Error when
  // they do not lie inside one region.
  uint8_t* At(const void* data, size_t bytes) const;

 private:
  std::vector<std::span<uint8_t>> regions_;
};

// What an assembled model's tensors point into (mapped files, converted copies), kept alive with
// the GgufFile.
class TensorStorage {
 public:
  virtual ~TensorStorage() = default;
  // Runs edit with every tensor's bytes writable (read-only again after where they were, also
  // when it throws) and returns true; returns false, running nothing, where some tensor lies in
  // a file's map (shared with the page cache, never written).
  virtual bool Rewrite(const std::function<void(const WritableTensors&)>& edit) = 0;
};

class GgufFile {
 public:
  // Throws Error("<path>: <problem>") for a missing or malformed file. `residence`: where the
  // bytes are held (a model's weights are copied into huge-page memory; see FileResidence).
  static GgufFile Open(const std::string& path, FileResidence residence = FileResidence::kMapped);

  // A model assembled in memory from another format (a Hugging Face folder): GGUF metadata keys,
  // a tensor table whose data points into `storage` (mapped files, converted copies), kept alive
  // with it, and `header` standing in for the header bytes (it identifies the model). Throws
  // Error for a duplicate tensor name.
  static GgufFile Assemble(std::string path, std::string header,
                           std::map<std::string, Value> metadata, std::vector<TensorInfo> tensors,
                           std::shared_ptr<TensorStorage> storage);

  GgufFile() = default;
  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

  uint32_t version() const { return version_; }
  const std::string& path() const { return path_; }
  size_t alignment() const { return alignment_; }
  size_t file_size() const { return file_.size(); }
  const std::map<std::string, Value>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The bytes before the tensor data: magic, metadata and tensor table.
  std::span<const uint8_t> HeaderBytes() const;

  // Runs edit with the tensors' bytes writable (for laying matrices out anew in place) and
  // returns true: a private copy's, or an assembled model's whose storage allows it (see
  // TensorStorage::Rewrite); false, running nothing, where they lie in a file's map.
  bool Rewrite(const std::function<void(const WritableTensors&)>& edit);

  const Value* Find(const std::string& key) const;
  const TensorInfo* FindTensor(const std::string& name) const;

  // Typed access. The Get* forms throw Error when the key is missing or of another type; the
  // forms with a fallback return it when the key is missing (a wrong type is still an Error).
  std::string GetString(const std::string& key) const;
  std::string GetString(const std::string& key, const std::string& fallback) const;
  int64_t GetInt(const std::string& key) const;  // any integer type
  int64_t GetInt(const std::string& key, int64_t fallback) const;
  double GetFloat(const std::string& key) const;  // float or integer types
  double GetFloat(const std::string& key, double fallback) const;
  bool GetBool(const std::string& key, bool fallback) const;
  const ArrayValue& GetArray(const std::string& key) const;
  const ArrayValue* FindArray(const std::string& key) const;

 private:
  void IndexTensors();

  MappedFile file_;
  std::string path_;
  std::string assembled_header_;            // HeaderBytes() of an assembled file
  std::shared_ptr<TensorStorage> storage_;  // what an assembled file's tensors point into
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_start_ = 0;
  std::map<std::string, Value> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace reprise::gguf
