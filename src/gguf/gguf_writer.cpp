#include "gguf/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "core/error.h"

namespace reprise::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;

class ByteSink {
 public:
  template <typename T>
  void Put(T value) {
    // resize + memcpy rather than insert: GCC 12 warns falsely on the latter.
    size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &value, sizeof(T));
  }
  void PutString(const std::string& text) {
    Put<uint64_t>(text.size());
    size_t at = out_.size();
    out_.resize(at + text.size());
    if (!text.empty()) std::memcpy(out_.data() + at, text.data(), text.size());
  }
  void PadTo(size_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back(0);
  }
  const std::vector<uint8_t>& bytes() const { return out_; }

 private:
  std::vector<uint8_t> out_;
};

void PutScalar(ByteSink& sink, ValueType type, const Value& value);

void PutArray(ByteSink& sink, const ArrayValue& array) {
  sink.Put<uint32_t>(static_cast<uint32_t>(array.element_type));
  sink.Put<uint64_t>(array.size());
  Value element;
  element.type = array.element_type;
  if (array.element_type == ValueType::kString) {
    for (const auto& text : array.strings) sink.PutString(text);
  } else if (array.element_type == ValueType::kArray) {
    for (const auto& nested : array.arrays) PutArray(sink, std::get<ArrayValue>(nested.data));
  } else if (IsFloat(array.element_type)) {
    for (double number : array.floats) {
      element.data = number;
      PutScalar(sink, array.element_type, element);
    }
  } else if (IsUnsignedInteger(array.element_type)) {
    for (uint64_t number : array.unsigned_integers) {
      element.data = number;
      PutScalar(sink, array.element_type, element);
    }
  } else {
    for (int64_t number : array.integers) {
      if (array.element_type == ValueType::kBool) {
        element.data = number != 0;
      } else {
        element.data = number;
      }
      PutScalar(sink, array.element_type, element);
    }
  }
}

void PutScalar(ByteSink& sink, ValueType type, const Value& value) {
  switch (type) {
    case ValueType::kUint8:
      sink.Put<uint8_t>(static_cast<uint8_t>(std::get<uint64_t>(value.data)));
      break;
    case ValueType::kUint16:
      sink.Put<uint16_t>(static_cast<uint16_t>(std::get<uint64_t>(value.data)));
      break;
    case ValueType::kUint32:
      sink.Put<uint32_t>(static_cast<uint32_t>(std::get<uint64_t>(value.data)));
      break;
    case ValueType::kUint64:
      sink.Put<uint64_t>(std::get<uint64_t>(value.data));
      break;
    case ValueType::kInt8:
      sink.Put<int8_t>(static_cast<int8_t>(std::get<int64_t>(value.data)));
      break;
    case ValueType::kInt16:
      sink.Put<int16_t>(static_cast<int16_t>(std::get<int64_t>(value.data)));
      break;
    case ValueType::kInt32:
      sink.Put<int32_t>(static_cast<int32_t>(std::get<int64_t>(value.data)));
      break;
    case ValueType::kInt64:
      sink.Put<int64_t>(std::get<int64_t>(value.data));
      break;
    case ValueType::kFloat32:
      sink.Put<float>(static_cast<float>(std::get<double>(value.data)));
      break;
    case ValueType::kFloat64:
      sink.Put<double>(std::get<double>(value.data));
      break;
    case ValueType::kBool:
      sink.Put<uint8_t>(std::get<bool>(value.data) ? 1 : 0);
      break;
    case ValueType::kString:
      sink.PutString(std::get<std::string>(value.data));
      break;
    case ValueType::kArray:
      PutArray(sink, std::get<ArrayValue>(value.data));
      break;
  }
}

}  // namespace

void GgufWriter::Set(const std::string& key, Value value) {
  for (auto& [existing, stored] : metadata_) {
    if (existing == key) {
      stored = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::SetString(const std::string& key, std::string value) {
  Set(key, Value{ValueType::kString, std::move(value)});
}
void GgufWriter::SetUint32(const std::string& key, uint32_t value) {
  Set(key, Value{ValueType::kUint32, uint64_t{value}});
}
void GgufWriter::SetInt32(const std::string& key, int32_t value) {
  Set(key, Value{ValueType::kInt32, int64_t{value}});
}
void GgufWriter::SetFloat32(const std::string& key, float value) {
  Set(key, Value{ValueType::kFloat32, double{value}});
}
void GgufWriter::SetBool(const std::string& key, bool value) {
  Set(key, Value{ValueType::kBool, value});
}
void GgufWriter::SetStringArray(const std::string& key, std::vector<std::string> values) {
  ArrayValue array;
  array.element_type = ValueType::kString;
  array.strings = std::move(values);
  Set(key, Value{ValueType::kArray, std::move(array)});
}
void GgufWriter::SetFloat32Array(const std::string& key, std::vector<float> values) {
  ArrayValue array;
  array.element_type = ValueType::kFloat32;
  array.floats.assign(values.begin(), values.end());
  Set(key, Value{ValueType::kArray, std::move(array)});
}
void GgufWriter::SetInt32Array(const std::string& key, std::vector<int32_t> values) {
  ArrayValue array;
  array.element_type = ValueType::kInt32;
  array.integers.assign(values.begin(), values.end());
  Set(key, Value{ValueType::kArray, std::move(array)});
}
void GgufWriter::CopyValue(const std::string& key, const Value& value) { Set(key, value); }

void GgufWriter::AddTensor(const std::string& name, TensorType type, std::vector<uint64_t> shape,
                           std::vector<uint8_t> data) {
  TypeGeometry geometry = GeometryOf(type);
  uint64_t elements = 1;
  for (uint64_t extent : shape) elements *= extent;
  REPRISE_CHECK(!shape.empty() && shape[0] % geometry.block_elements == 0,
                "tensor {} row not a multiple of the block size", name);
  REPRISE_CHECK(data.size() == elements / geometry.block_elements * geometry.block_bytes,
                "tensor {} has {} bytes, expected {}", name, data.size(),
                elements / geometry.block_elements * geometry.block_bytes);
  tensors_.push_back({name, type, std::move(shape), std::move(data)});
}

void GgufWriter::Write(const std::string& path) const {
  ByteSink header;
  header.Put<uint32_t>(kMagic);
  header.Put<uint32_t>(3);
  header.Put<uint64_t>(tensors_.size());
  bool has_alignment = false;
  for (const auto& entry : metadata_) has_alignment |= entry.first == "general.alignment";
  header.Put<uint64_t>(metadata_.size() + (has_alignment || alignment_ == 32 ? 0 : 1));
  for (const auto& [key, value] : metadata_) {
    header.PutString(key);
    header.Put<uint32_t>(static_cast<uint32_t>(value.type));
    PutScalar(header, value.type, value);
  }
  if (!has_alignment && alignment_ != 32) {
    header.PutString("general.alignment");
    header.Put<uint32_t>(static_cast<uint32_t>(ValueType::kUint32));
    header.Put<uint32_t>(static_cast<uint32_t>(alignment_));
  }
  uint64_t offset = 0;
  for (const auto& tensor : tensors_) {
    header.PutString(tensor.name);
    header.Put<uint32_t>(static_cast<uint32_t>(tensor.shape.size()));
    for (uint64_t extent : tensor.shape) header.Put<uint64_t>(extent);
    header.Put<uint32_t>(static_cast<uint32_t>(tensor.type));
    header.Put<uint64_t>(offset);
    offset += (tensor.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  header.PadTo(alignment_);

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(fmt::format("cannot write '{}'", path));
  out.write(reinterpret_cast<const char*>(header.bytes().data()),
            static_cast<std::streamsize>(header.bytes().size()));
  static const std::vector<char> kZeros(65536, 0);
  for (const auto& tensor : tensors_) {
    out.write(reinterpret_cast<const char*>(tensor.data.data()),
              static_cast<std::streamsize>(tensor.data.size()));
    size_t padding = (alignment_ - tensor.data.size() % alignment_) % alignment_;
    out.write(kZeros.data(), static_cast<std::streamsize>(padding));
  }
  if (!out) throw Error(fmt::format("error while writing '{}'", path));
}

}  // namespace reprise::gguf
