// JSON files of a model folder read with a depth limit and typed, checked access: every error
// names the file and the field, since the files are untrusted input.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace reprise::hf {

// Parses `text` (from `what`, the file name used in messages) refusing nesting deeper than 64
// and duplicate object keys. Throws Error("<what>: ...").
nlohmann::json ParseJson(std::string_view text, std::string_view what);
// Reads and parses a whole file; Throws Error naming the path when it is missing or bad.
nlohmann::json ReadJsonFile(const std::string& path);

// Typed access to `object[key]`: nullopt when the key is absent or null; Error("<what>: field
// '<key>' ...") when it has another type or (integers) lies outside [min, max].
std::optional<int64_t> GetInt(const nlohmann::json& object, const char* key, std::string_view what,
                              int64_t min, int64_t max);
std::optional<double> GetNumber(const nlohmann::json& object, const char* key,
                                std::string_view what);
std::optional<bool> GetBool(const nlohmann::json& object, const char* key, std::string_view what);
std::optional<std::string> GetString(const nlohmann::json& object, const char* key,
                                     std::string_view what);
// An object or array field, or nullptr when absent or null.
const nlohmann::json* GetObject(const nlohmann::json& object, const char* key,
                                std::string_view what);
const nlohmann::json* GetArray(const nlohmann::json& object, const char* key,
                               std::string_view what);

}  // namespace reprise::hf
