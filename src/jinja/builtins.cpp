// Attribute and item access, iteration, and the Python methods templates call on strings and
// dicts, with Python's results (Unicode case mapping, as Python's str methods).
#include "jinja/builtins.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "jinja/case_mapping.h"

namespace reprise::jinja {

std::string StripChars(const std::string& text, std::string_view chars, bool left, bool right) {
  size_t begin = 0;
  size_t end = text.size();
  if (left) {
    while (begin < end && chars.find(text[begin]) != std::string_view::npos) ++begin;
  }
  if (right) {
    while (end > begin && chars.find(text[end - 1]) != std::string_view::npos) --end;
  }
  return text.substr(begin, end - begin);
}

std::string Replace(const std::string& text, const std::string& old, const std::string& replacement,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python puts the replacement before every character and at the end.
    std::vector<std::string> chars = SplitCodePoints(text);
    int64_t done = 0;
    for (const std::string& c : chars) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      out += c;
    }
    if (count < 0 || done < count) out += replacement;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t found = text.find(old, pos);
    if (found == std::string::npos) break;
    out.append(text, pos, found - pos);
    out += replacement;
    pos = found + old.size();
    ++done;
  }
  out.append(text, pos, std::string::npos);
  return out;
}

namespace {

[[noreturn]] void FailUndefined(const Value& value) {
  throw Error(fmt::format("'{}' is undefined", value.undefined_hint()));
}

Array Split(const std::string& text, const Value& separator, int64_t max_split) {
  Array out;
  if (separator.is_none() || separator.is_undefined()) {
    size_t pos = 0;
    while (true) {
      while (pos < text.size() && kPythonWhitespace.find(text[pos]) != std::string_view::npos)
        ++pos;
      if (pos >= text.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(out.size()) == max_split) {
        std::string rest = text.substr(pos);
        out.push_back(Value(StripChars(rest, kPythonWhitespace, false, true)));
        break;
      }
      size_t end = pos;
      while (end < text.size() && kPythonWhitespace.find(text[end]) == std::string_view::npos)
        ++end;
      out.push_back(Value(text.substr(pos, end - pos)));
      pos = end;
    }
    return out;
  }
  if (!separator.is_string()) throw Error("split(): the separator must be a string or None");
  const std::string& sep = separator.as_string();
  if (sep.empty()) throw Error("empty separator");
  size_t pos = 0;
  while (max_split < 0 || static_cast<int64_t>(out.size()) < max_split) {
    size_t found = text.find(sep, pos);
    if (found == std::string::npos) break;
    out.push_back(Value(text.substr(pos, found - pos)));
    pos = found + sep.size();
  }
  out.push_back(Value(text.substr(pos)));
  return out;
}

bool AffixMatches(const std::string& text, const Value& affix, bool prefix) {
  auto one = [&](const Value& candidate) {
    if (!candidate.is_string())
      throw Error("startswith/endswith take a string or a tuple of strings");
    const std::string& a = candidate.as_string();
    if (a.size() > text.size()) return false;
    return prefix ? text.compare(0, a.size(), a) == 0
                  : text.compare(text.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_array()) {
    return std::any_of(affix.as_array().begin(), affix.as_array().end(), one);
  }
  return one(affix);
}

std::string CharsArgument(const CallArgs& args) {
  Value chars = args.Get(0, "chars", Value::None());
  if (chars.is_none()) return std::string(kPythonWhitespace);
  if (!chars.is_string()) throw Error("strip arg must be None or str");
  return chars.as_string();
}

Value StringMethod(const std::string& text, const std::string& name) {
  auto method = [&](Function function) { return Value::MakeFunction(name, std::move(function)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool left = name != "rstrip";
    bool right = name != "lstrip";
    return method([text, left, right](CallArgs& args) {
      args.CheckMax("strip", 1);
      return Value(StripChars(text, CharsArgument(args), left, right));
    });
  }
  if (name == "split") {
    return method([text](CallArgs& args) {
      args.CheckMax("split", 2);
      Value max_split = args.Get(1, "maxsplit", Value(-1));
      if (!max_split.is_int()) throw Error("split(): maxsplit must be an integer");
      return Value(Split(text, args.Get(0, "sep", Value::None()), max_split.as_int()));
    });
  }
  if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    return method([text, prefix](CallArgs& args) {
      args.CheckMax(prefix ? "startswith" : "endswith", 1);
      return Value(AffixMatches(text, args.Get(0, "prefix"), prefix));
    });
  }
  if (name == "upper") return method([text](CallArgs&) { return Value(UpperCase(text)); });
  if (name == "lower") return method([text](CallArgs&) { return Value(LowerCase(text)); });
  if (name == "title") return method([text](CallArgs&) { return Value(PythonTitleCase(text)); });
  if (name == "capitalize")
    return method([text](CallArgs&) { return Value(CapitalizeCase(text)); });
  if (name == "replace") {
    return method([text](CallArgs& args) {
      Value old = args.Get(0, "old");
      Value replacement = args.Get(1, "new");
      Value count = args.Get(2, "count", Value(-1));
      if (!old.is_string() || !replacement.is_string() || !count.is_int()) {
        throw Error("replace() takes two strings and an optional count");
      }
      return Value(Replace(text, old.as_string(), replacement.as_string(), count.as_int()));
    });
  }
  if (name == "find" || name == "count") {
    bool find = name == "find";
    return method([text, find](CallArgs& args) {
      Value needle = args.Get(0, "sub");
      if (!needle.is_string()) throw Error("find()/count() take a string");
      const std::string& sub = needle.as_string();
      if (find) {
        size_t at = text.find(sub);
        return Value(at == std::string::npos
                         ? int64_t{-1}
                         : static_cast<int64_t>(SplitCodePoints(text.substr(0, at)).size()));
      }
      if (sub.empty()) return Value(static_cast<int64_t>(SplitCodePoints(text).size() + 1));
      int64_t n = 0;
      for (size_t at = text.find(sub); at != std::string::npos;
           at = text.find(sub, at + sub.size()))
        ++n;
      return Value(n);
    });
  }
  if (name == "join") {
    return method([text](CallArgs& args) {
      std::string out;
      Array items = Iterate(args.Get(0, "iterable"));
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) throw Error("join(): sequence items must be strings");
        if (i > 0) out += text;
        out += items[i].as_string();
      }
      return Value(std::move(out));
    });
  }
  return Value::Undefined("str." + name);
}

Value DictMethod(const Value& dict, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return Value::MakeFunction(name, [dict, name](CallArgs&) {
      Array out;
      for (const auto& [key, value] : dict.as_object().items) {
        if (name == "items") {
          out.push_back(Value::Tuple(Array{Value(key), value}));
        } else {
          out.push_back(name == "keys" ? Value(key) : value);
        }
      }
      return Value(std::move(out));
    });
  }
  if (name == "get") {
    return Value::MakeFunction(name, [dict](CallArgs& args) {
      Value key = args.Get(0, "key");
      if (!key.is_string()) return args.Get(1, "default", Value::None());
      const Value* found = dict.as_object().Find(key.as_string());
      return found != nullptr ? *found : args.Get(1, "default", Value::None());
    });
  }
  return Value();  // not a method: the key
}

// Python's slice.indices(length) and the positions it visits.
std::vector<int64_t> SliceIndices(int64_t length, const Value* start, const Value* stop,
                                  const Value* step_value) {
  auto number = [](const Value* v) -> std::optional<int64_t> {
    if (v == nullptr || v->is_none()) return std::nullopt;
    if (!v->is_int() && !v->is_bool()) throw Error("slice indices must be integers or None");
    return v->as_int();
  };
  int64_t step = number(step_value).value_or(1);
  if (step == 0) throw Error("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> index, int64_t fallback) {
    if (!index) return fallback;
    int64_t i = *index;
    if (i < 0) i += length;
    if (step > 0) return std::clamp<int64_t>(i, 0, length);
    return std::clamp<int64_t>(i, -1, length - 1);
  };
  int64_t begin = clamp(number(start), step > 0 ? 0 : length - 1);
  int64_t end = clamp(number(stop), step > 0 ? length : -1);
  std::vector<int64_t> out;
  for (int64_t i = begin; step > 0 ? i < end : i > end; i += step) out.push_back(i);
  return out;
}

}  // namespace

Array Iterate(const Value& value) {
  switch (value.type()) {
    case Value::Type::kUndefined:
      return {};
    case Value::Type::kArray:
      return value.as_array();
    case Value::Type::kObject: {
      Array keys;
      for (const auto& item : value.as_object().items) keys.push_back(Value(item.first));
      return keys;
    }
    case Value::Type::kString: {
      Array chars;
      for (std::string& c : SplitCodePoints(value.as_string()))
        chars.push_back(Value(std::move(c)));
      return chars;
    }
    default:
      throw Error(fmt::format("'{}' object is not iterable", value.TypeName()));
  }
}

size_t Length(const Value& value) {
  if (value.is_generator()) throw Error("object of type 'generator' has no len()");
  switch (value.type()) {
    case Value::Type::kUndefined:
      return 0;
    case Value::Type::kString:
      return SplitCodePoints(value.as_string()).size();
    case Value::Type::kArray:
      return value.as_array().size();
    case Value::Type::kObject:
      return value.as_object().items.size();
    default:
      throw Error(fmt::format("object of type '{}' has no len()", value.TypeName()));
  }
}

bool Contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::kUndefined:
      return false;
    case Value::Type::kString:
      if (!item.is_string()) {
        throw Error(
            fmt::format("'in <string>' requires string as left operand, not {}", item.TypeName()));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::kArray:
      return std::any_of(container.as_array().begin(), container.as_array().end(),
                         [&](const Value& element) { return element == item; });
    case Value::Type::kObject:
      return item.is_string() && container.as_object().Find(item.as_string()) != nullptr;
    default:
      throw Error(fmt::format("argument of type '{}' is not iterable", container.TypeName()));
  }
}

Value GetAttribute(const Value& object, const std::string& name) {
  switch (object.type()) {
    case Value::Type::kUndefined:
      FailUndefined(object);
    case Value::Type::kString:
      return StringMethod(object.as_string(), name);
    case Value::Type::kObject: {
      if (!object.as_object().is_namespace) {
        Value method = DictMethod(object, name);
        if (!method.is_undefined()) return method;
      }
      const Value* found = object.as_object().Find(name);
      return found != nullptr ? *found : Value::Undefined(name);
    }
    default:
      return Value::Undefined(name);
  }
}

Value GetItem(const Value& object, const Value& key) {
  if (object.is_generator()) throw Error("'generator' object is not subscriptable");
  switch (object.type()) {
    case Value::Type::kUndefined:
      FailUndefined(object);
    case Value::Type::kObject:
      if (key.is_string()) {
        const Value* found = object.as_object().Find(key.as_string());
        if (found != nullptr) return *found;
        return GetAttribute(object, key.as_string());
      }
      return Value::Undefined("key");
    case Value::Type::kArray:
    case Value::Type::kString: {
      if (!key.is_int() && !key.is_bool()) {
        return key.is_string() ? GetAttribute(object, key.as_string()) : Value::Undefined("index");
      }
      int64_t length = static_cast<int64_t>(Length(object));
      int64_t index = key.as_int();
      if (index < 0) index += length;
      if (index < 0 || index >= length) return Value::Undefined("index");
      if (object.is_array()) return object.as_array()[static_cast<size_t>(index)];
      return Value(SplitCodePoints(object.as_string())[static_cast<size_t>(index)]);
    }
    default:
      return Value::Undefined("item");
  }
}

Value GetSlice(const Value& object, const Value* start, const Value* stop, const Value* step) {
  if (object.is_undefined()) FailUndefined(object);
  if (object.is_generator()) throw Error("'generator' object is not subscriptable");
  if (object.is_array()) {
    const Array& items = object.as_array();
    Array out;
    for (int64_t i : SliceIndices(static_cast<int64_t>(items.size()), start, stop, step)) {
      out.push_back(items[static_cast<size_t>(i)]);
    }
    return Value(std::move(out));
  }
  if (object.is_string()) {
    std::vector<std::string> chars = SplitCodePoints(object.as_string());
    std::string out;
    for (int64_t i : SliceIndices(static_cast<int64_t>(chars.size()), start, stop, step)) {
      out += chars[static_cast<size_t>(i)];
    }
    return Value(std::move(out));
  }
  throw Error(fmt::format("'{}' object is not subscriptable", object.TypeName()));
}

}  // namespace reprise::jinja
