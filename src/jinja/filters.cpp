// Jinja's filters and tests, as jinja2 3.1 defines them (tojson as Hugging Face overrides it).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "jinja/builtins.h"
#include "jinja/case_mapping.h"

namespace reprise::jinja {
namespace {

using FilterFn = std::function<Value(const Value&, CallArgs&, size_t)>;
using TestFn = std::function<bool(const Value&, CallArgs&)>;

const std::string& RequireString(const Value& value, const char* filter) {
  if (!value.is_string()) {
    throw Error(fmt::format("the {} filter needs a string, got {}", filter, value.TypeName()));
  }
  return value.as_string();
}

// Python's str.splitlines() for ASCII line breaks.
std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\x1c' || c == '\x1d' ||
        c == '\x1e') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      lines.push_back(std::move(line));
      line.clear();
    } else {
      line += c;
    }
  }
  if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

// jinja2's environment.getitem along a dotted path ("a.b", "0").
Value AttributePath(const Value& item, const Value& attribute) {
  if (attribute.is_int()) return GetItem(item, attribute);
  std::string path = attribute.Str();
  Value current = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    current = numeric ? GetItem(current, Value(static_cast<int64_t>(std::stoll(part))))
                      : GetItem(current, Value(part));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

// The arguments after `skip` positional ones, for a test named by a filter's argument.
CallArgs Rest(const CallArgs& args, size_t skip) {
  CallArgs rest;
  for (size_t i = skip; i < args.positional.size(); ++i)
    rest.positional.push_back(args.positional[i]);
  return rest;
}

// As in jinja2, a false input (None, an empty list) gives an empty generator without a look at
// the arguments.
Value SelectOrReject(const Value& input, CallArgs& args, bool by_attribute, bool select) {
  if (!input.Truthy()) return Value::Generator({});
  size_t skip = by_attribute ? 1 : 0;
  Value attribute = by_attribute ? args.Get(0, "attribute") : Value();
  std::string test = args.positional.size() > skip ? args.positional[skip].Str() : "";
  CallArgs test_args = Rest(args, skip + 1);
  Array out;
  for (const Value& item : Iterate(input)) {
    Value subject = by_attribute ? AttributePath(item, attribute) : item;
    bool passed = test.empty() ? subject.Truthy() : ApplyTest(test, subject, test_args);
    if (passed == select) out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

Value Map(const Value& input, CallArgs& args, size_t limit) {
  if (!input.Truthy()) return Value::Generator({});
  Array out;
  Value attribute = args.Get(args.positional.size(), "attribute");
  if (!attribute.is_undefined()) {
    Value fallback = args.Get(args.positional.size(), "default");
    for (const Value& item : Iterate(input)) {
      Value value = AttributePath(item, attribute);
      out.push_back(value.is_undefined() && !fallback.is_undefined() ? fallback : value);
    }
    return Value::Generator(std::move(out));
  }
  if (args.positional.empty()) throw Error("map() needs a filter name or attribute=");
  std::string filter = args.positional[0].Str();
  CallArgs filter_args = Rest(args, 1);
  filter_args.keywords = args.keywords;
  for (const Value& item : Iterate(input))
    out.push_back(ApplyFilter(filter, item, filter_args, limit));
  return Value::Generator(std::move(out));
}

Value Unique(const Value& input, CallArgs& args) {
  bool case_sensitive = args.Get(0, "case_sensitive", Value(false)).Truthy();
  Value attribute = args.Get(1, "attribute", Value::None());
  Array seen;
  Array out;
  for (const Value& item : Iterate(input)) {
    Value key = attribute.is_none() ? item : AttributePath(item, attribute);
    if (!case_sensitive && key.is_string()) key = Value(LowerCase(key.as_string()));
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return s == key; })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::Generator(std::move(out));
}

Value Indent(const Value& input, CallArgs& args, size_t limit) {
  std::string text = RequireString(input, "indent") + "\n";
  Value width = args.Get(0, "width", Value(4));
  std::string indention =
      width.is_string()
          ? width.as_string()
          : std::string(static_cast<size_t>(std::clamp<int64_t>(width.as_int(), 0, 4096)), ' ');
  bool first = args.Get(1, "first", Value(false)).Truthy();
  bool blank = args.Get(2, "blank", Value(false)).Truthy();
  std::vector<std::string> lines = SplitLines(text);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
    if (out.size() > limit) throw Error("indent: the result exceeds the output limit");
  }
  if (first) out = indention + out;
  return Value(std::move(out));
}

Value Round(const Value& input, CallArgs& args) {
  if (!input.is_number()) throw Error("round needs a number");
  int64_t precision = args.Get(0, "precision", Value(0)).as_int();
  std::string method = args.Get(1, "method", Value("common")).Str();
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = input.as_double() * scale;
  double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
  if (method != "common" && method != "ceil" && method != "floor") {
    throw Error("method must be common, ceil or floor");
  }
  return Value(r / scale);
}

// A float truncated toward zero, as Python's int() does. NaN gives the filter's default (Python
// raises ValueError, which Jinja's int filter turns into the default); a value past the 64-bit
// range (infinity included, where Python raises OverflowError) is an error here, since our
// integers are 64-bit.
std::optional<int64_t> TruncatedInt(double real) {
  if (std::isnan(real)) return std::nullopt;
  // 2^63 is exact as a double; every double in [-2^63, 2^63) truncates into range.
  constexpr double kLimit = 9223372036854775808.0;
  if (!(real >= -kLimit && real < kLimit)) {
    throw Error(fmt::format("int: {} is outside the 64-bit integer range", real));
  }
  return static_cast<int64_t>(real);
}

Value ToInt(const Value& input, CallArgs& args) {
  Value fallback = args.Get(0, "default", Value(0));
  if (input.is_int() || input.is_bool()) return Value(input.as_int());
  if (input.is_float()) {
    const std::optional<int64_t> truncated = TruncatedInt(input.as_double());
    return truncated ? Value(*truncated) : fallback;
  }
  if (input.is_string()) {
    std::string text = StripChars(input.as_string(), kPythonWhitespace, true, true);
    std::optional<double> real;
    size_t used = 0;
    try {
      int64_t number = std::stoll(text, &used, 10);
      if (used == text.size()) return Value(number);
    } catch (const std::exception&) {
    }
    try {
      real = std::stod(text, &used);
      if (used != text.size()) real.reset();
    } catch (const std::exception&) {
    }
    if (real) {
      const std::optional<int64_t> truncated = TruncatedInt(*real);
      return truncated ? Value(*truncated) : fallback;
    }
  }
  return fallback;
}

Value ToFloat(const Value& input, CallArgs& args) {
  Value fallback = args.Get(0, "default", Value(0.0));
  if (input.is_number()) return Value(input.as_double());
  if (input.is_string()) {
    try {
      size_t used = 0;
      std::string text = StripChars(input.as_string(), kPythonWhitespace, true, true);
      double real = std::stod(text, &used);
      if (used == text.size()) return Value(real);
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value Sort(const Value& input, CallArgs& args) {
  bool reverse = args.Get(0, "reverse", Value(false)).Truthy();
  bool case_sensitive = args.Get(1, "case_sensitive", Value(false)).Truthy();
  Value attribute = args.Get(2, "attribute", Value::None());
  Array items = Iterate(input);
  auto key = [&](const Value& item) {
    Value k = attribute.is_none() ? item : AttributePath(item, attribute);
    return !case_sensitive && k.is_string() ? Value(LowerCase(k.as_string())) : k;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? Compare(key(b), key(a)) < 0 : Compare(key(a), key(b)) < 0;
  });
  return Value(std::move(items));
}

const std::map<std::string, FilterFn, std::less<>>& Filters() {
  static const std::map<std::string, FilterFn, std::less<>> filters = {
      {"abs",
       [](const Value& v, CallArgs&, size_t) {
         if (!v.is_number()) throw Error("bad operand type for abs()");
         return v.is_float() ? Value(std::fabs(v.as_double()))
                             : Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
       }},
      {"attr",
       [](const Value& v, CallArgs& a, size_t) { return GetAttribute(v, a.Get(0, "name").Str()); }},
      {"capitalize",
       [](const Value& v, CallArgs&, size_t) { return Value(CapitalizeCase(v.Str())); }},
      {"default",
       [](const Value& v, CallArgs& a, size_t) {
         bool boolean = a.Get(1, "boolean", Value(false)).Truthy();
         if (v.is_undefined() || (boolean && !v.Truthy()))
           return a.Get(0, "default_value", Value(""));
         return v;
       }},
      {"first",
       [](const Value& v, CallArgs&, size_t) {
         Array items = Iterate(v);
         return items.empty() ? Value::Undefined("first item") : items.front();
       }},
      {"float", [](const Value& v, CallArgs& a, size_t) { return ToFloat(v, a); }},
      {"indent", Indent},
      {"int", [](const Value& v, CallArgs& a, size_t) { return ToInt(v, a); }},
      {"items",
       [](const Value& v, CallArgs&, size_t) {
         if (v.is_undefined()) return Value::Generator({});
         if (!v.is_object()) throw Error("Can only get item pairs from a mapping.");
         Array out;
         for (const auto& [key, value] : v.as_object().items)
           out.push_back(Value::Tuple(Array{Value(key), value}));
         return Value::Generator(std::move(out));
       }},
      {"join",
       [](const Value& v, CallArgs& a, size_t limit) {
         std::string separator = a.Get(0, "d", Value("")).Str();
         Value attribute = a.Get(1, "attribute", Value::None());
         std::string out;
         Array items = Iterate(v);
         for (size_t i = 0; i < items.size(); ++i) {
           if (i > 0) out += separator;
           out += (attribute.is_none() ? items[i] : AttributePath(items[i], attribute)).Str();
           if (out.size() > limit) throw Error("join: the result exceeds the output limit");
         }
         return Value(std::move(out));
       }},
      {"last",
       [](const Value& v, CallArgs&, size_t) {
         if (v.is_generator()) throw Error("'generator' object is not reversible");
         Array items = Iterate(v);
         return items.empty() ? Value::Undefined("last item") : items.back();
       }},
      {"length", [](const Value& v, CallArgs&, size_t) { return Value(Length(v)); }},
      {"list", [](const Value& v, CallArgs&, size_t) { return Value(Iterate(v)); }},
      {"lower", [](const Value& v, CallArgs&, size_t) { return Value(LowerCase(v.Str())); }},
      {"map", [](const Value& v, CallArgs& a, size_t limit) { return Map(v, a, limit); }},
      {"max",
       [](const Value& v, CallArgs&, size_t) {
         Array items = Iterate(v);
         if (items.empty()) return Value::Undefined("max of an empty sequence");
         return *std::max_element(items.begin(), items.end(),
                                  [](const Value& x, const Value& y) { return Compare(x, y) < 0; });
       }},
      {"min",
       [](const Value& v, CallArgs&, size_t) {
         Array items = Iterate(v);
         if (items.empty()) return Value::Undefined("min of an empty sequence");
         return *std::min_element(items.begin(), items.end(),
                                  [](const Value& x, const Value& y) { return Compare(x, y) < 0; });
       }},
      {"reject",
       [](const Value& v, CallArgs& a, size_t) { return SelectOrReject(v, a, false, false); }},
      {"rejectattr",
       [](const Value& v, CallArgs& a, size_t) { return SelectOrReject(v, a, true, false); }},
      {"replace",
       [](const Value& v, CallArgs& a, size_t limit) {
         Value count = a.Get(2, "count", Value::None());
         std::string out = Replace(v.Str(), a.Get(0, "old").Str(), a.Get(1, "new").Str(),
                                   count.is_none() ? -1 : count.as_int());
         if (out.size() > limit) throw Error("replace: the result exceeds the output limit");
         return Value(std::move(out));
       }},
      {"reverse",
       [](const Value& v, CallArgs&, size_t) {
         if (v.is_string()) return GetSlice(v, nullptr, nullptr, std::make_unique<Value>(-1).get());
         Array items = Iterate(v);
         std::reverse(items.begin(), items.end());
         return Value::Generator(std::move(items));
       }},
      {"round", [](const Value& v, CallArgs& a, size_t) { return Round(v, a); }},
      {"safe", [](const Value& v, CallArgs&, size_t) { return Value::Safe(v.Str()); }},
      {"select",
       [](const Value& v, CallArgs& a, size_t) { return SelectOrReject(v, a, false, true); }},
      {"selectattr",
       [](const Value& v, CallArgs& a, size_t) { return SelectOrReject(v, a, true, true); }},
      {"sort", [](const Value& v, CallArgs& a, size_t) { return Sort(v, a); }},
      {"string", [](const Value& v, CallArgs&, size_t) { return Value(v.Str()); }},
      {"sum",
       [](const Value& v, CallArgs& a, size_t limit) {
         Value attribute = a.Get(0, "attribute", Value::None());
         Value total = a.Get(1, "start", Value(0));
         for (const Value& item : Iterate(v)) {
           Value x = attribute.is_none() ? item : AttributePath(item, attribute);
           if (!x.is_number() || !total.is_number()) throw Error("sum needs numbers");
           total = total.is_float() || x.is_float() ? Value(total.as_double() + x.as_double())
                                                    : Value(total.as_int() + x.as_int());
         }
         (void)limit;
         return total;
       }},
      {"title", [](const Value& v, CallArgs&, size_t) { return Value(JinjaTitleCase(v.Str())); }},
      {"tojson",
       [](const Value& v, CallArgs& a, size_t limit) {
         Value indent = a.Get(1, "indent", Value::None());
         if (!a.Get(2, "separators", Value::None()).is_none())
           throw Error("tojson: separators are not supported");
         if (!indent.is_none() && !indent.is_int())
           throw Error("tojson: indent must be an integer");
         std::string out = v.ToJson(
             indent.is_none() ? -1 : static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64)),
             a.Get(3, "sort_keys", Value(false)).Truthy());
         if (out.size() > limit) throw Error("tojson: the result exceeds the output limit");
         return Value(std::move(out));
       }},
      {"trim",
       [](const Value& v, CallArgs& a, size_t) {
         Value chars = a.Get(0, "chars", Value::None());
         return Value(StripChars(
             v.Str(), chars.is_none() ? kPythonWhitespace : std::string_view(chars.as_string()),
             true, true));
       }},
      {"unique", [](const Value& v, CallArgs& a, size_t) { return Unique(v, a); }},
      {"upper", [](const Value& v, CallArgs&, size_t) { return Value(UpperCase(v.Str())); }},
  };
  return filters;
}

const std::map<std::string, TestFn, std::less<>>& Tests() {
  static const auto equal = [](const Value& v, CallArgs& a) { return v == a.Get(0, "other"); };
  static const auto less = [](const Value& v, CallArgs& a) {
    return Compare(v, a.Get(0, "other")) < 0;
  };
  static const auto less_equal = [](const Value& v, CallArgs& a) {
    return Compare(v, a.Get(0, "other")) <= 0;
  };
  static const auto greater = [](const Value& v, CallArgs& a) {
    return Compare(v, a.Get(0, "other")) > 0;
  };
  static const auto greater_equal = [](const Value& v, CallArgs& a) {
    return Compare(v, a.Get(0, "other")) >= 0;
  };
  static const auto not_equal = [](const Value& v, CallArgs& a) {
    return !(v == a.Get(0, "other"));
  };
  static const std::map<std::string, TestFn, std::less<>> tests = {
      {"boolean", [](const Value& v, CallArgs&) { return v.is_bool(); }},
      {"callable", [](const Value& v, CallArgs&) { return v.is_function(); }},
      {"defined", [](const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"divisibleby",
       [](const Value& v, CallArgs& a) {
         int64_t n = a.Get(0, "num").as_int();
         if (n == 0) throw Error("integer division or modulo by zero");
         return v.as_int() % n == 0;
       }},
      {"eq", equal},
      {"equalto", equal},
      {"==", equal},
      {"even", [](const Value& v, CallArgs&) { return v.as_int() % 2 == 0; }},
      {"false", [](const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"float", [](const Value& v, CallArgs&) { return v.is_float(); }},
      {"ge", greater_equal},
      {">=", greater_equal},
      {"gt", greater},
      {"greaterthan", greater},
      {">", greater},
      {"in", [](const Value& v, CallArgs& a) { return Contains(a.Get(0, "seq"), v); }},
      {"integer", [](const Value& v, CallArgs&) { return v.is_int(); }},
      {"iterable",
       [](const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_array() || v.is_object();
       }},
      {"le", less_equal},
      {"<=", less_equal},
      {"lower",
       [](const Value& v, CallArgs&) {
         std::string text = v.Str();
         return LowerCase(text) == text && UpperCase(text) != text;
       }},
      {"lt", less},
      {"lessthan", less},
      {"<", less},
      {"mapping",
       [](const Value& v, CallArgs&) { return v.is_object() && !v.as_object().is_namespace; }},
      {"ne", not_equal},
      {"!=", not_equal},
      {"none", [](const Value& v, CallArgs&) { return v.is_none(); }},
      {"number", [](const Value& v, CallArgs&) { return v.is_number(); }},
      {"odd", [](const Value& v, CallArgs&) { return v.as_int() % 2 != 0; }},
      {"sameas",
       [](const Value& v, CallArgs& a) {
         Value other = a.Get(0, "other");
         return (v.is_none() && other.is_none()) ||
                (v.is_bool() && other.is_bool() && v.as_bool() == other.as_bool());
       }},
      {"sequence",
       [](const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || (v.is_array() && !v.is_generator()) ||
                v.is_object();
       }},
      {"string", [](const Value& v, CallArgs&) { return v.is_string(); }},
      {"true", [](const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"undefined", [](const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"upper",
       [](const Value& v, CallArgs&) {
         std::string text = v.Str();
         return UpperCase(text) == text && LowerCase(text) != text;
       }},
  };
  return tests;
}

}  // namespace

Value ApplyFilter(const std::string& name, const Value& input, CallArgs& args, size_t limit) {
  std::string_view key = name == "d"       ? "default"
                         : name == "count" ? "length"
                                           : std::string_view(name);
  auto found = Filters().find(key);
  if (found == Filters().end()) throw Error(fmt::format("no filter named '{}'", name));
  return found->second(input, args, limit);
}

bool ApplyTest(const std::string& name, const Value& input, CallArgs& args) {
  auto found = Tests().find(name);
  if (found == Tests().end()) throw Error(fmt::format("no test named '{}'", name));
  return found->second(input, args);
}

bool IsKnownFilter(std::string_view name) {
  return name == "d" || name == "count" || Filters().count(name) > 0;
}

bool IsKnownTest(std::string_view name) { return Tests().count(name) > 0; }

}  // namespace reprise::jinja
