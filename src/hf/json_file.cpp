#include "hf/json_file.h"

#include <set>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"

namespace reprise::hf {

namespace {

constexpr int kMaxDepth = 64;

std::string_view TypeOf(const nlohmann::json& value) { return value.type_name(); }

const nlohmann::json* Field(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

[[noreturn]] void ThrowType(std::string_view what, const char* key, const nlohmann::json& value,
                            const char* wanted) {
  throw Error(fmt::format("{}: field '{}' is {}, expected {}", what, key, TypeOf(value), wanted));
}

}  // namespace

nlohmann::json ParseJson(std::string_view text, std::string_view what) {
  // One set of keys per open object: a duplicate key would otherwise be dropped silently.
  std::vector<std::set<std::string>> keys;
  auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (depth > kMaxDepth) throw Error(fmt::format("nested deeper than {} levels", kMaxDepth));
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second) {
      throw Error(fmt::format("key '{}' appears twice", parsed.get<std::string>()));
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), check);
  } catch (const nlohmann::json::exception& error) {
    throw Error(fmt::format("{}: bad JSON: {}", what, error.what()));
  } catch (const Error& error) {
    throw Error(fmt::format("{}: bad JSON: {}", what, error.what()));
  }
}

nlohmann::json ReadJsonFile(const std::string& path) {
  MappedFile file = MappedFile::Open(path);
  return ParseJson(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), path);
}

std::optional<int64_t> GetInt(const nlohmann::json& object, const char* key, std::string_view what,
                              int64_t min, int64_t max) {
  const nlohmann::json* value = Field(object, key);
  if (value == nullptr) return std::nullopt;
  int64_t number = 0;
  if (value->is_number_unsigned()) {
    uint64_t raw = value->get<uint64_t>();
    if (raw > static_cast<uint64_t>(max)) {
      throw Error(fmt::format("{}: field '{}' is {}, outside {}..{}", what, key, raw, min, max));
    }
    number = static_cast<int64_t>(raw);
  } else if (value->is_number_integer()) {
    number = value->get<int64_t>();
  } else {
    ThrowType(what, key, *value, "an integer");
  }
  if (number < min || number > max) {
    throw Error(fmt::format("{}: field '{}' is {}, outside {}..{}", what, key, number, min, max));
  }
  return number;
}

std::optional<double> GetNumber(const nlohmann::json& object, const char* key,
                                std::string_view what) {
  const nlohmann::json* value = Field(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) ThrowType(what, key, *value, "a number");
  return value->get<double>();
}

std::optional<bool> GetBool(const nlohmann::json& object, const char* key, std::string_view what) {
  const nlohmann::json* value = Field(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) ThrowType(what, key, *value, "a boolean");
  return value->get<bool>();
}

std::optional<std::string> GetString(const nlohmann::json& object, const char* key,
                                     std::string_view what) {
  const nlohmann::json* value = Field(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) ThrowType(what, key, *value, "a string");
  return value->get<std::string>();
}

const nlohmann::json* GetObject(const nlohmann::json& object, const char* key,
                                std::string_view what) {
  const nlohmann::json* value = Field(object, key);
  if (value != nullptr && !value->is_object()) ThrowType(what, key, *value, "an object");
  return value;
}

const nlohmann::json* GetArray(const nlohmann::json& object, const char* key,
                               std::string_view what) {
  const nlohmann::json* value = Field(object, key);
  if (value != nullptr && !value->is_array()) ThrowType(what, key, *value, "an array");
  return value;
}

}  // namespace reprise::hf
