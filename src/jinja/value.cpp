#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/utf8.h"

namespace reprise::jinja {

Error::Error(const std::string& message, int line, int column, bool raised)
    : reprise::Error(line > 0
                         ? fmt::format("{} (template line {}, column {})", message, line, column)
                         : message),
      line_(line),
      column_(column),
      raised_(raised) {}

const Value* Object::Find(std::string_view key) const {
  for (const auto& [name, value] : items) {
    if (name == key) return &value;
  }
  return nullptr;
}

void Object::Set(const std::string& key, Value value) {
  for (auto& [name, existing] : items) {
    if (name == key) {
      existing = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

namespace {

uint32_t NestingOf(uint32_t deepest_item) {
  if (deepest_item + 1 > Value::kMaxNesting) {
    throw Error(fmt::format("values nested deeper than {} levels", Value::kMaxNesting));
  }
  return deepest_item + 1;
}

}  // namespace

Value::Value(Array v) {
  uint32_t deepest = 0;
  for (const Value& item : v) deepest = std::max(deepest, item.nesting_);
  nesting_ = NestingOf(deepest);
  data_ = std::make_shared<Array>(std::move(v));
}

Value::Value(Object v) {
  uint32_t deepest = 0;
  for (const auto& item : v.items) deepest = std::max(deepest, item.second.nesting_);
  nesting_ = NestingOf(deepest);
  data_ = std::make_shared<Object>(std::move(v));
}

Value Value::MakeFunction(std::string name, Function function) {
  Value value;
  value.data_ =
      std::make_shared<const FunctionBox>(FunctionBox{std::move(name), std::move(function)});
  return value;
}

Value Value::Tuple(Array items) {
  Value value(std::move(items));
  value.tuple_ = true;
  return value;
}

Value Value::Generator(Array items) {
  Value value(std::move(items));
  value.generator_ = true;
  return value;
}

Value Value::Safe(std::string text) {
  Value value(std::move(text));
  value.safe_ = true;
  return value;
}

Value Value::FromJson(const nlohmann::json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null:
      return None();
    case nlohmann::json::value_t::boolean:
      return Value(json.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(json.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t number = json.get<uint64_t>();
      if (number > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(number));
      return Value(static_cast<int64_t>(number));
    }
    case nlohmann::json::value_t::number_float:
      return Value(json.get<double>());
    case nlohmann::json::value_t::string:
      return Value(json.get<std::string>());
    case nlohmann::json::value_t::array: {
      Array array;
      for (const auto& item : json) array.push_back(FromJson(item));
      return Value(std::move(array));
    }
    case nlohmann::json::value_t::object: {
      Object object;
      for (const auto& [key, item] : json.items()) object.items.emplace_back(key, FromJson(item));
      return Value(std::move(object));
    }
    default:
      throw Error("a JSON value of this kind cannot be given to a template");
  }
}

namespace {

// The alternative T of a value's data, or Error naming what was expected: never
// std::bad_variant_access, which no caller catches. The type's name only on failure (TypeName
// itself reads an object as one).
template <typename T, typename Data>
const T& Checked(const Data& data, const char* expected, const Value& value) {
  if (!std::holds_alternative<T>(data)) {
    throw Error(fmt::format("expected {}, got {}", expected, value.TypeName()));
  }
  return std::get<T>(data);
}

}  // namespace

bool Value::as_bool() const { return Checked<bool>(data_, "a boolean", *this); }

int64_t Value::as_int() const {
  if (is_bool()) return int64_t{as_bool()};
  return Checked<int64_t>(data_, "an integer", *this);
}

const std::string& Value::as_string() const {
  return Checked<std::string>(data_, "a string", *this);
}

const Array& Value::as_array() const {
  return *Checked<std::shared_ptr<Array>>(data_, "a list", *this);
}

const Object& Value::as_object() const {
  return *Checked<std::shared_ptr<Object>>(data_, "a mapping", *this);
}

Object& Value::mutable_object() const {
  return *Checked<std::shared_ptr<Object>>(data_, "a mapping", *this);
}

double Value::as_double() const {
  return is_float() ? std::get<double>(data_) : static_cast<double>(as_int());
}

const std::string& Value::function_name() const {
  return std::get<std::shared_ptr<const FunctionBox>>(data_)->name;
}

Value Value::Call(CallArgs& args) const {
  if (!is_function()) {
    if (is_undefined()) throw Error(fmt::format("'{}' is undefined", undefined_hint()));
    throw Error(fmt::format("'{}' object is not callable", TypeName()));
  }
  return std::get<std::shared_ptr<const FunctionBox>>(data_)->function(args);
}

bool Value::Truthy() const {
  if (generator_) return true;
  switch (type()) {
    case Type::kUndefined:
    case Type::kNone:
      return false;
    case Type::kBool:
      return as_bool();
    case Type::kInt:
      return as_int() != 0;
    case Type::kFloat:
      return as_double() != 0.0;
    case Type::kString:
      return !as_string().empty();
    case Type::kArray:
      return !as_array().empty();
    case Type::kObject:
      return !as_object().items.empty();
    case Type::kFunction:
      return true;
  }
  return false;
}

const char* Value::TypeName() const {
  if (generator_) return "generator";
  switch (type()) {
    case Type::kUndefined:
      return "Undefined";
    case Type::kNone:
      return "NoneType";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kFloat:
      return "float";
    case Type::kString:
      return "str";
    case Type::kArray:
      return "list";
    case Type::kObject:
      return is_object() && as_object().is_namespace ? "Namespace" : "dict";
    case Type::kFunction:
      return "function";
  }
  return "object";
}

std::string FloatRepr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The shortest digits that round-trip, then Python's layout: positional for exponents -4..15.
  char buffer[64];
  auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string sci(buffer, result.ptr);
  size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  int exponent = std::stoi(sci.substr(e + 1));
  bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out += digits;
      out.append(static_cast<size_t>(exponent + 1) - digits.size(), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<size_t>(exponent + 1));
      out += '.';
      out.append(digits, static_cast<size_t>(exponent + 1));
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

namespace {

std::string StringRepr(const std::string& text) {
  const bool double_quotes =
      text.find('\'') != std::string::npos && text.find('"') == std::string::npos;
  const char quote = double_quotes ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : text) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

void JsonString(const std::string& text, std::string& out) {
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void JsonDump(const Value& value, int indent, bool sort_keys, int depth, std::string& out) {
  if (depth > 512) throw Error("tojson: value nested too deeply");
  if (value.is_generator()) throw Error("Object of type generator is not JSON serializable");
  const std::string item_separator = indent >= 0 ? "," : ", ";
  auto newline = [&](int level) {
    if (indent >= 0) {
      out += '\n';
      out.append(static_cast<size_t>(indent * level), ' ');
    }
  };
  switch (value.type()) {
    case Value::Type::kNone:
      out += "null";
      return;
    case Value::Type::kBool:
      out += value.as_bool() ? "true" : "false";
      return;
    case Value::Type::kInt:
      out += std::to_string(value.as_int());
      return;
    case Value::Type::kFloat: {
      double number = value.as_double();
      out += std::isnan(number)   ? "NaN"
             : std::isinf(number) ? (number > 0 ? "Infinity" : "-Infinity")
                                  : FloatRepr(number);
      return;
    }
    case Value::Type::kString:
      JsonString(value.as_string(), out);
      return;
    case Value::Type::kArray: {
      const Array& array = value.as_array();
      if (array.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < array.size(); ++i) {
        if (i > 0) out += item_separator;
        newline(depth + 1);
        JsonDump(array[i], indent, sort_keys, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Type::kObject: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& item : value.as_object().items) items.push_back(&item);
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_separator;
        newline(depth + 1);
        JsonString(items[i]->first, out);
        out += ": ";
        JsonDump(items[i]->second, indent, sort_keys, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      throw Error(fmt::format("Object of type {} is not JSON serializable", value.TypeName()));
  }
}

std::string Join(const Array& items, const char* open, const char* close) {
  std::string out = open;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += items[i].Repr();
  }
  return out + close;
}

}  // namespace

std::string Value::Str() const {
  switch (type()) {
    case Type::kUndefined:
      return "";
    case Type::kString:
      return as_string();
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  if (generator_) return "<generator object>";
  switch (type()) {
    case Type::kUndefined:
      return "";
    case Type::kNone:
      return "None";
    case Type::kBool:
      return as_bool() ? "True" : "False";
    case Type::kInt:
      return std::to_string(as_int());
    case Type::kFloat:
      return FloatRepr(as_double());
    case Type::kString:
      return StringRepr(as_string());
    case Type::kArray:
      if (tuple_ && as_array().size() == 1) {  // (a,)
        std::string out = "(";
        out += as_array()[0].Repr();
        out += ",)";
        return out;
      }
      return tuple_ ? Join(as_array(), "(", ")") : Join(as_array(), "[", "]");
    case Type::kObject: {
      const Object& object = as_object();
      std::string out = object.is_namespace ? "<Namespace {" : "{";
      for (size_t i = 0; i < object.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += StringRepr(object.items[i].first) + ": " + object.items[i].second.Repr();
      }
      return out + (object.is_namespace ? "}>" : "}");
    }
    case Type::kFunction:
      return "<function " + function_name() + ">";
  }
  return "";
}

std::string Value::ToJson(int indent, bool sort_keys) const {
  std::string out;
  JsonDump(*this, indent, sort_keys, 0, out);
  return out;
}

bool operator==(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return true;
    case Value::Type::kString:
      return a.as_string() == b.as_string();
    case Value::Type::kArray:
      if (a.is_generator() || b.is_generator() || a.is_tuple() != b.is_tuple()) return false;
      return a.as_array() == b.as_array();
    case Value::Type::kObject: {
      const Object& x = a.as_object();
      const Object& y = b.as_object();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [key, value] : x.items) {
        const Value* other = y.Find(key);
        if (other == nullptr || !(*other == value)) return false;
      }
      return true;
    }
    case Value::Type::kFunction:
      return &a == &b;
    default:
      return false;
  }
}

int Compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double();
      double y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int order = a.as_string().compare(b.as_string());
    return order < 0 ? -1 : (order > 0 ? 1 : 0);
  }
  if (a.is_array() && b.is_array()) {
    const Array& x = a.as_array();
    const Array& y = b.as_array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!(x[i] == y[i])) return Compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw Error(fmt::format("'<' not supported between instances of '{}' and '{}'", a.TypeName(),
                          b.TypeName()));
}

Value CallArgs::Get(size_t index, std::string_view name, Value fallback) const {
  if (index < positional.size()) return positional[index];
  for (const auto& [key, value] : keywords) {
    if (key == name) return value;
  }
  return fallback;
}

void CallArgs::CheckMax(std::string_view function, size_t max) const {
  if (positional.size() > max) {
    throw Error(fmt::format("{}() takes at most {} positional arguments ({} given)", function, max,
                            positional.size()));
  }
}

std::vector<std::string> SplitCodePoints(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    size_t length = unicode::Utf8SequenceLength(static_cast<uint8_t>(text[i]));
    length = std::min(length, text.size() - i);
    out.push_back(text.substr(i, length));
    i += length;
  }
  return out;
}

}  // namespace reprise::jinja
