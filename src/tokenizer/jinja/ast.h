// The parsed template: statements (text, {{ }} output, {% %} blocks) holding expressions.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace inferlab::jinja {

struct Expr;
using ExprPtr = std::shared_ptr<Expr>;
struct Expr {
  enum class Kind {
    Literal, Name, List, Tuple, Dict, Attr, Index, Slice, Call, Filter, Test, Unary, Binary, And, Or,
    Not, Ternary,
  } kind;
  int line = 0;
  Value literal;
  std::string name;  // Name, Attr, Filter, Test, Unary/Binary operator
  std::vector<ExprPtr> items;  // List/Tuple/Dict(k,v,k,v..)/Call args/Filter args
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr a, b, c;  // operands; Slice: a[b:c:items[0]]
  bool negated = false;  // Test: "is not"
};

struct Stmt;
using Body = std::vector<std::shared_ptr<Stmt>>;
struct Stmt {
  enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, Break, Continue } kind;
  int line = 0;
  std::string text;
  ExprPtr expr;                                // Output, Set value, For iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (cond, body)...; else has null cond
  std::vector<std::string> targets;            // For loop variables, Set/SetBlock targets
  ExprPtr target_expr;                         // Set: a.b = ...
  ExprPtr filter;                              // For ... if cond
  Body body, else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro
};

}  // namespace inferlab::jinja
