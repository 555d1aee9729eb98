// The Jinja parser on its own: operator precedence and associativity, the statement forms, and
// the nesting limit (256 levels, operator, filter and attribute chains included).
#include <gtest/gtest.h>

#include <string>

#include "inferlab/util/error.h"
#include "tokenizer/jinja/parser.h"

namespace inferlab::jinja {
namespace {

// An expression as a Lisp-like string: (+ 1 (* 2 3)), (| f x), (. x a), (is not defined x)...
std::string sexpr(const ExprPtr& e) {
  if (!e) return "_";
  auto items = [&](const char* head, const ExprPtr* first) {
    std::string out = std::string("(") + head;
    if (first) out += " " + sexpr(*first);
    for (const auto& item : e->items) out += " " + sexpr(item);
    for (const auto& [k, v] : e->kwargs) out += " " + k + "=" + sexpr(v);
    return out + ")";
  };
  switch (e->kind) {
    case Expr::Kind::Literal: return e->literal.is_string() ? "'" + e->literal.s + "'" : to_string(e->literal);
    case Expr::Kind::Name: return e->name;
    case Expr::Kind::List: return items("list", nullptr);
    case Expr::Kind::Tuple: return items("tuple", nullptr);
    case Expr::Kind::Dict: return items("dict", nullptr);
    case Expr::Kind::Attr: return "(. " + sexpr(e->a) + " " + e->name + ")";
    case Expr::Kind::Index: return "([] " + sexpr(e->a) + " " + sexpr(e->b) + ")";
    case Expr::Kind::Slice: return "(: " + sexpr(e->a) + " " + sexpr(e->b) + " " + sexpr(e->c) + " " + sexpr(e->items[0]) + ")";
    case Expr::Kind::Call: return items("call", &e->a);
    case Expr::Kind::Filter: return items(("| " + e->name).c_str(), &e->a);
    case Expr::Kind::Test: return items(((e->negated ? "is not " : "is ") + e->name).c_str(), &e->a);
    case Expr::Kind::Unary: return "(" + e->name + " " + sexpr(e->a) + ")";
    case Expr::Kind::Binary: return "(" + e->name + " " + sexpr(e->a) + " " + sexpr(e->b) + ")";
    case Expr::Kind::And: return "(and " + sexpr(e->a) + " " + sexpr(e->b) + ")";
    case Expr::Kind::Or: return "(or " + sexpr(e->a) + " " + sexpr(e->b) + ")";
    case Expr::Kind::Not: return "(not " + sexpr(e->a) + ")";
    case Expr::Kind::Ternary: return "(if " + sexpr(e->b) + " " + sexpr(e->a) + " " + sexpr(e->c) + ")";
  }
  return "?";
}

// The one {{ expression }} of a template.
ExprPtr expression(const std::string& source) {
  Body body = parse(lex("{{ " + source + " }}"));
  if (body.size() != 1 || body[0]->kind != Stmt::Kind::Output) throw std::runtime_error("not one expression: " + source);
  return body[0]->expr;
}
std::string tree(const std::string& source) { return sexpr(expression(source)); }

std::string error_of(const std::string& source) {
  try {
    parse(lex(source));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JinjaParser, PrecedenceAndAssociativity) {
  EXPECT_EQ(tree("1 + 2 * 3 - 4"), "(- (+ 1 (* 2 3)) 4)");
  EXPECT_EQ(tree("a or b and not c"), "(or a (and b (not c)))");
  EXPECT_EQ(tree("a ~ b == c ~ d"), "(== (~ a b) (~ c d))");
  EXPECT_EQ(tree("x not in y and x in z"), "(and (not in x y) (in x z))");
  EXPECT_EQ(tree("2 ** 3 ** 2"), "(** (** 2 3) 2)");  // left-associative, as @huggingface/jinja
  EXPECT_EQ(tree("-3 | abs"), "(| abs (- 3))");       // filters apply to the negated value
  EXPECT_EQ(tree("a.b[0](1, k=2) | f('x') | g"), "(| g (| f (call ([] (. a b) 0) 1 k=2) 'x'))");
  EXPECT_EQ(tree("x is not divisibleby 3 and y is defined"), "(and (is not divisibleby x 3) (is defined y))");
  EXPECT_EQ(tree("'a' if c else 'b' if d"), "(if c 'a' (if d 'b' _))");
  EXPECT_EQ(tree("s[1:] ~ s[::-1] ~ s[:2]"), "(~ (~ (: s 1 _ _) (: s _ _ (- 1))) (: s _ 2 _))");
  EXPECT_EQ(tree("[1, (2, 3), {'k': none}, true, 'a' 'b']"), "(list 1 (tuple 2 3) (dict 'k' null) true 'ab')");
}

TEST(JinjaParser, StatementForms) {
  Body body = parse(lex("{% for k, v in d | items if v %}{{ k }}{% else %}none{% endfor %}"
                        "{% set ns.n = 1 %}{% set a, b = p %}{% set t %}x{% endset %}"
                        "{% macro m(a, b=2) %}{{ a }}{% endmacro %}{% if x %}1{% elif y %}2{% else %}3{% endif %}"));
  ASSERT_EQ(body.size(), 6u);
  EXPECT_EQ(body[0]->kind, Stmt::Kind::For);
  EXPECT_EQ(body[0]->targets, (std::vector<std::string>{"k", "v"}));
  EXPECT_EQ(sexpr(body[0]->expr), "(| items d)");
  EXPECT_EQ(sexpr(body[0]->filter), "v");
  EXPECT_EQ(body[0]->else_body.size(), 1u);
  EXPECT_EQ(body[1]->kind, Stmt::Kind::Set);
  EXPECT_EQ(sexpr(body[1]->target_expr), "(. ns n)");
  EXPECT_EQ(body[2]->targets, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(body[3]->kind, Stmt::Kind::SetBlock);
  EXPECT_EQ(body[4]->kind, Stmt::Kind::Macro);
  ASSERT_EQ(body[4]->params.size(), 2u);
  EXPECT_EQ(sexpr(body[4]->params[1].second), "2");
  EXPECT_EQ(body[5]->branches.size(), 3u);
  EXPECT_EQ(body[5]->branches[2].first, nullptr);  // else
}

TEST(JinjaParser, LinesOfNodes) {
  // An operator's node has the operator's line; a comparison's, that of its right operand.
  EXPECT_EQ(expression("a\n+ b")->line, 2);
  EXPECT_EQ(expression("a\nand b")->line, 2);
  EXPECT_EQ(expression("a ==\nb")->line, 2);
  EXPECT_EQ(expression("a\n==\n\nb")->line, 4);
}

TEST(JinjaParser, ErrorsNameTheProblemAndLine) {
  EXPECT_EQ(error_of("{{ [1 2] }}"), "chat template line 1: expected , or ] in a list (at \"2\")");
  EXPECT_EQ(error_of("{{ {'a' 1} }}"), "chat template line 1: expected : (at \"1\")");
  EXPECT_EQ(error_of("{{ f(1 2) }}"), "chat template line 1: expected , or ) in an argument list (at \"2\")");
  EXPECT_EQ(error_of("{% macro m(a b) %}{% endmacro %}"), "chat template line 1: expected , or ) (at \"b\")");
  EXPECT_EQ(error_of("\n{% set a, 1 = x %}"), "chat template line 2: can only unpack into names (at \"=\")");
  EXPECT_EQ(error_of("{% for x in y %}"), "chat template: missing {% endfor %} before the end of the template");
  EXPECT_EQ(error_of("{% endif %}"), "chat template line 1: the Jinja statement {% endif %} is not supported (supported: "
                                     "if/elif/else, for/else, set, macro, break, continue)");
  EXPECT_EQ(error_of("{{ 1 %}"), "chat template line 1: expected }} (at \"%}\")");
}

// The limit is counted in levels: each bracket costs two (expression and operand), each link of a
// chain one, so the longest chain that parses is a few links short of 256.
TEST(JinjaParser, NestingIsBoundedAt256Levels) {
  auto chain = [](const std::string& link, int n) {
    std::string s = "{{ x";
    for (int k = 0; k < n; ++k) s += link;
    return s + " }}";
  };
  const std::string too_deep = "nesting deeper than 256 levels";
  for (auto [link, longest] : {std::pair<std::string, int>{"*9", 253}, {"|trim", 254}, {".a", 253}, {" and x", 253}, {" ~ 1", 253}, {"[0]", 251}}) {
    EXPECT_EQ(error_of(chain(link, longest)), "(no error)") << link;
    EXPECT_NE(error_of(chain(link, longest + 1)).find(too_deep), std::string::npos) << link;
  }
  auto parens = [](int n) { return "{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}"; };
  EXPECT_EQ(error_of(parens(126)), "(no error)");
  EXPECT_NE(error_of(parens(127)).find(too_deep), std::string::npos);
  auto ifs = [](int n) {
    std::string s;
    for (int k = 0; k < n; ++k) s += "{% if 1 %}";
    for (int k = 0; k < n; ++k) s += "{% endif %}";
    return s;
  };
  EXPECT_EQ(error_of(ifs(253)), "(no error)");
  EXPECT_NE(error_of(ifs(254)).find(too_deep), std::string::npos);
}

}  // namespace
}  // namespace inferlab::jinja
