// GGUF on-disk enums: metadata value types and ggml tensor types, with the block geometry of each
// tensor type (how many elements a block holds and how many bytes it takes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace reprise::gguf {

enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// Values as ggml numbers them; only these are accepted in a file.
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
namespace token_type {
inline constexpr int32_t kUndefined = 0;
inline constexpr int32_t kNormal = 1;
inline constexpr int32_t kUnknown = 2;
inline constexpr int32_t kControl = 3;
inline constexpr int32_t kUserDefined = 4;
inline constexpr int32_t kUnused = 5;
inline constexpr int32_t kByte = 6;
}  // namespace token_type

struct TypeGeometry {
  size_t block_elements;  // elements per block (1 for plain types)
  size_t block_bytes;     // bytes per block
};

// nullopt for a number that is not a known tensor type.
std::optional<TypeGeometry> GeometryOf(uint32_t type);
TypeGeometry GeometryOf(TensorType type);
std::string_view TypeName(TensorType type);
// Parses "f32", "q8_0", "Q4_K", ...; nullopt when unknown.
std::optional<TensorType> TypeFromName(std::string_view name);

}  // namespace reprise::gguf
