#include "gguf/gguf_types.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "core/error.h"

namespace reprise::gguf {

namespace {

struct TypeEntry {
  TensorType type;
  std::string_view name;
  TypeGeometry geometry;
};

constexpr size_t kQK = 32;    // elements per block of the simple quants
constexpr size_t kQKK = 256;  // elements per super-block of the K-quants

constexpr std::array kTypes = {
    TypeEntry{TensorType::kF32, "F32", {1, 4}},
    TypeEntry{TensorType::kF16, "F16", {1, 2}},
    TypeEntry{TensorType::kQ4_0, "Q4_0", {kQK, 2 + kQK / 2}},
    TypeEntry{TensorType::kQ4_1, "Q4_1", {kQK, 4 + kQK / 2}},
    TypeEntry{TensorType::kQ5_0, "Q5_0", {kQK, 2 + 4 + kQK / 2}},
    TypeEntry{TensorType::kQ5_1, "Q5_1", {kQK, 4 + 4 + kQK / 2}},
    TypeEntry{TensorType::kQ8_0, "Q8_0", {kQK, 2 + kQK}},
    TypeEntry{TensorType::kQ8_1, "Q8_1", {kQK, 4 + kQK}},
    TypeEntry{TensorType::kQ2_K, "Q2_K", {kQKK, kQKK / 16 + kQKK / 4 + 2 + 2}},
    TypeEntry{TensorType::kQ3_K, "Q3_K", {kQKK, kQKK / 8 + kQKK / 4 + 12 + 2}},
    TypeEntry{TensorType::kQ4_K, "Q4_K", {kQKK, 2 + 2 + 12 + kQKK / 2}},
    TypeEntry{TensorType::kQ5_K, "Q5_K", {kQKK, 2 + 2 + 12 + kQKK / 8 + kQKK / 2}},
    TypeEntry{TensorType::kQ6_K, "Q6_K", {kQKK, kQKK / 2 + kQKK / 4 + kQKK / 16 + 2}},
    TypeEntry{TensorType::kQ8_K, "Q8_K", {kQKK, 4 + kQKK + kQKK / 16 * 2}},
    TypeEntry{TensorType::kI8, "I8", {1, 1}},
    TypeEntry{TensorType::kI16, "I16", {1, 2}},
    TypeEntry{TensorType::kI32, "I32", {1, 4}},
    TypeEntry{TensorType::kI64, "I64", {1, 8}},
    TypeEntry{TensorType::kF64, "F64", {1, 8}},
    TypeEntry{TensorType::kBF16, "BF16", {1, 2}},
};

const TypeEntry* Find(uint32_t type) {
  for (const auto& entry : kTypes) {
    if (static_cast<uint32_t>(entry.type) == type) return &entry;
  }
  return nullptr;
}

}  // namespace

std::optional<TypeGeometry> GeometryOf(uint32_t type) {
  const TypeEntry* entry = Find(type);
  if (entry == nullptr) return std::nullopt;
  return entry->geometry;
}

TypeGeometry GeometryOf(TensorType type) {
  const TypeEntry* entry = Find(static_cast<uint32_t>(type));
  REPRISE_CHECK(entry != nullptr, "unknown tensor type {}", static_cast<uint32_t>(type));
  return entry->geometry;
}

std::string_view TypeName(TensorType type) {
  const TypeEntry* entry = Find(static_cast<uint32_t>(type));
  return entry == nullptr ? std::string_view("unknown") : entry->name;
}

std::optional<TensorType> TypeFromName(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const auto& entry : kTypes) {
    if (entry.name == upper) return entry.type;
  }
  return std::nullopt;
}

}  // namespace reprise::gguf
