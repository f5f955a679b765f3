// The values a Jinja template works on, with Python's semantics where templates can see them
// (str(), repr(), ==, <, truthiness, json.dumps as Hugging Face's tojson calls it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"

namespace reprise::jinja {

// A template that cannot be parsed or rendered; the message names the line and column.
// `raised` marks an error the template raised itself (raise_exception).
class Error : public reprise::Error {
 public:
  Error(const std::string& message, int line = 0, int column = 0, bool raised = false);
  int line() const { return line_; }
  int column() const { return column_; }
  bool raised() const { return raised_; }

 private:
  int line_;
  int column_;
  bool raised_;
};

class Value;
struct CallArgs;
using Array = std::vector<Value>;
using Function = std::function<Value(CallArgs&)>;

// A dict: string keys in insertion order (as Python's dicts keep them). A namespace() object is
// a dict whose attributes `{% set ns.x = ... %}` may change.
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;

  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value value);
};

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Value() = default;  // undefined
  Value(bool v) : data_(v) {}
  Value(int v) : data_(int64_t{v}) {}
  Value(int64_t v) : data_(v) {}
  Value(size_t v) : data_(static_cast<int64_t>(v)) {}
  Value(double v) : data_(v) {}
  Value(std::string v) : data_(std::move(v)) {}
  Value(std::string_view v) : data_(std::string(v)) {}
  Value(const char* v) : data_(std::string(v)) {}
  // Lists and dicts nest at most kMaxNesting deep (throws Error beyond), so that no walk over a
  // value (repr, ==, json, destruction) can exhaust the stack.
  static constexpr uint32_t kMaxNesting = 256;
  Value(Array v);
  Value(Object v);

  static Value None() { return Value(NoneTag{}); }
  // An undefined value that remembers what was looked up, for the error when it is used.
  static Value Undefined(std::string hint) { return Value(UndefinedTag{std::move(hint)}); }
  static Value MakeFunction(std::string name, Function function);
  // What Jinja's map/select/unique filters return: a Python generator, iterable once, always
  // true, without len(), not JSON (kept apart so that templates misusing one fail as in Python).
  static Value Generator(Array items);
  // A Python tuple: a list that prints as (a, b) and is never equal to a list.
  static Value Tuple(Array items);
  // A string marked safe (jinja's Markup, from the `safe` filter): a plain string added to it is
  // HTML-escaped first, as markupsafe does.
  static Value Safe(std::string text);
  static Value FromJson(const nlohmann::json& json);

  Type type() const { return static_cast<Type>(data_.index()); }
  bool is_undefined() const { return type() == Type::kUndefined; }
  bool is_none() const { return type() == Type::kNone; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_float() const { return type() == Type::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }
  bool is_function() const { return type() == Type::kFunction; }
  bool is_generator() const { return generator_; }
  bool is_tuple() const { return tuple_; }
  bool is_safe() const { return safe_; }
  uint32_t nesting() const { return nesting_; }  // 0 for scalars, 1 + the deepest item's

  // The value as one type. A template can hand any value where one type belongs (a filter's
  // argument, a slice bound): another type throws Error, as Python raises TypeError.
  bool as_bool() const;
  int64_t as_int() const;    // ints and bools
  double as_double() const;  // any number
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;
  Object& mutable_object() const;
  const std::string& undefined_hint() const { return std::get<UndefinedTag>(data_).hint; }
  const std::string& function_name() const;
  Value Call(CallArgs& args) const;

  bool Truthy() const;
  std::string Str() const;   // Python's str(); undefined prints as ""
  std::string Repr() const;  // Python's repr()
  // json.dumps(value, ensure_ascii=False, indent=indent, separators=..., sort_keys=...);
  // indent < 0 is None. Throws Error for values JSON cannot hold.
  std::string ToJson(int indent, bool sort_keys) const;
  const char* TypeName() const;

  friend bool operator==(const Value& a, const Value& b);

 private:
  struct NoneTag {};
  struct UndefinedTag {
    std::string hint;
  };
  struct FunctionBox {
    std::string name;
    Function function;
  };
  explicit Value(NoneTag tag) : data_(tag) {}
  explicit Value(UndefinedTag tag) : data_(std::move(tag)) {}

  std::variant<UndefinedTag, NoneTag, bool, int64_t, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>, std::shared_ptr<const FunctionBox>>
      data_;
  bool generator_ = false;
  bool tuple_ = false;
  bool safe_ = false;
  uint32_t nesting_ = 0;
};

// Arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;

  // The argument at `index`, or the keyword `name`, or `fallback`.
  Value Get(size_t index, std::string_view name, Value fallback = Value()) const;
  // Throws Error when more positional arguments than `max` are given.
  void CheckMax(std::string_view function, size_t max) const;
};

// Python's ordering (<) for numbers, strings and lists; throws Error for other pairs.
int Compare(const Value& a, const Value& b);

// Python's repr() of a float, e.g. 1.0, 0.1, 1e-05, 1e+16.
std::string FloatRepr(double value);

// The text of a string as code points and back, for len(), slicing and iteration.
std::vector<std::string> SplitCodePoints(const std::string& text);

}  // namespace reprise::jinja
