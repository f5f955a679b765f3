// A GGUF metadata value: a scalar, a string, or a homogeneous array of either.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "gguf/gguf_types.h"

namespace reprise::gguf {

struct Value;

// Arrays keep their element type; elements are stored widened (integers as int64/uint64, floats
// as double) except strings, which is what every reader of tokenizer metadata wants.
struct ArrayValue {
  ValueType element_type = ValueType::kUint8;
  std::vector<int64_t> integers;            // signed integer and bool elements
  std::vector<uint64_t> unsigned_integers;  // unsigned integer elements
  std::vector<double> floats;               // float32/float64 elements
  std::vector<std::string> strings;         // string elements
  std::vector<Value> arrays;                // nested arrays (rare; kept for completeness)
  size_t size() const;
};

struct Value {
  ValueType type = ValueType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, ArrayValue> data;
};

bool IsUnsignedInteger(ValueType type);
bool IsSignedInteger(ValueType type);
bool IsFloat(ValueType type);
std::string_view ValueTypeName(ValueType type);

}  // namespace reprise::gguf
