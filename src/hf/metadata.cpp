#include "hf/metadata.h"

namespace reprise::hf {

using gguf::ArrayValue;
using gguf::Value;
using gguf::ValueType;

void PutString(Metadata& metadata, const std::string& key, std::string value) {
  metadata[key] = Value{ValueType::kString, std::move(value)};
}

void PutUint32(Metadata& metadata, const std::string& key, uint32_t value) {
  metadata[key] = Value{ValueType::kUint32, uint64_t{value}};
}

void PutFloat32(Metadata& metadata, const std::string& key, float value) {
  metadata[key] = Value{ValueType::kFloat32, static_cast<double>(value)};
}

void PutBool(Metadata& metadata, const std::string& key, bool value) {
  metadata[key] = Value{ValueType::kBool, value};
}

void PutStrings(Metadata& metadata, const std::string& key, std::vector<std::string> values) {
  ArrayValue array;
  array.element_type = ValueType::kString;
  array.strings = std::move(values);
  metadata[key] = Value{ValueType::kArray, std::move(array)};
}

void PutFloats(Metadata& metadata, const std::string& key, const std::vector<float>& values) {
  ArrayValue array;
  array.element_type = ValueType::kFloat32;
  array.floats.assign(values.begin(), values.end());
  metadata[key] = Value{ValueType::kArray, std::move(array)};
}

void PutInt32s(Metadata& metadata, const std::string& key, const std::vector<int32_t>& values) {
  ArrayValue array;
  array.element_type = ValueType::kInt32;
  array.integers.assign(values.begin(), values.end());
  metadata[key] = Value{ValueType::kArray, std::move(array)};
}

}  // namespace reprise::hf
