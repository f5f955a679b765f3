// Typed, range-checked reads of optional fields of a JSON request object. A wrong type or an
// out-of-range value is an ApiError (400) naming the field; null counts as absent, since OpenAI
// clients send null for fields they leave unset. RefuseUnknown refuses fields a route does not
// read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace reprise::server {

class JsonFields {
 public:
  // `object` must outlive this; `prefix` names the enclosing field in messages
  // ("generate_config.").
  explicit JsonFields(const nlohmann::json& object, std::string prefix = "");

  // The field, or nullptr when absent or null.
  const nlohmann::json* Find(std::string_view name) const;
  // `prefix + name`, as messages and the error's `param` name it.
  std::string Param(std::string_view name) const;

  std::optional<bool> Bool(std::string_view name) const;
  // An integer (an integral floating value such as 16.0 is accepted) in [min, max].
  std::optional<int64_t> Int(std::string_view name, int64_t min, int64_t max) const;
  // A finite number in [min, max], or (min, max] when `min_exclusive`.
  std::optional<double> Number(std::string_view name, double min, double max,
                               bool min_exclusive = false) const;
  std::optional<std::string> String(std::string_view name) const;
  // A string or an integer, as text ("task_id": 1 and "task_id": "1" are the same task).
  std::optional<std::string> StringOrInteger(std::string_view name) const;
  // A string, or a list of at most `max_items` strings.
  std::optional<std::vector<std::string>> StringOrStringList(std::string_view name,
                                                             size_t max_items) const;
  // A nested object (absent or null: nullptr).
  const nlohmann::json* Object(std::string_view name) const;

  // Throws ApiError (400, code unsupported_parameter) naming the first non-null field that is in
  // neither list: a field this server does not read is refused, never ignored.
  void RefuseUnknown(std::span<const std::string_view> known,
                     std::span<const std::string_view> more_known = {}) const;

 private:
  [[noreturn]] void TypeError(std::string_view name, std::string_view expected) const;

  const nlohmann::json& object_;
  std::string prefix_;
};

// A short description of a JSON value's type for messages ("a string", "an array", ...).
const char* JsonTypeName(const nlohmann::json& value);

}  // namespace reprise::server
