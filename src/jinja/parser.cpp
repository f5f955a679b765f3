#include "jinja/parser.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "jinja/builtins.h"

namespace reprise::jinja {
namespace {

// Deep enough for any real template, shallow enough that hostile nesting cannot exhaust the stack.
constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  Body ParseTemplate() {
    std::string end_tag;
    Body body = ParseBody({}, end_tag);
    if (Current().kind != Token::Kind::kEnd) Fail("unexpected tag", Current());
    return body;
  }

 private:
  using Kind = Token::Kind;

  const Token& Current() const { return tokens_[pos_]; }
  const Token& Peek(size_t ahead = 1) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& Next() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  bool IsOp(std::string_view op) const {
    return Current().kind == Kind::kOperator && Current().value == op;
  }
  bool IsName(std::string_view name) const {
    return Current().kind == Kind::kName && Current().value == name;
  }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }
  void ExpectOp(std::string_view op) {
    if (!SkipOp(op)) Fail(fmt::format("expected '{}'", op), Current());
  }
  std::string ExpectName() {
    if (Current().kind != Kind::kName) Fail("expected a name", Current());
    return Next().value;
  }
  void ExpectBlockEnd() {
    if (Current().kind != Kind::kBlockEnd) Fail("expected end of statement block", Current());
    Next();
  }

  [[noreturn]] static void Fail(const std::string& message, const Token& token) {
    std::string found = token.kind == Kind::kEnd        ? "end of template"
                        : token.kind == Kind::kBlockEnd ? "'%}'"
                        : token.kind == Kind::kVarEnd   ? "'}}'"
                                                        : "'" + token.value + "'";
    throw Error(message + ", found " + found, token.line, token.column);
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& parser) : parser(parser) {
      if (++parser.depth_ > kMaxNesting) {
        throw Error("template nested too deeply", parser.Current().line, parser.Current().column);
      }
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  // Statements up to a {% tag %} named in `end_names` (left unconsumed, its name in `end_tag`)
  // or the end of the template.
  Body ParseBody(std::initializer_list<std::string_view> end_names, std::string& end_tag) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& token = Current();
      if (token.kind == Kind::kEnd) {
        if (end_names.size() > 0) {
          std::string expected;
          for (std::string_view end : end_names) {
            expected += (expected.empty() ? "'" : " or '") + std::string(end) + "'";
          }
          throw Error("unexpected end of template, expected " + expected, token.line, token.column);
        }
        return body;
      }
      if (token.kind == Kind::kText) {
        auto stmt = MakeStmt(Stmt::Kind::kText, token);
        stmt->text = token.value;
        body.push_back(std::move(stmt));
        Next();
      } else if (token.kind == Kind::kVarBegin) {
        Next();
        auto stmt = MakeStmt(Stmt::Kind::kOutput, token);
        stmt->expr = ParseExpression();
        if (Current().kind != Kind::kVarEnd) Fail("expected '}}'", Current());
        Next();
        body.push_back(std::move(stmt));
      } else if (token.kind == Kind::kBlockBegin) {
        const Token& name = Peek();
        if (name.kind != Kind::kName) Fail("expected a statement name", name);
        for (std::string_view end : end_names) {
          if (name.value == end) {
            end_tag = name.value;
            return body;
          }
        }
        Next();
        body.push_back(ParseStatement());
      } else {
        Fail("unexpected token", token);
      }
    }
  }

  // Consumes {% name %} (the end tag ParseBody stopped at).
  void ConsumeTag() {
    Next();  // {%
    Next();  // name
  }

  StmtPtr MakeStmt(Stmt::Kind kind, const Token& token) {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = kind;
    stmt->line = token.line;
    stmt->column = token.column;
    return stmt;
  }

  StmtPtr ParseStatement() {
    const Token& token = Current();
    std::string name = ExpectName();
    if (name == "if") return ParseIf(token);
    if (name == "for") return ParseFor(token);
    if (name == "set") return ParseSet(token);
    if (name == "macro") return ParseMacro(token);
    if (name == "filter") return ParseFilterBlock(token);
    if (name == "break" || name == "continue") {
      ExpectBlockEnd();
      return MakeStmt(name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, token);
    }
    if (name == "generation") {
      // Hugging Face's {% generation %} marks assistant text; it renders its body unchanged.
      ExpectBlockEnd();
      std::string end_tag;
      auto stmt = MakeStmt(Stmt::Kind::kIf, token);
      auto always = std::make_unique<Expr>();
      always->kind = Expr::Kind::kLiteral;
      always->literal = Value(true);
      stmt->branches.emplace_back(std::move(always), ParseBody({"endgeneration"}, end_tag));
      ConsumeTag();
      ExpectBlockEnd();
      return stmt;
    }
    Fail(fmt::format("unknown or unsupported tag '{}'", name), token);
  }

  StmtPtr ParseIf(const Token& token) {
    auto stmt = MakeStmt(Stmt::Kind::kIf, token);
    ExprPtr condition = ParseExpression();
    ExpectBlockEnd();
    while (true) {
      std::string end_tag;
      Body body = ParseBody({"elif", "else", "endif"}, end_tag);
      stmt->branches.emplace_back(std::move(condition), std::move(body));
      ConsumeTag();
      if (end_tag == "elif") {
        condition = ParseExpression();
        ExpectBlockEnd();
      } else if (end_tag == "else") {
        ExpectBlockEnd();
        Body else_body = ParseBody({"endif"}, end_tag);
        stmt->branches.emplace_back(nullptr, std::move(else_body));
        ConsumeTag();
        ExpectBlockEnd();
        return stmt;
      } else {
        ExpectBlockEnd();
        return stmt;
      }
    }
  }

  std::vector<std::string> ParseTargets() {
    std::vector<std::string> targets;
    bool parenthesised = SkipOp("(");
    do {
      targets.push_back(ExpectName());
    } while (SkipOp(","));
    if (parenthesised) ExpectOp(")");
    return targets;
  }

  StmtPtr ParseFor(const Token& token) {
    auto stmt = MakeStmt(Stmt::Kind::kFor, token);
    stmt->targets = ParseTargets();
    if (!SkipName("in")) Fail("expected 'in'", Current());
    stmt->expr = ParseOr();  // no conditional expression: its `if` filters the loop
    if (SkipName("if")) stmt->condition = ParseExpression();
    if (IsName("recursive")) Fail("recursive loops are not supported", Current());
    ExpectBlockEnd();
    std::string end_tag;
    stmt->body = ParseBody({"else", "endfor"}, end_tag);
    ConsumeTag();
    ExpectBlockEnd();
    if (end_tag == "else") {
      stmt->else_body = ParseBody({"endfor"}, end_tag);
      ConsumeTag();
      ExpectBlockEnd();
    }
    return stmt;
  }

  StmtPtr ParseSet(const Token& token) {
    auto stmt = MakeStmt(Stmt::Kind::kSet, token);
    if (Current().kind == Kind::kName && Peek().kind == Kind::kOperator && Peek().value == ".") {
      stmt->targets.push_back(Next().value);
      Next();
      stmt->attribute = ExpectName();
    } else {
      stmt->targets = ParseTargets();
    }
    if (Current().kind == Kind::kBlockEnd) {
      if (stmt->targets.size() != 1 || !stmt->attribute.empty()) {
        Fail("a block set takes one name", Current());
      }
      Next();
      stmt->kind = Stmt::Kind::kSetBlock;
      std::string end_tag;
      stmt->body = ParseBody({"endset"}, end_tag);
      ConsumeTag();
      ExpectBlockEnd();
      return stmt;
    }
    ExpectOp("=");
    stmt->expr = ParseTupleOrExpression();
    ExpectBlockEnd();
    return stmt;
  }

  StmtPtr ParseMacro(const Token& token) {
    auto stmt = MakeStmt(Stmt::Kind::kMacro, token);
    stmt->text = ExpectName();
    ExpectOp("(");
    while (!SkipOp(")")) {
      if (!stmt->params.empty()) ExpectOp(",");
      if (SkipOp(")")) break;
      std::string param = ExpectName();
      ExprPtr fallback;
      if (SkipOp("=")) fallback = ParseExpression();
      stmt->params.emplace_back(std::move(param), std::move(fallback));
    }
    ExpectBlockEnd();
    std::string end_tag;
    stmt->body = ParseBody({"endmacro"}, end_tag);
    ConsumeTag();
    if (Current().kind == Kind::kName) Next();  // {% endmacro name %}
    ExpectBlockEnd();
    return stmt;
  }

  StmtPtr ParseFilterBlock(const Token& token) {
    auto stmt = MakeStmt(Stmt::Kind::kFilterBlock, token);
    ExprPtr chain;  // the innermost operand stays null: the body's output
    do {
      chain = ParseFilter(std::move(chain));
    } while (SkipOp("|"));
    stmt->expr = std::move(chain);
    ExpectBlockEnd();
    std::string end_tag;
    stmt->body = ParseBody({"endfilter"}, end_tag);
    ConsumeTag();
    ExpectBlockEnd();
    return stmt;
  }

  // ---- Expressions (Jinja's precedence, lowest first) ----

  ExprPtr MakeExpr(Expr::Kind kind, const Token& token) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->line = token.line;
    expr->column = token.column;
    return expr;
  }

  ExprPtr Binary(const Token& token, std::string op, ExprPtr left, ExprPtr right) {
    auto expr = MakeExpr(Expr::Kind::kBinary, token);
    expr->name = std::move(op);
    expr->items.push_back(std::move(left));
    expr->items.push_back(std::move(right));
    return expr;
  }

  // `a, b` as a tuple (assignments); otherwise one expression.
  ExprPtr ParseTupleOrExpression() {
    const Token& token = Current();
    ExprPtr first = ParseExpression();
    if (!IsOp(",")) return first;
    auto list = MakeExpr(Expr::Kind::kTuple, token);
    list->items.push_back(std::move(first));
    while (SkipOp(",")) {
      if (Current().kind == Kind::kBlockEnd || Current().kind == Kind::kVarEnd) break;
      list->items.push_back(ParseExpression());
    }
    return list;
  }

  ExprPtr ParseExpression() {
    DepthGuard guard(*this);
    ExprPtr expr = ParseOr();
    while (IsName("if")) {
      const Token& token = Next();
      auto condition = MakeExpr(Expr::Kind::kCondition, token);
      condition->items.push_back(std::move(expr));
      condition->items.push_back(ParseOr());
      condition->items.push_back(SkipName("else") ? ParseExpression() : nullptr);
      expr = std::move(condition);
    }
    return expr;
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsName("or")) {
      const Token& token = Next();
      left = Binary(token, "or", std::move(left), ParseAnd());
    }
    return left;
  }

  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsName("and")) {
      const Token& token = Next();
      left = Binary(token, "and", std::move(left), ParseNot());
    }
    return left;
  }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(*this);
      const Token& token = Next();
      auto expr = MakeExpr(Expr::Kind::kUnary, token);
      expr->name = "not";
      expr->items.push_back(ParseNot());
      return expr;
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
    ExprPtr left = ParseMath1();
    while (true) {
      const Token& token = Current();
      std::string op;
      if (token.kind == Kind::kOperator &&
          (token.value == "==" || token.value == "!=" || token.value == "<" ||
           token.value == "<=" || token.value == ">" || token.value == ">=")) {
        op = Next().value;
      } else if (IsName("in")) {
        Next();
        op = "in";
      } else if (IsName("not") && Peek().kind == Kind::kName && Peek().value == "in") {
        Next();
        Next();
        op = "not in";
      } else {
        return left;
      }
      left = Binary(token, op, std::move(left), ParseMath1());
    }
  }

  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const Token& token = Next();
      left = Binary(token, token.value, std::move(left), ParseConcat());
    }
    return left;
  }

  ExprPtr ParseConcat() {
    ExprPtr left = ParseMath2();
    while (IsOp("~")) {
      const Token& token = Next();
      left = Binary(token, "~", std::move(left), ParseMath2());
    }
    return left;
  }

  ExprPtr ParseMath2() {
    ExprPtr left = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& token = Next();
      left = Binary(token, token.value, std::move(left), ParsePow());
    }
    return left;
  }

  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    while (IsOp("**")) {
      const Token& token = Next();
      left = Binary(token, "**", std::move(left), ParseUnary(true));
    }
    return left;
  }

  ExprPtr ParseUnary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr expr;
    if (IsOp("-") || IsOp("+")) {
      const Token& token = Next();
      expr = MakeExpr(Expr::Kind::kUnary, token);
      expr->name = token.value;
      expr->items.push_back(ParseUnary(false));
    } else {
      expr = ParsePrimary();
    }
    expr = ParsePostfix(std::move(expr));
    if (with_filter) expr = ParseFilterExpression(std::move(expr));
    return expr;
  }

  ExprPtr ParsePrimary() {
    const Token& token = Current();
    switch (token.kind) {
      case Kind::kName: {
        Next();
        auto expr = MakeExpr(Expr::Kind::kLiteral, token);
        if (token.value == "true" || token.value == "True") {
          expr->literal = Value(true);
        } else if (token.value == "false" || token.value == "False") {
          expr->literal = Value(false);
        } else if (token.value == "none" || token.value == "None") {
          expr->literal = Value::None();
        } else {
          expr->kind = Expr::Kind::kName;
          expr->name = token.value;
        }
        return expr;
      }
      case Kind::kString: {
        std::string text;
        while (Current().kind == Kind::kString) text += Next().value;
        auto expr = MakeExpr(Expr::Kind::kLiteral, token);
        expr->literal = Value(std::move(text));
        return expr;
      }
      case Kind::kInt: {
        Next();
        auto expr = MakeExpr(Expr::Kind::kLiteral, token);
        int64_t number = 0;
        auto result =
            std::from_chars(token.value.data(), token.value.data() + token.value.size(), number);
        if (result.ec != std::errc()) {
          expr->literal = Value(std::strtod(token.value.c_str(), nullptr));
        } else {
          expr->literal = Value(number);
        }
        return expr;
      }
      case Kind::kFloat: {
        Next();
        auto expr = MakeExpr(Expr::Kind::kLiteral, token);
        expr->literal = Value(std::strtod(token.value.c_str(), nullptr));
        return expr;
      }
      case Kind::kOperator:
        if (token.value == "(") return ParseParenthesised();
        if (token.value == "[") return ParseList();
        if (token.value == "{") return ParseDict();
        [[fallthrough]];
      default:
        Fail("unexpected token in expression", token);
    }
  }

  ExprPtr ParseParenthesised() {
    const Token& token = Next();
    if (SkipOp(")")) return MakeExpr(Expr::Kind::kTuple, token);  // ()
    ExprPtr first = ParseExpression();
    if (SkipOp(")")) return first;
    auto list = MakeExpr(Expr::Kind::kTuple, token);
    list->items.push_back(std::move(first));
    while (SkipOp(",")) {
      if (IsOp(")")) break;
      list->items.push_back(ParseExpression());
    }
    ExpectOp(")");
    return list;
  }

  ExprPtr ParseList() {
    auto list = MakeExpr(Expr::Kind::kList, Next());
    while (!SkipOp("]")) {
      if (!list->items.empty()) {
        ExpectOp(",");
        if (SkipOp("]")) break;
      }
      list->items.push_back(ParseExpression());
    }
    return list;
  }

  ExprPtr ParseDict() {
    auto dict = MakeExpr(Expr::Kind::kDict, Next());
    while (!SkipOp("}")) {
      if (!dict->items.empty()) {
        ExpectOp(",");
        if (SkipOp("}")) break;
      }
      dict->items.push_back(ParseExpression());
      ExpectOp(":");
      dict->items.push_back(ParseExpression());
    }
    return dict;
  }

  ExprPtr ParsePostfix(ExprPtr expr) {
    while (true) {
      const Token& token = Current();
      if (IsOp(".")) {
        Next();
        if (Current().kind == Kind::kInt) {
          auto item = MakeExpr(Expr::Kind::kGetItem, token);
          auto index = MakeExpr(Expr::Kind::kLiteral, Current());
          index->literal =
              Value(static_cast<int64_t>(std::strtoll(Next().value.c_str(), nullptr, 10)));
          item->items.push_back(std::move(expr));
          item->items.push_back(std::move(index));
          expr = std::move(item);
          continue;
        }
        auto attr = MakeExpr(Expr::Kind::kGetAttr, token);
        attr->name = ExpectName();
        attr->items.push_back(std::move(expr));
        expr = std::move(attr);
      } else if (IsOp("[")) {
        Next();
        expr = ParseSubscript(std::move(expr), token);
      } else if (IsOp("(")) {
        expr = ParseCall(std::move(expr));
      } else {
        return expr;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr object, const Token& token) {
    ExprPtr parts[3];
    int part = 0;
    bool is_slice = false;
    while (!IsOp("]")) {
      if (IsOp(":")) {
        Next();
        is_slice = true;
        if (++part > 2) Fail("too many ':' in a slice", Current());
        continue;
      }
      if (parts[part]) Fail("expected ']'", Current());
      parts[part] = ParseExpression();
    }
    Next();
    if (!is_slice) {
      if (!parts[0]) Fail("expected a subscript", token);
      auto item = MakeExpr(Expr::Kind::kGetItem, token);
      item->items.push_back(std::move(object));
      item->items.push_back(std::move(parts[0]));
      return item;
    }
    auto slice = MakeExpr(Expr::Kind::kSlice, token);
    slice->items.push_back(std::move(object));
    for (ExprPtr& p : parts) slice->items.push_back(std::move(p));
    return slice;
  }

  // (args) after `callee`: positional arguments into items[1..], keyword arguments into keywords.
  void ParseArguments(Expr& call) {
    ExpectOp("(");
    while (!SkipOp(")")) {
      if (call.items.size() > 1 || !call.keywords.empty()) {
        ExpectOp(",");
        if (SkipOp(")")) break;
      }
      if (IsOp("*") || IsOp("**")) Fail("*args and **kwargs are not supported", Current());
      if (Current().kind == Kind::kName && Peek().kind == Kind::kOperator && Peek().value == "=") {
        std::string name = Next().value;
        Next();
        call.keywords.emplace_back(std::move(name), ParseExpression());
      } else {
        if (!call.keywords.empty()) Fail("positional argument after keyword argument", Current());
        call.items.push_back(ParseExpression());
      }
    }
  }

  ExprPtr ParseCall(ExprPtr callee) {
    auto call = MakeExpr(Expr::Kind::kCall, Current());
    call->items.push_back(std::move(callee));
    ParseArguments(*call);
    return call;
  }

  ExprPtr ParseFilter(ExprPtr operand) {
    const Token& token = Current();
    auto filter = MakeExpr(Expr::Kind::kFilter, token);
    filter->name = ExpectName();
    while (SkipOp(".")) {
      filter->name += '.';
      filter->name += ExpectName();
    }
    if (!IsKnownFilter(filter->name)) {
      throw Error(fmt::format("no filter named '{}'", filter->name), token.line, token.column);
    }
    filter->items.push_back(std::move(operand));
    if (IsOp("(")) ParseArguments(*filter);
    return filter;
  }

  ExprPtr ParseFilterExpression(ExprPtr expr) {
    while (true) {
      if (SkipOp("|")) {
        expr = ParseFilter(std::move(expr));
      } else if (IsName("is")) {
        auto test = MakeExpr(Expr::Kind::kTest, Next());
        test->negated = SkipName("not");
        const Token& name_token = Current();
        test->name = ExpectName();
        while (SkipOp(".")) {
          test->name += '.';
          test->name += ExpectName();
        }
        if (!IsKnownTest(test->name)) {
          throw Error(fmt::format("no test named '{}'", test->name), name_token.line,
                      name_token.column);
        }
        test->items.push_back(std::move(expr));
        const Token& next = Current();
        if (IsOp("(")) {
          ParseArguments(*test);
        } else if ((next.kind == Kind::kName || next.kind == Kind::kString ||
                    next.kind == Kind::kInt || next.kind == Kind::kFloat || IsOp("[") ||
                    IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) Fail("you cannot chain multiple tests with is", next);
          test->items.push_back(ParsePostfix(ParsePrimary()));
        }
        expr = std::move(test);
      } else if (IsOp("(")) {
        expr = ParseCall(std::move(expr));
      } else {
        return expr;
      }
    }
  }

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body ParseTokens(const std::vector<Token>& tokens) { return Parser(tokens).ParseTemplate(); }

}  // namespace reprise::jinja
