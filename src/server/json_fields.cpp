#include "server/json_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "server/api_error.h"

namespace reprise::server {

const char* JsonTypeName(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "an integer";
    case nlohmann::json::value_t::number_float:
      return "a number";
    default:
      return "an unsupported value";
  }
}

JsonFields::JsonFields(const nlohmann::json& object, std::string prefix)
    : object_(object), prefix_(std::move(prefix)) {
  if (!object_.is_object()) {
    std::string where =
        prefix_.empty() ? "the request body" : prefix_.substr(0, prefix_.size() - 1);
    throw ApiError::BadRequest(
        fmt::format("{} must be a JSON object, got {}", where, JsonTypeName(object_)),
        prefix_.empty() ? "" : where);
  }
}

const nlohmann::json* JsonFields::Find(std::string_view name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string JsonFields::Param(std::string_view name) const { return prefix_ + std::string(name); }

void JsonFields::TypeError(std::string_view name, std::string_view expected) const {
  const nlohmann::json* value = Find(name);
  throw ApiError::BadRequest(fmt::format("'{}' must be {}, got {}", Param(name), expected,
                                         value ? JsonTypeName(*value) : "null"),
                             Param(name));
}

std::optional<bool> JsonFields::Bool(std::string_view name) const {
  const nlohmann::json* value = Find(name);
  if (!value) return std::nullopt;
  if (!value->is_boolean()) TypeError(name, "a boolean");
  return value->get<bool>();
}

std::optional<int64_t> JsonFields::Int(std::string_view name, int64_t min, int64_t max) const {
  const nlohmann::json* value = Find(name);
  if (!value) return std::nullopt;
  int64_t result = 0;
  if (value->is_number_integer() && !value->is_number_unsigned()) {
    result = value->get<int64_t>();
  } else if (value->is_number_unsigned()) {
    uint64_t raw = value->get<uint64_t>();
    result = raw > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(raw);
  } else if (value->is_number_float()) {
    double raw = value->get<double>();
    // Integral values only, and inside the int64 range (2^63 is exactly representable).
    if (!std::isfinite(raw) || raw != std::trunc(raw) || raw < -9.2233720368547758e18 ||
        raw >= 9.2233720368547758e18) {
      TypeError(name, "an integer");
    }
    result = static_cast<int64_t>(raw);
  } else {
    TypeError(name, "an integer");
  }
  if (result < min || result > max) {
    throw ApiError::BadRequest(
        fmt::format("'{}' must be between {} and {}, got {}", Param(name), min, max, value->dump()),
        Param(name));
  }
  return result;
}

std::optional<double> JsonFields::Number(std::string_view name, double min, double max,
                                         bool min_exclusive) const {
  const nlohmann::json* value = Find(name);
  if (!value) return std::nullopt;
  if (!value->is_number()) TypeError(name, "a number");
  double result = value->get<double>();
  bool below = min_exclusive ? !(result > min) : !(result >= min);
  if (!std::isfinite(result) || below || result > max) {
    throw ApiError::BadRequest(
        fmt::format("'{}' must be {} {} and at most {}, got {}", Param(name),
                    min_exclusive ? "above" : "at least", min, max, value->dump()),
        Param(name));
  }
  return result;
}

std::optional<std::string> JsonFields::String(std::string_view name) const {
  const nlohmann::json* value = Find(name);
  if (!value) return std::nullopt;
  if (!value->is_string()) TypeError(name, "a string");
  return value->get<std::string>();
}

std::optional<std::string> JsonFields::StringOrInteger(std::string_view name) const {
  const nlohmann::json* value = Find(name);
  if (!value) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  if (value->is_number_integer()) return value->dump();
  if (value->is_number_float()) {
    double raw = value->get<double>();
    if (std::isfinite(raw) && raw == std::trunc(raw) && std::fabs(raw) < 1e15) {
      return fmt::format("{}", static_cast<int64_t>(raw));
    }
  }
  TypeError(name, "a string or an integer");
}

std::optional<std::vector<std::string>> JsonFields::StringOrStringList(std::string_view name,
                                                                       size_t max_items) const {
  const nlohmann::json* value = Find(name);
  if (!value) return std::nullopt;
  std::vector<std::string> result;
  if (value->is_string()) {
    result.push_back(value->get<std::string>());
    return result;
  }
  if (!value->is_array()) TypeError(name, "a string or a list of strings");
  if (value->size() > max_items) {
    throw ApiError::BadRequest(fmt::format("'{}' holds {} items; at most {} are allowed",
                                           Param(name), value->size(), max_items),
                               Param(name));
  }
  for (const nlohmann::json& item : *value) {
    if (!item.is_string()) TypeError(name, "a string or a list of strings");
    result.push_back(item.get<std::string>());
  }
  return result;
}

const nlohmann::json* JsonFields::Object(std::string_view name) const {
  const nlohmann::json* value = Find(name);
  if (!value) return nullptr;
  if (!value->is_object()) TypeError(name, "an object");
  return value;
}

void JsonFields::RefuseUnknown(std::span<const std::string_view> known,
                               std::span<const std::string_view> more_known) const {
  for (const auto& [name, value] : object_.items()) {
    if (value.is_null()) continue;
    // An init-capture: clang before 16 cannot capture a structured binding.
    auto listed = [&key = name](std::span<const std::string_view> list) {
      return std::find(list.begin(), list.end(), key) != list.end();
    };
    if (!listed(known) && !listed(more_known)) {
      throw ApiError::BadRequest(fmt::format("'{}' is not supported by this server", Param(name)),
                                 Param(name), "unsupported_parameter");
    }
  }
}

}  // namespace reprise::server
