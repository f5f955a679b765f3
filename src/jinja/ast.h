// The parsed form of a Jinja template: expressions and statements, each with its position.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace reprise::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Expr {
  enum class Kind {
    kLiteral,    // literal
    kName,       // name
    kList,       // items
    kTuple,      // items, a Python tuple: `(a, b)`, `a, b`
    kDict,       // items: key, value, key, value, ...
    kGetAttr,    // items[0].name
    kGetItem,    // items[0][items[1]]
    kSlice,      // items[0][items[1]:items[2]:items[3]], absent parts null
    kCall,       // items[0](items[1..], keywords)
    kFilter,     // items[0] | name(items[1..], keywords)
    kTest,       // items[0] is [not] name(items[1..], keywords)
    kUnary,      // op items[0]: "-", "+", "not"
    kBinary,     // items[0] op items[1]: + - * / // % ** ~ and or in "not in" == != < <= > >=
    kCondition,  // items[0] if items[1] else items[2] (items[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  int column = 0;
  Value literal;
  std::string name;      // name, attribute, filter, test or operator
  bool negated = false;  // `is not`
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (a null condition: else)
    kFor,          // for targets in expr [if condition]: body [else: else_body]
    kSet,          // set targets = expr, or set targets[0].attribute = expr
    kSetBlock,     // set targets[0] %}body{% endset
    kMacro,        // macro name(params) body
    kFilterBlock,  // filter: expr is the filter chain applied to the body's output
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::string> targets;
  std::string attribute;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters with defaults
  Body body;
  Body else_body;
};

}  // namespace reprise::jinja
