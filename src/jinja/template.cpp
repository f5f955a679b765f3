// The renderer: walks the statement tree with Jinja's scoping (a for loop and a macro call get
// their own scope; `set` writes the innermost one), within RenderLimits.
#include "jinja/template.h"

#include <cmath>
#include <unordered_map>

#include "jinja/builtins.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace reprise::jinja {
namespace {

using Frame = std::unordered_map<std::string, Value>;

int64_t CheckedInt(__int128 value) {
  if (value > INT64_MAX || value < INT64_MIN) throw Error("integer overflow");
  return static_cast<int64_t>(value);
}

[[noreturn]] void Unsupported(const char* op, const Value& a, const Value& b) {
  if (a.is_undefined()) throw Error(fmt::format("'{}' is undefined", a.undefined_hint()));
  if (b.is_undefined()) throw Error(fmt::format("'{}' is undefined", b.undefined_hint()));
  throw Error(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.TypeName(),
                          b.TypeName()));
}

Value Repeat(const Value& sequence, int64_t count, size_t limit) {
  count = std::max<int64_t>(count, 0);
  if (sequence.is_string()) {
    const std::string& text = sequence.as_string();
    if (text.empty()) return Value(std::string());  // any count: not a loop of count no-ops
    if (static_cast<uint64_t>(count) > limit / text.size()) {
      throw Error("string repetition exceeds the output limit");
    }
    std::string out;
    for (int64_t i = 0; i < count; ++i) out += text;
    return Value(std::move(out));
  }
  const Array& items = sequence.as_array();
  if (items.empty()) return Value(Array());
  if (static_cast<uint64_t>(count) > limit / 16 / items.size()) {
    throw Error("list repetition exceeds the output limit");
  }
  Array out;
  for (int64_t i = 0; i < count; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value(std::move(out));
}

// markupsafe's escape().
std::string EscapeHtml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value Arithmetic(const std::string& op, const Value& a, const Value& b, size_t limit) {
  if (a.is_generator() || b.is_generator()) Unsupported(op.c_str(), a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > limit) throw Error("string too long");
      if (a.is_safe() || b.is_safe()) {
        return Value::Safe((a.is_safe() ? a.as_string() : EscapeHtml(a.as_string())) +
                           (b.is_safe() ? b.as_string() : EscapeHtml(b.as_string())));
      }
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_array() && b.is_array()) {
      Array out = a.as_array();
      out.insert(out.end(), b.as_array().begin(), b.as_array().end());
      return Value(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_array()) && (b.is_int() || b.is_bool()))
      return Repeat(a, b.as_int(), limit);
    if ((b.is_string() || b.is_array()) && (a.is_int() || a.is_bool()))
      return Repeat(b, a.as_int(), limit);
  }
  if (!a.is_number() || !b.is_number()) Unsupported(op.c_str(), a, b);
  const bool floats = a.is_float() || b.is_float();
  if (op == "/") {
    if (b.as_double() == 0) throw Error("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (floats) {
    double x = a.as_double();
    double y = b.as_double();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (op == "**") return Value(std::pow(x, y));
    if (y == 0) throw Error("float division by zero");
    if (op == "//") return Value(std::floor(x / y));
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value(r);
  }
  __int128 x = a.as_int();
  __int128 y = b.as_int();
  if (op == "+") return Value(CheckedInt(x + y));
  if (op == "-") return Value(CheckedInt(x - y));
  if (op == "*") return Value(CheckedInt(x * y));
  if (op == "**") {
    if (y < 0) return Value(std::pow(a.as_double(), b.as_double()));
    __int128 result = 1;
    __int128 base = x;
    for (__int128 e = y; e > 0; e >>= 1) {  // by squaring: any exponent takes few steps
      if (e & 1) result = CheckedInt(result * base);
      if (e > 1) base = CheckedInt(base * base);
    }
    return Value(CheckedInt(result));
  }
  if (y == 0) throw Error("integer division or modulo by zero");
  __int128 quotient = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) --quotient;  // floor
  if (op == "//") return Value(CheckedInt(quotient));
  return Value(CheckedInt(x - quotient * y));
}

// How much a value is to walk or copy: bytes of a string, items of a list or dict.
uint64_t SizeOf(const Value& value) {
  if (value.is_string()) return value.as_string().size();
  if (value.is_array()) return value.as_array().size();
  if (value.is_object()) return value.as_object().items.size();
  return 1;
}

// Whether `value` holds a namespace (a namespace attribute may not: values stay acyclic).
bool HoldsNamespace(const Value& value) {
  if (value.is_object()) {
    if (value.as_object().is_namespace) return true;
    for (const auto& item : value.as_object().items) {
      if (HoldsNamespace(item.second)) return true;
    }
  } else if (value.is_array()) {
    for (const Value& item : value.as_array()) {
      if (HoldsNamespace(item)) return true;
    }
  }
  return false;
}

class Renderer {
 public:
  Renderer(const RenderLimits& limits, const Value& context) : limits_(limits) {
    auto globals = std::make_shared<Frame>();
    AddBuiltins(*globals);
    if (context.is_object()) {
      for (const auto& [name, value] : context.as_object().items) (*globals)[name] = value;
    } else if (!context.is_undefined() && !context.is_none()) {
      throw Error("the template context must be a dict");
    }
    scopes_.push_back(std::move(globals));
    scopes_.push_back(std::make_shared<Frame>());  // the template's own top-level variables
  }

  std::string Run(const Body& body) {
    std::string out;
    out_ = &out;
    if (Exec(body) != Flow::kNormal) throw Error("'break' or 'continue' outside a loop");
    return out;
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  void AddBuiltins(Frame& frame) {
    frame["namespace"] = Value::MakeFunction("namespace", [](CallArgs& args) {
      Object object;
      object.is_namespace = true;
      if (!args.positional.empty()) {
        if (!args.positional[0].is_object()) throw Error("namespace() takes a dict");
        object.items = args.positional[0].as_object().items;
      }
      for (auto& [name, value] : args.keywords) object.Set(name, value);
      return Value(std::move(object));
    });
    frame["raise_exception"] = Value::MakeFunction("raise_exception", [](CallArgs& args) -> Value {
      throw Error(args.Get(0, "message").Str(), 0, 0, /*raised=*/true);
    });
    frame["range"] = Value::MakeFunction("range", [this](CallArgs& args) {
      args.CheckMax("range", 3);
      int64_t start = 0;
      int64_t stop = 0;
      int64_t step = 1;
      for (const Value& v : args.positional) {
        if (!v.is_int() && !v.is_bool()) throw Error("range() takes integers");
      }
      if (args.positional.size() == 1) {
        stop = args.positional[0].as_int();
      } else if (args.positional.size() >= 2) {
        start = args.positional[0].as_int();
        stop = args.positional[1].as_int();
        if (args.positional.size() == 3) step = args.positional[2].as_int();
      }
      if (step == 0) throw Error("range() arg 3 must not be zero");
      Array out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
        if (out.size() >= limits_.max_iterations) throw Error("range() is too long");
        out.push_back(Value(i));
        if (__builtin_add_overflow(i, step, &i)) break;  // past the int64 range: past stop too
      }
      return Value(std::move(out));
    });
    frame["strftime_now"] = StrftimeNowFunction(std::time(nullptr));
  }

  void Charge(uint64_t units) {
    work_ += units;
    if (work_ > limits_.max_work) {
      throw Error(fmt::format("the template does more than {} units of work", limits_.max_work));
    }
  }

  void Append(std::string_view text) {
    Charge(text.size());
    if (out_->size() + text.size() > limits_.max_output_bytes) {
      throw Error(fmt::format("the output exceeds {} bytes", limits_.max_output_bytes));
    }
    out_->append(text);
  }

  std::string Capture(const Body& body) {
    std::string captured;
    std::string* saved = out_;
    out_ = &captured;
    try {
      Flow flow = Exec(body);
      out_ = saved;
      if (flow != Flow::kNormal) throw Error("'break' or 'continue' outside a loop");
    } catch (...) {
      out_ = saved;
      throw;
    }
    return captured;
  }

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = (*it)->find(name);
      if (found != (*it)->end()) return found->second;
    }
    return Value::Undefined(name);
  }

  void Assign(const std::vector<std::string>& targets, const Value& value) {
    Frame& frame = *scopes_.back();
    if (targets.size() == 1) {
      frame[targets[0]] = value;
      return;
    }
    Array items = Iterate(value);
    if (items.size() != targets.size()) {
      throw Error(
          fmt::format("cannot unpack {} values into {} names", items.size(), targets.size()));
    }
    for (size_t i = 0; i < targets.size(); ++i) frame[targets[i]] = items[i];
  }

  Flow Exec(const Body& body) {
    for (const StmtPtr& stmt : body) {
      Flow flow;
      try {
        flow = ExecStmt(*stmt);
      } catch (const Error& error) {
        if (error.line() > 0) throw;
        throw Error(error.what(), stmt->line, stmt->column, error.raised());
      }
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow ExecStmt(const Stmt& stmt) {
    switch (stmt.kind) {
      case Stmt::Kind::kText:
        Append(stmt.text);
        return Flow::kNormal;
      case Stmt::Kind::kOutput:
        Append(Eval(*stmt.expr).Str());
        return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (const auto& [condition, body] : stmt.branches) {
          if (!condition || Eval(*condition).Truthy()) return Exec(body);
        }
        return Flow::kNormal;
      case Stmt::Kind::kFor:
        return ExecFor(stmt);
      case Stmt::Kind::kSet: {
        Value value = Eval(*stmt.expr);
        if (stmt.attribute.empty()) {
          Assign(stmt.targets, value);
          return Flow::kNormal;
        }
        Value target = Lookup(stmt.targets[0]);
        if (!target.is_object() || !target.as_object().is_namespace) {
          throw Error("cannot assign attribute on non-namespace object");
        }
        Charge(SizeOf(value));
        if (HoldsNamespace(value)) throw Error("a namespace attribute cannot hold a namespace");
        target.mutable_object().Set(stmt.attribute, std::move(value));
        return Flow::kNormal;
      }
      case Stmt::Kind::kSetBlock:
        Assign(stmt.targets, Value(Capture(stmt.body)));
        return Flow::kNormal;
      case Stmt::Kind::kMacro:
        DefineMacro(stmt);
        return Flow::kNormal;
      case Stmt::Kind::kFilterBlock: {
        Value body(Capture(stmt.body));
        Append(ApplyFilterChain(*stmt.expr, &body).Str());
        return Flow::kNormal;
      }
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Flow ExecFor(const Stmt& stmt) {
    Value sequence = Eval(*stmt.expr);
    if (sequence.is_none() || sequence.is_number() || sequence.is_function()) {
      throw Error(fmt::format("'{}' object is not iterable", sequence.TypeName()));
    }
    Array items = Iterate(sequence);
    scopes_.push_back(std::make_shared<Frame>());
    struct Pop {
      ~Pop() { scopes.pop_back(); }
      std::vector<std::shared_ptr<Frame>>& scopes;
    } pop{scopes_};
    if (stmt.condition) {
      Array kept;
      for (Value& item : items) {
        Assign(stmt.targets, item);
        if (Eval(*stmt.condition).Truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    const int64_t length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      Charge(1);
      if (++iterations_ > limits_.max_iterations) {
        throw Error(fmt::format("more than {} loop iterations", limits_.max_iterations));
      }
      Object loop;
      loop.items = {{"index", Value(i + 1)},
                    {"index0", Value(i)},
                    {"revindex", Value(length - i)},
                    {"revindex0", Value(length - i - 1)},
                    {"first", Value(i == 0)},
                    {"last", Value(i == length - 1)},
                    {"length", Value(length)},
                    {"depth", Value(1)},
                    {"depth0", Value(0)},
                    {"previtem",
                     i > 0 ? items[static_cast<size_t>(i - 1)] : Value::Undefined("loop.previtem")},
                    {"nextitem", i + 1 < length ? items[static_cast<size_t>(i + 1)]
                                                : Value::Undefined("loop.nextitem")}};
      loop.items.emplace_back(
          "cycle", Value::MakeFunction("cycle", [i](CallArgs& args) {
            if (args.positional.empty()) throw Error("no items for cycling given");
            return args.positional[static_cast<size_t>(i) % args.positional.size()];
          }));
      Assign(stmt.targets, items[static_cast<size_t>(i)]);
      (*scopes_.back())["loop"] = Value(std::move(loop));
      if (Exec(stmt.body) == Flow::kBreak) break;
    }
    if (length == 0) return Exec(stmt.else_body);
    return Flow::kNormal;
  }

  void DefineMacro(const Stmt& stmt) {
    const Stmt* macro = &stmt;
    (*scopes_.back())[stmt.text] = Value::MakeFunction(stmt.text, [this, macro](CallArgs& args) {
      if (args.positional.size() > macro->params.size()) {
        throw Error(fmt::format("macro '{}' takes not more than {} argument(s)", macro->text,
                                macro->params.size()));
      }
      if (++call_depth_ > limits_.max_call_depth) {
        --call_depth_;
        throw Error(fmt::format("macro calls nested deeper than {}", limits_.max_call_depth));
      }
      std::vector<std::shared_ptr<Frame>> saved = scopes_;
      scopes_ = {saved[0], saved[1], std::make_shared<Frame>()};
      try {
        Frame& frame = *scopes_.back();
        for (const auto& [name, value] : args.keywords) {
          bool known = false;
          for (const auto& param : macro->params) known = known || param.first == name;
          if (!known) {
            throw Error(
                fmt::format("macro '{}' takes no keyword argument '{}'", macro->text, name));
          }
        }
        for (size_t i = 0; i < macro->params.size(); ++i) {
          const auto& [name, fallback] = macro->params[i];
          Value value = args.Get(i, name, Value::Undefined(name));
          if (value.is_undefined() && i >= args.positional.size() && fallback)
            value = Eval(*fallback);
          frame[name] = value;
        }
        std::string output = Capture(macro->body);
        scopes_ = std::move(saved);
        --call_depth_;
        return Value(std::move(output));
      } catch (...) {
        scopes_ = std::move(saved);
        --call_depth_;
        throw;
      }
    });
  }

  CallArgs EvalArguments(const Expr& expr, size_t first) {
    CallArgs args;
    for (size_t i = first; i < expr.items.size(); ++i)
      args.positional.push_back(Eval(*expr.items[i]));
    for (const auto& [name, value] : expr.keywords) args.keywords.emplace_back(name, Eval(*value));
    return args;
  }

  // `expr | name(args)`; in a filter block (`block_input` given) the chain's innermost operand
  // is null and stands for the block's output.
  Value ApplyFilterChain(const Expr& expr, const Value* block_input) {
    Value operand = !expr.items[0] ? *block_input
                    : block_input  ? ApplyFilterChain(*expr.items[0], block_input)
                                   : Eval(*expr.items[0]);
    CallArgs args = EvalArguments(expr, 1);
    Charge(SizeOf(operand));
    return ApplyFilter(expr.name, operand, args, limits_.max_output_bytes);
  }

  Value Eval(const Expr& expr) {
    try {
      return EvalUnchecked(expr);
    } catch (const Error& error) {
      if (error.line() > 0) throw;
      throw Error(error.what(), expr.line, expr.column, error.raised());
    }
  }

  Value EvalUnchecked(const Expr& expr) {
    switch (expr.kind) {
      case Expr::Kind::kLiteral:
        return expr.literal;
      case Expr::Kind::kName:
        return Lookup(expr.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        Array items;
        for (const ExprPtr& item : expr.items) items.push_back(Eval(*item));
        return expr.kind == Expr::Kind::kTuple ? Value::Tuple(std::move(items))
                                               : Value(std::move(items));
      }
      case Expr::Kind::kDict: {
        Object object;
        for (size_t i = 0; i + 1 < expr.items.size(); i += 2) {
          Value key = Eval(*expr.items[i]);
          if (!key.is_string()) throw Error("dict keys must be strings here");
          object.Set(key.as_string(), Eval(*expr.items[i + 1]));
        }
        return Value(std::move(object));
      }
      case Expr::Kind::kGetAttr: {
        Value object = Eval(*expr.items[0]);
        if (object.is_string()) Charge(SizeOf(object));  // a method takes the string along
        return GetAttribute(object, expr.name);
      }
      case Expr::Kind::kGetItem: {
        Value object = Eval(*expr.items[0]);
        if (object.is_string()) Charge(SizeOf(object));
        return GetItem(object, Eval(*expr.items[1]));
      }
      case Expr::Kind::kSlice: {
        Value object = Eval(*expr.items[0]);
        Charge(SizeOf(object));
        Value parts[3];
        for (int i = 0; i < 3; ++i) {
          if (expr.items[static_cast<size_t>(i + 1)])
            parts[i] = Eval(*expr.items[static_cast<size_t>(i + 1)]);
        }
        return GetSlice(object, expr.items[1] ? &parts[0] : nullptr,
                        expr.items[2] ? &parts[1] : nullptr, expr.items[3] ? &parts[2] : nullptr);
      }
      case Expr::Kind::kCall: {
        Value callee = Eval(*expr.items[0]);
        CallArgs args = EvalArguments(expr, 1);
        return callee.Call(args);
      }
      case Expr::Kind::kFilter:
        return ApplyFilterChain(expr, nullptr);
      case Expr::Kind::kTest: {
        Value operand = Eval(*expr.items[0]);
        CallArgs args = EvalArguments(expr, 1);
        return Value(ApplyTest(expr.name, operand, args) != expr.negated);
      }
      case Expr::Kind::kUnary: {
        Value operand = Eval(*expr.items[0]);
        if (expr.name == "not") return Value(!operand.Truthy());
        if (!operand.is_number()) {
          throw Error(
              fmt::format("bad operand type for unary {}: '{}'", expr.name, operand.TypeName()));
        }
        if (expr.name == "+") return operand.is_bool() ? Value(operand.as_int()) : operand;
        if (operand.is_float()) return Value(-operand.as_double());
        return Value(CheckedInt(-static_cast<__int128>(operand.as_int())));
      }
      case Expr::Kind::kBinary:
        return EvalBinary(expr);
      case Expr::Kind::kCondition:
        if (Eval(*expr.items[1]).Truthy()) return Eval(*expr.items[0]);
        return expr.items[2] ? Eval(*expr.items[2]) : Value::Undefined("conditional expression");
    }
    return Value();
  }

  Value EvalBinary(const Expr& expr) {
    const std::string& op = expr.name;
    Value left = Eval(*expr.items[0]);
    if (op == "and") return left.Truthy() ? Eval(*expr.items[1]) : left;
    if (op == "or") return left.Truthy() ? left : Eval(*expr.items[1]);
    Value right = Eval(*expr.items[1]);
    if (op == "~") {
      Charge(SizeOf(left) + SizeOf(right));
      std::string text = left.Str() + right.Str();
      if (text.size() > limits_.max_output_bytes) throw Error("string too long");
      return Value(std::move(text));
    }
    if (op == "==") return Value(left == right);
    if (op == "!=") return Value(!(left == right));
    if (op == "<") return Value(Compare(left, right) < 0);
    if (op == "<=") return Value(Compare(left, right) <= 0);
    if (op == ">") return Value(Compare(left, right) > 0);
    if (op == ">=") return Value(Compare(left, right) >= 0);
    Charge(SizeOf(left) + SizeOf(right));
    if (op == "in") return Value(Contains(right, left));
    if (op == "not in") return Value(!Contains(right, left));
    Value result = Arithmetic(op, left, right, limits_.max_output_bytes);
    Charge(SizeOf(result));
    return result;
  }

  const RenderLimits& limits_;
  std::vector<std::shared_ptr<Frame>> scopes_;  // globals, top level, then loop/macro scopes
  std::string* out_ = nullptr;
  uint64_t iterations_ = 0;
  uint64_t work_ = 0;
  int call_depth_ = 0;
};

}  // namespace

Template Template::Parse(std::string_view source) {
  return Template(std::make_shared<const Body>(ParseTokens(Tokenize(source))));
}

std::string Template::Render(const Value& context, const RenderLimits& limits) const {
  return Renderer(limits, context).Run(*body_);
}

Value StrftimeNowFunction(std::time_t now) {
  return Value::MakeFunction("strftime_now", [now](CallArgs& args) {
    Value format = args.Get(0, "format");
    if (!format.is_string()) throw Error("strftime_now() takes a format string");
    std::tm local{};
    localtime_r(&now, &local);
    char buffer[512];
    size_t length = std::strftime(buffer, sizeof(buffer), format.as_string().c_str(), &local);
    if (length == 0 && !format.as_string().empty()) throw Error("strftime_now(): format too long");
    return Value(std::string(buffer, length));
  });
}

}  // namespace reprise::jinja
