#include "gguf/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/text.h"

namespace reprise::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxStringBytes = 1ull << 30;
constexpr uint32_t kMaxArrayDepth = 2;

// A bounds-checked cursor over the mapped bytes; every read names what it was reading when the
// file runs out, so the user sees "truncated while reading tensor count" rather than a crash.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t offset() const { return offset_; }
  size_t remaining() const { return size_ - offset_; }

  template <typename T>
  T Read(const char* what) {
    if (remaining() < sizeof(T)) {
      throw Error(fmt::format("file is truncated while reading {} at offset {}", what, offset_));
    }
    T value;
    std::memcpy(&value, data_ + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }

  std::string ReadString(const char* what) {
    uint64_t length = Read<uint64_t>(what);
    if (length > kMaxStringBytes || length > remaining()) {
      throw Error(fmt::format("{} has an absurd length {} at offset {} ({} bytes left)", what,
                              length, offset_, remaining()));
    }
    std::string text(reinterpret_cast<const char*>(data_ + offset_), length);
    offset_ += length;
    return text;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

size_t MinEncodedSize(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
    case ValueType::kString:  // its length prefix
      return 8;
    case ValueType::kArray:  // element type + count
      return 12;
  }
  return 1;
}

ValueType ReadValueType(Cursor& cursor, const std::string& key) {
  uint32_t raw = cursor.Read<uint32_t>("a value type");
  if (raw > static_cast<uint32_t>(ValueType::kFloat64)) {
    throw Error(fmt::format("metadata key '{}' has unknown value type {}", key, raw));
  }
  return static_cast<ValueType>(raw);
}

Value ReadValue(Cursor& cursor, ValueType type, const std::string& key, uint32_t depth);

ArrayValue ReadArray(Cursor& cursor, const std::string& key, uint32_t depth) {
  if (depth > kMaxArrayDepth) {
    throw Error(fmt::format("metadata key '{}' nests arrays too deeply", key));
  }
  ArrayValue array;
  array.element_type = ReadValueType(cursor, key);
  uint64_t count = cursor.Read<uint64_t>("an array length");
  if (count > cursor.remaining() / MinEncodedSize(array.element_type)) {
    throw Error(fmt::format("metadata key '{}' declares an absurd array length {} ({} bytes left)",
                            key, count, cursor.remaining()));
  }
  for (uint64_t i = 0; i < count; ++i) {
    Value element = ReadValue(cursor, array.element_type, key, depth + 1);
    if (auto* text = std::get_if<std::string>(&element.data)) {
      array.strings.push_back(std::move(*text));
    } else if (auto* number = std::get_if<int64_t>(&element.data)) {
      array.integers.push_back(*number);
    } else if (auto* number = std::get_if<uint64_t>(&element.data)) {
      array.unsigned_integers.push_back(*number);
    } else if (auto* number = std::get_if<double>(&element.data)) {
      array.floats.push_back(*number);
    } else if (auto* flag = std::get_if<bool>(&element.data)) {
      array.integers.push_back(*flag ? 1 : 0);
    } else {
      array.arrays.push_back(std::move(element));
    }
  }
  return array;
}

Value ReadValue(Cursor& cursor, ValueType type, const std::string& key, uint32_t depth) {
  Value value;
  value.type = type;
  switch (type) {
    case ValueType::kUint8:
      value.data = uint64_t{cursor.Read<uint8_t>("a uint8 value")};
      break;
    case ValueType::kInt8:
      value.data = int64_t{cursor.Read<int8_t>("an int8 value")};
      break;
    case ValueType::kUint16:
      value.data = uint64_t{cursor.Read<uint16_t>("a uint16 value")};
      break;
    case ValueType::kInt16:
      value.data = int64_t{cursor.Read<int16_t>("an int16 value")};
      break;
    case ValueType::kUint32:
      value.data = uint64_t{cursor.Read<uint32_t>("a uint32 value")};
      break;
    case ValueType::kInt32:
      value.data = int64_t{cursor.Read<int32_t>("an int32 value")};
      break;
    case ValueType::kUint64:
      value.data = cursor.Read<uint64_t>("a uint64 value");
      break;
    case ValueType::kInt64:
      value.data = cursor.Read<int64_t>("an int64 value");
      break;
    case ValueType::kFloat32:
      value.data = double{cursor.Read<float>("a float32 value")};
      break;
    case ValueType::kFloat64:
      value.data = cursor.Read<double>("a float64 value");
      break;
    case ValueType::kBool: {
      uint8_t raw = cursor.Read<uint8_t>("a bool value");
      if (raw > 1) throw Error(fmt::format("metadata key '{}' has a bool of value {}", key, raw));
      value.data = raw == 1;
      break;
    }
    case ValueType::kString:
      value.data = cursor.ReadString("a string value");
      break;
    case ValueType::kArray:
      value.data = ReadArray(cursor, key, depth);
      break;
  }
  return value;
}

void Parse(const MappedFile& file, uint32_t& version, size_t& alignment, size_t& data_start_out,
           std::map<std::string, Value>& metadata, std::vector<TensorInfo>& tensors) {
  Cursor cursor(file.data(), file.size());
  uint32_t magic = cursor.Read<uint32_t>("the magic number");
  if (magic != kMagic) throw Error("not a GGUF file (bad magic number)");
  version = cursor.Read<uint32_t>("the version");
  if (version != 2 && version != 3) {
    throw Error(fmt::format("unsupported GGUF version {} (2 and 3 are supported)", version));
  }
  uint64_t tensor_count = cursor.Read<uint64_t>("the tensor count");
  uint64_t metadata_count = cursor.Read<uint64_t>("the metadata count");
  // Each metadata entry takes at least a key length, a type and one byte; each tensor entry at
  // least a name length, a dimension count, one dimension, a type and an offset.
  if (metadata_count > cursor.remaining() / (8 + 4 + 1)) {
    throw Error(fmt::format("absurd metadata count {} for a file of {} bytes", metadata_count,
                            file.size()));
  }
  if (tensor_count > cursor.remaining() / (8 + 4 + 8 + 4 + 8)) {
    throw Error(
        fmt::format("absurd tensor count {} for a file of {} bytes", tensor_count, file.size()));
  }
  for (uint64_t i = 0; i < metadata_count; ++i) {
    std::string key = cursor.ReadString("a metadata key");
    ValueType type = ReadValueType(cursor, key);
    Value value = ReadValue(cursor, type, key, 0);
    if (!metadata.emplace(key, std::move(value)).second) {
      throw Error(fmt::format("duplicate metadata key '{}'", key));
    }
  }
  if (auto it = metadata.find("general.alignment"); it != metadata.end()) {
    const uint64_t* raw = std::get_if<uint64_t>(&it->second.data);
    if (raw == nullptr || *raw == 0 || (*raw & (*raw - 1)) != 0 || *raw > 65536) {
      throw Error("general.alignment must be a power of two up to 65536");
    }
    alignment = static_cast<size_t>(*raw);
  }

  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorInfo info;
    info.name = cursor.ReadString("a tensor name");
    uint32_t dims = cursor.Read<uint32_t>("a tensor's dimension count");
    if (dims == 0 || dims > kMaxDims) {
      throw Error(fmt::format("tensor '{}' has {} dimensions (1 to {} allowed)", info.name, dims,
                              kMaxDims));
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      uint64_t extent = cursor.Read<uint64_t>("a tensor dimension");
      if (extent == 0 || extent > (uint64_t{1} << 40) ||
          elements > std::numeric_limits<uint64_t>::max() / extent) {
        throw Error(fmt::format("tensor '{}' has an absurd dimension {}", info.name, extent));
      }
      elements *= extent;
      info.shape.push_back(extent);
    }
    uint32_t raw_type = cursor.Read<uint32_t>("a tensor type");
    auto geometry = GeometryOf(raw_type);
    if (!geometry) {
      throw Error(fmt::format("tensor '{}' has unknown type {}", info.name, raw_type));
    }
    info.type = static_cast<TensorType>(raw_type);
    if (info.shape[0] % geometry->block_elements != 0) {
      throw Error(
          fmt::format("tensor '{}' of type {} has a row of {} elements, not a multiple "
                      "of its block size {}",
                      info.name, TypeName(info.type), info.shape[0], geometry->block_elements));
    }
    if (elements > (uint64_t{1} << 44)) {
      throw Error(fmt::format("tensor '{}' has an absurd element count {}", info.name, elements));
    }
    info.num_bytes = elements / geometry->block_elements * geometry->block_bytes;
    info.offset = cursor.Read<uint64_t>("a tensor offset");
    if (info.offset % alignment != 0) {
      throw Error(fmt::format("tensor '{}' offset {} is not aligned to {}", info.name, info.offset,
                              alignment));
    }
    tensors.push_back(std::move(info));
  }

  size_t data_start = (cursor.offset() + alignment - 1) / alignment * alignment;
  data_start_out = std::min(data_start, file.size());
  size_t data_size = file.size() > data_start ? file.size() - data_start : 0;
  for (auto& info : tensors) {
    if (info.offset > data_size || info.num_bytes > data_size - info.offset) {
      throw Error(
          fmt::format("tensor '{}' ({} bytes at data offset {}) lies outside the file "
                      "(data section of {} bytes); the file may be truncated",
                      info.name, info.num_bytes, info.offset, data_size));
    }
    info.data = file.data() + data_start + info.offset;
  }
}

}  // namespace

uint64_t TensorInfo::NumElements() const {
  uint64_t count = 1;
  for (uint64_t extent : shape) count *= extent;
  return count;
}

uint64_t TensorInfo::Rows() const { return shape.empty() ? 0 : NumElements() / shape[0]; }

GgufFile GgufFile::Open(const std::string& path, FileResidence residence) {
  GgufFile gguf;
  // The header is read from the file's map; a private copy is made once the data section's
  // offset is known, so that the copy can start that section on a cache line.
  gguf.file_ = MappedFile::Open(path, FileResidence::kMapped);
  gguf.path_ = path;
  try {
    Parse(gguf.file_, gguf.version_, gguf.alignment_, gguf.data_start_, gguf.metadata_,
          gguf.tensors_);
    gguf.IndexTensors();
  } catch (const Error& error) {
    // Messages quote keys and names from the file: nothing in them may reach a terminal raw.
    throw Error(EscapeBytes(fmt::format("{}: {}", path, error.what()), kMaxMessageBytes));
  }
  if (residence == FileResidence::kPrivateCopy) {
    MappedFile copy = gguf.file_.PlacedCopy(gguf.data_start_);
    for (TensorInfo& info : gguf.tensors_) {
      info.data = copy.data() + (info.data - gguf.file_.data());
    }
    gguf.file_ = std::move(copy);
  }
  return gguf;
}

uint8_t* WritableTensors::At(const void* data, size_t bytes) const {
  const auto* start = static_cast<const uint8_t*>(data);
  for (const std::span<uint8_t> region : regions_) {
    // Compared as addresses: the pointer may belong to another region altogether.
    const auto first = reinterpret_cast<uintptr_t>(region.data());
    const auto at = reinterpret_cast<uintptr_t>(start);
    if (at >= first && at - first <= region.size() && bytes <= region.size() - (at - first)) {
      return region.data() + (at - first);
    }
  }
  throw Error(fmt::format("{} bytes at {} lie outside the model's writable memory", bytes, data));
}

bool GgufFile::Rewrite(const std::function<void(const WritableTensors&)>& edit) {
  if (storage_ != nullptr) return storage_->Rewrite(edit);
  return file_.Rewrite([&](std::span<uint8_t> bytes) { edit(WritableTensors({bytes})); });
}

GgufFile GgufFile::Assemble(std::string path, std::string header,
                            std::map<std::string, Value> metadata, std::vector<TensorInfo> tensors,
                            std::shared_ptr<TensorStorage> storage) {
  GgufFile gguf;
  gguf.path_ = std::move(path);
  gguf.version_ = 3;
  gguf.assembled_header_ = std::move(header);
  gguf.metadata_ = std::move(metadata);
  gguf.tensors_ = std::move(tensors);
  gguf.storage_ = std::move(storage);
  try {
    gguf.IndexTensors();
  } catch (const Error& error) {
    throw Error(EscapeBytes(fmt::format("{}: {}", gguf.path_, error.what()), kMaxMessageBytes));
  }
  return gguf;
}

void GgufFile::IndexTensors() {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensor_index_.emplace(tensors_[i].name, i).second) {
      throw Error(fmt::format("duplicate tensor '{}'", tensors_[i].name));
    }
  }
}

std::span<const uint8_t> GgufFile::HeaderBytes() const {
  if (storage_ != nullptr) {
    return {reinterpret_cast<const uint8_t*>(assembled_header_.data()), assembled_header_.size()};
  }
  return {file_.data(), data_start_};
}

const Value* GgufFile::Find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const TensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

[[noreturn]] void ThrowWrongType(const std::string& path, const std::string& key,
                                 const Value& value, const char* wanted) {
  throw Error(fmt::format("{}: metadata key '{}' is {}, expected {}", path, key,
                          ValueTypeName(value.type), wanted));
}

}  // namespace

std::string GgufFile::GetString(const std::string& key) const {
  const Value* value = Find(key);
  if (value == nullptr) throw Error(fmt::format("{}: missing metadata key '{}'", path(), key));
  const auto* text = std::get_if<std::string>(&value->data);
  if (text == nullptr) ThrowWrongType(path(), key, *value, "a string");
  return *text;
}

std::string GgufFile::GetString(const std::string& key, const std::string& fallback) const {
  return Find(key) == nullptr ? fallback : GetString(key);
}

int64_t GgufFile::GetInt(const std::string& key) const {
  const Value* value = Find(key);
  if (value == nullptr) throw Error(fmt::format("{}: missing metadata key '{}'", path(), key));
  if (const auto* number = std::get_if<int64_t>(&value->data)) return *number;
  if (const auto* number = std::get_if<uint64_t>(&value->data)) {
    if (*number > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw Error(fmt::format("{}: metadata key '{}' is out of range", path(), key));
    }
    return static_cast<int64_t>(*number);
  }
  ThrowWrongType(path(), key, *value, "an integer");
}

int64_t GgufFile::GetInt(const std::string& key, int64_t fallback) const {
  return Find(key) == nullptr ? fallback : GetInt(key);
}

double GgufFile::GetFloat(const std::string& key) const {
  const Value* value = Find(key);
  if (value == nullptr) throw Error(fmt::format("{}: missing metadata key '{}'", path(), key));
  if (const auto* number = std::get_if<double>(&value->data)) return *number;
  if (IsSignedInteger(value->type) || IsUnsignedInteger(value->type)) {
    return static_cast<double>(GetInt(key));
  }
  ThrowWrongType(path(), key, *value, "a number");
}

double GgufFile::GetFloat(const std::string& key, double fallback) const {
  return Find(key) == nullptr ? fallback : GetFloat(key);
}

bool GgufFile::GetBool(const std::string& key, bool fallback) const {
  const Value* value = Find(key);
  if (value == nullptr) return fallback;
  if (const auto* flag = std::get_if<bool>(&value->data)) return *flag;
  ThrowWrongType(path(), key, *value, "a bool");
}

const ArrayValue* GgufFile::FindArray(const std::string& key) const {
  const Value* value = Find(key);
  if (value == nullptr) return nullptr;
  const auto* array = std::get_if<ArrayValue>(&value->data);
  if (array == nullptr) ThrowWrongType(path(), key, *value, "an array");
  return array;
}

const ArrayValue& GgufFile::GetArray(const std::string& key) const {
  const ArrayValue* array = FindArray(key);
  if (array == nullptr) throw Error(fmt::format("{}: missing metadata key '{}'", path(), key));
  return *array;
}

}  // namespace reprise::gguf
