#include "gguf/gguf_value.h"

namespace reprise::gguf {

size_t ArrayValue::size() const {
  return integers.size() + unsigned_integers.size() + floats.size() + strings.size() +
         arrays.size();
}

bool IsUnsignedInteger(ValueType type) {
  return type == ValueType::kUint8 || type == ValueType::kUint16 || type == ValueType::kUint32 ||
         type == ValueType::kUint64;
}

bool IsSignedInteger(ValueType type) {
  return type == ValueType::kInt8 || type == ValueType::kInt16 || type == ValueType::kInt32 ||
         type == ValueType::kInt64;
}

bool IsFloat(ValueType type) { return type == ValueType::kFloat32 || type == ValueType::kFloat64; }

std::string_view ValueTypeName(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
      return "uint8";
    case ValueType::kInt8:
      return "int8";
    case ValueType::kUint16:
      return "uint16";
    case ValueType::kInt16:
      return "int16";
    case ValueType::kUint32:
      return "uint32";
    case ValueType::kInt32:
      return "int32";
    case ValueType::kFloat32:
      return "float32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kUint64:
      return "uint64";
    case ValueType::kInt64:
      return "int64";
    case ValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

}  // namespace reprise::gguf
