#include "tokenizer/jinja/parser.h"

#include <algorithm>
#include <stdexcept>

#include "inferlab/util/error.h"

namespace inferlab::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_template() {
    Body body = parse_body({});
    if (peek().type != Tok::End) error_here("unexpected tag");
    return body;
  }

 private:
  const Token& peek(int ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[std::min(pos_++, tokens_.size() - 1)]; }
  bool is_name(const char* name, int ahead = 0) const { return peek(ahead).type == Tok::Name && peek(ahead).text == name; }
  bool is_op(const char* op) const { return peek().type == Tok::Op && peek().text == op; }
  [[noreturn]] void error_here(const std::string& what) const {
    const Token& t = peek();
    fail("chat template line {}: {} (at {:?})", t.line, what, t.text.empty() ? describe(t.type) : t.text);
  }
  static std::string describe(Tok t) {
    switch (t) {
      case Tok::CloseStmt: return "%}";
      case Tok::CloseExpr: return "}}";
      case Tok::OpenStmt: return "{%";
      case Tok::OpenExpr: return "{{";
      case Tok::End: return "end of template";
      default: return "token";
    }
  }
  void expect(Tok type, const char* what) {
    if (peek().type != type) error_here(std::string("expected ") + what);
    ++pos_;
  }
  void expect_name(const char* name) {
    if (!is_name(name)) error_here(std::string("expected '") + name + "'");
    ++pos_;
  }
  // The {% endif %}, {% endset %}... that parse_body stopped at.
  void end_tag() {
    expect(Tok::OpenStmt, "{%");
    next();
    expect(Tok::CloseStmt, "%}");
  }

  // Statements until one of `enders` ({% endif %}, {% else %}...) is next; it is not consumed.
  Body parse_body(const std::vector<std::string>& enders) {
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == Tok::End) {
        if (!enders.empty()) fail("chat template: missing {{% {} %}} before the end of the template", enders.back());
        return body;
      }
      if (t.type == Tok::Comment) {
        ++pos_;
        continue;
      }
      if (t.type == Tok::Text) {
        auto s = make_stmt(Stmt::Kind::Text, t.line);
        s->text = t.text;
        body.push_back(s);
        ++pos_;
        continue;
      }
      if (t.type == Tok::OpenExpr) {
        ++pos_;
        auto s = make_stmt(Stmt::Kind::Output, t.line);
        s->expr = parse_expression();
        expect(Tok::CloseExpr, "}}");
        body.push_back(s);
        continue;
      }
      if (t.type != Tok::OpenStmt) error_here("unexpected token");
      const Token& keyword = peek(1);
      if (keyword.type != Tok::Name) { ++pos_; error_here("expected a statement name"); }
      if (std::find(enders.begin(), enders.end(), keyword.text) != enders.end()) return body;
      ++pos_;
      body.push_back(parse_statement());
    }
  }

  std::shared_ptr<Stmt> parse_statement() {
    DepthGuard guard(*this);
    const Token keyword = next();
    const std::string& k = keyword.text;
    auto stmt = make_stmt(Stmt::Kind::Text, keyword.line);
    if (k == "if") {
      stmt->kind = Stmt::Kind::If;
      ExprPtr cond = parse_expression();
      expect(Tok::CloseStmt, "%}");
      while (true) {
        Body body = parse_body({"elif", "else", "endif"});
        stmt->branches.emplace_back(cond, std::move(body));
        expect(Tok::OpenStmt, "{%");
        std::string which = next().text;
        if (which == "elif") {
          cond = parse_expression();
          expect(Tok::CloseStmt, "%}");
        } else if (which == "else") {
          expect(Tok::CloseStmt, "%}");
          stmt->branches.emplace_back(nullptr, parse_body({"endif"}));
          end_tag();
          break;
        } else {
          expect(Tok::CloseStmt, "%}");
          break;
        }
      }
    } else if (k == "for") {
      stmt->kind = Stmt::Kind::For;
      do {
        if (peek().type == Tok::LParen) ++pos_;
        if (peek().type != Tok::Name) error_here("expected a loop variable");
        stmt->targets.push_back(next().text);
        if (peek().type == Tok::RParen) ++pos_;
      } while (peek().type == Tok::Comma && (++pos_, true));
      expect_name("in");
      stmt->expr = parse_ternary(false);
      if (is_name("if")) {
        ++pos_;
        stmt->filter = parse_ternary(false);
      }
      if (is_name("recursive")) fail("chat template line {}: recursive for loops are not supported", keyword.line);
      expect(Tok::CloseStmt, "%}");
      stmt->body = parse_body({"else", "endfor"});
      expect(Tok::OpenStmt, "{%");
      if (next().text == "else") {
        expect(Tok::CloseStmt, "%}");
        stmt->else_body = parse_body({"endfor"});
        expect(Tok::OpenStmt, "{%");
        next();
      }
      expect(Tok::CloseStmt, "%}");
    } else if (k == "set") {
      ExprPtr target = parse_primary_postfix();
      std::vector<std::string> names;
      auto unpack_into = [&](const ExprPtr& name) {
        if (name->kind != Expr::Kind::Name) error_here("can only unpack into names");
        names.push_back(name->name);
      };
      if (target->kind == Expr::Kind::Name) names.push_back(target->name);
      while (peek().type == Tok::Comma) {
        ++pos_;
        unpack_into(parse_primary_postfix());
      }
      if (target->kind == Expr::Kind::Tuple)
        for (auto& item : target->items) unpack_into(item);
      stmt->targets = names;
      if (peek().type == Tok::Assign) {
        ++pos_;
        stmt->kind = Stmt::Kind::Set;
        if (target->kind == Expr::Kind::Attr) stmt->target_expr = target;
        else if (names.empty()) error_here("cannot assign to this expression");
        stmt->expr = parse_expression();
        expect(Tok::CloseStmt, "%}");
      } else {
        if (names.size() != 1) error_here("a {% set %} block needs one variable name");
        stmt->kind = Stmt::Kind::SetBlock;
        expect(Tok::CloseStmt, "%}");
        stmt->body = parse_body({"endset"});
        end_tag();
      }
    } else if (k == "macro") {
      stmt->kind = Stmt::Kind::Macro;
      if (peek().type != Tok::Name) error_here("expected a macro name");
      stmt->text = next().text;
      expect(Tok::LParen, "(");
      parse_separated(Tok::RParen, "expected , or )", [&] {
        if (peek().type != Tok::Name) error_here("expected a parameter name");
        std::string param = next().text;
        ExprPtr fallback;
        if (peek().type == Tok::Assign) {
          ++pos_;
          fallback = parse_expression();
        }
        stmt->params.emplace_back(param, fallback);
      });
      expect(Tok::CloseStmt, "%}");
      stmt->body = parse_body({"endmacro"});
      end_tag();
    } else if (k == "break" || k == "continue") {
      stmt->kind = k == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect(Tok::CloseStmt, "%}");
    } else if (k == "generation" || k == "endgeneration") {
      expect(Tok::CloseStmt, "%}");  // assistant-mask markers: no output
      stmt->kind = Stmt::Kind::Text;
    } else {
      fail("chat template line {}: the Jinja statement {{% {} %}} is not supported (supported: if/elif/else, "
           "for/else, set, macro, break, continue)", keyword.line, k);
    }
    return stmt;
  }

  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_shared<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  static std::shared_ptr<Stmt> make_stmt(Stmt::Kind kind, int line) {
    auto s = std::make_shared<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  // Nesting is bounded so hostile input cannot exhaust the stack.
  void enter_level() {
    if (++depth_ > 256) fail("chat template line {}: nesting deeper than 256 levels", peek().line);
  }
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) { p.enter_level(); }
    ~DepthGuard() { --p.depth_; }
  };
  // `a * b * c ...`, `x | f | g ...`, `x.a.b[0]...` nest to the left as deeply as they are long
  // (evaluating and freeing the tree recurses that deep), so each link counts as a level too.
  struct ChainGuard {
    Parser& p;
    int links = 0;
    explicit ChainGuard(Parser& parser) : p(parser) {}
    void link() {
      ++links;
      p.enter_level();
    }
    ~ChainGuard() { p.depth_ -= links; }
  };

  ExprPtr parse_expression() {
    DepthGuard guard(*this);
    return parse_ternary(true);
  }

  ExprPtr parse_ternary(bool allow_if) {
    ExprPtr value = parse_or();
    ChainGuard chain(*this);
    while (allow_if && is_name("if")) {
      chain.link();
      int line = next().line;
      auto e = make(Expr::Kind::Ternary, line);
      e->a = value;
      e->b = parse_or();
      if (is_name("else")) {
        ++pos_;
        e->c = parse_ternary(true);
      }
      value = e;
    }
    return value;
  }

  // One precedence level of left-associative operators: operand (operator operand)*. A Binary
  // node keeps the operator's text; its line is the operator's.
  template <typename IsOperator, typename Operand>
  ExprPtr parse_left_chain(Expr::Kind kind, IsOperator is_operator, Operand operand) {
    ExprPtr left = operand();
    ChainGuard chain(*this);
    while (is_operator()) {
      chain.link();
      const Token& op = next();
      auto e = make(kind, op.line);
      if (kind == Expr::Kind::Binary) e->name = op.text;
      e->a = left;
      e->b = operand();
      left = e;
    }
    return left;
  }

  ExprPtr parse_or() {
    return parse_left_chain(Expr::Kind::Or, [&] { return is_name("or"); }, [&] { return parse_and(); });
  }

  ExprPtr parse_and() {
    return parse_left_chain(Expr::Kind::And, [&] { return is_name("and"); }, [&] { return parse_not(); });
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      auto e = make(Expr::Kind::Not, next().line);
      e->a = parse_not();
      return e;
    }
    return parse_comparison();
  }

  ExprPtr parse_comparison() {
    ExprPtr left = parse_additive();
    ChainGuard chain(*this);
    while (true) {
      chain.link();
      std::string op;
      if (peek().type == Tok::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                     peek().text == ">" || peek().text == "<=" || peek().text == ">="))
        op = next().text;
      else if (is_name("in")) { ++pos_; op = "in"; }
      else if (is_name("not") && is_name("in", 1)) { pos_ += 2; op = "not in"; }
      else break;
      auto e = make(Expr::Kind::Binary, peek().line);
      e->name = op;
      e->a = left;
      e->b = parse_additive();
      left = e;
    }
    return left;
  }

  ExprPtr parse_additive() {
    return parse_left_chain(Expr::Kind::Binary, [&] { return is_op("+") || is_op("-") || is_op("~"); },
                            [&] { return parse_multiplicative(); });
  }

  ExprPtr parse_multiplicative() {
    return parse_left_chain(Expr::Kind::Binary, [&] { return is_op("*") || is_op("/") || is_op("//") || is_op("%"); },
                            [&] { return parse_test(); });
  }

  ExprPtr parse_test() {
    ExprPtr value = parse_pow();
    ChainGuard chain(*this);
    while (is_name("is")) {
      chain.link();
      auto e = make(Expr::Kind::Test, next().line);
      if (is_name("not")) { ++pos_; e->negated = true; }
      if (peek().type != Tok::Name) error_here("expected a test name after 'is'");
      e->name = next().text;
      e->a = value;
      if (peek().type == Tok::LParen) {
        parse_call_args(*e);
      } else if (peek().type == Tok::Number || peek().type == Tok::String ||
                 (peek().type == Tok::Name && !is_name("and") && !is_name("or") && !is_name("if") && !is_name("else") &&
                  !is_name("in") && !is_name("not"))) {
        e->items.push_back(parse_primary_postfix());
      }
      value = e;
    }
    return value;
  }

  ExprPtr parse_pow() {
    return parse_left_chain(Expr::Kind::Binary, [&] { return is_op("**"); }, [&] { return parse_unary(); });
  }

  // As Jinja: filters apply to the negated value, so -3|abs is 3.
  ExprPtr parse_unary(bool with_filter = true) {
    DepthGuard guard(*this);
    ExprPtr value;
    if (is_op("-") || is_op("+")) {
      value = make(Expr::Kind::Unary, peek().line);
      value->name = next().text;
      value->a = parse_unary(false);
    } else {
      value = parse_primary_postfix();
    }
    return with_filter ? parse_filters(value) : value;
  }

  ExprPtr parse_filters(ExprPtr value) {
    ChainGuard chain(*this);
    while (peek().type == Tok::Pipe) {
      chain.link();
      ++pos_;
      if (peek().type != Tok::Name) error_here("expected a filter name after |");
      auto e = make(Expr::Kind::Filter, peek().line);
      e->name = next().text;
      e->a = value;
      if (peek().type == Tok::LParen) parse_call_args(*e);
      value = e;
    }
    return value;
  }

  void parse_call_args(Expr& e) {
    expect(Tok::LParen, "(");
    parse_separated(Tok::RParen, "expected , or ) in an argument list", [&] {
      if (peek().type == Tok::Name && peek(1).type == Tok::Assign) {
        std::string key = next().text;
        ++pos_;
        e.kwargs.emplace_back(key, parse_expression());
      } else {
        e.items.push_back(parse_expression());
      }
    });
  }

  // Items separated by commas (a trailing one allowed) up to `closer`, which is consumed.
  template <typename Item>
  void parse_separated(Tok closer, const char* what, Item item) {
    while (peek().type != closer) {
      item();
      if (peek().type == Tok::Comma) ++pos_;
      else if (peek().type != closer) error_here(what);
    }
    ++pos_;
  }

  ExprPtr parse_primary_postfix() {
    ExprPtr value = parse_primary();
    ChainGuard chain(*this);
    while (true) {
      chain.link();
      if (peek().type == Tok::Dot) {
        ++pos_;
        auto e = make(Expr::Kind::Attr, peek().line);
        if (peek().type != Tok::Name && peek().type != Tok::Number) error_here("expected an attribute name after .");
        e->name = next().text;
        e->a = value;
        value = e;
      } else if (peek().type == Tok::LBracket) {
        int line = next().line;
        ExprPtr start, stop, step;
        bool slice = false;
        if (peek().type != Tok::Colon) start = parse_expression();
        if (peek().type == Tok::Colon) {
          slice = true;
          ++pos_;
          if (peek().type != Tok::Colon && peek().type != Tok::RBracket) stop = parse_expression();
          if (peek().type == Tok::Colon) {
            ++pos_;
            if (peek().type != Tok::RBracket) step = parse_expression();
          }
        }
        expect(Tok::RBracket, "]");
        auto e = make(slice ? Expr::Kind::Slice : Expr::Kind::Index, line);
        e->a = value;
        e->b = start;
        e->c = stop;
        if (slice) e->items.push_back(step);
        value = e;
      } else if (peek().type == Tok::LParen) {
        auto e = make(Expr::Kind::Call, peek().line);
        e->a = value;
        parse_call_args(*e);
        value = e;
      } else {
        return value;
      }
    }
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    switch (t.type) {
      case Tok::Number: {
        ++pos_;
        auto e = make(Expr::Kind::Literal, t.line);
        try {
          if (t.text.find('.') != std::string::npos) e->literal = Value::number(std::stod(t.text));
          else e->literal = Value::integer(std::stoll(t.text));
        } catch (const std::out_of_range&) {
          fail("chat template line {}: number {} is out of range", t.line, t.text);
        }
        return e;
      }
      case Tok::String: {
        auto e = make(Expr::Kind::Literal, t.line);
        std::string s;
        while (peek().type == Tok::String) s += next().text;  // adjacent literals concatenate
        e->literal = Value::string(s);
        return e;
      }
      case Tok::Name: {
        ++pos_;
        auto e = make(Expr::Kind::Literal, t.line);
        if (t.text == "true" || t.text == "True") e->literal = Value::boolean(true);
        else if (t.text == "false" || t.text == "False") e->literal = Value::boolean(false);
        else if (t.text == "none" || t.text == "None") e->literal = Value::none();
        else {
          e->kind = Expr::Kind::Name;
          e->name = t.text;
        }
        return e;
      }
      case Tok::LParen: {
        ++pos_;
        ExprPtr first = parse_expression();
        if (peek().type == Tok::RParen) {
          ++pos_;
          return first;
        }
        auto e = make(Expr::Kind::Tuple, t.line);
        e->items.push_back(first);
        while (peek().type == Tok::Comma) {
          ++pos_;
          if (peek().type == Tok::RParen) break;
          e->items.push_back(parse_expression());
        }
        expect(Tok::RParen, ")");
        return e;
      }
      case Tok::LBracket: {
        ++pos_;
        auto e = make(Expr::Kind::List, t.line);
        parse_separated(Tok::RBracket, "expected , or ] in a list", [&] { e->items.push_back(parse_expression()); });
        return e;
      }
      case Tok::LBrace: {
        ++pos_;
        auto e = make(Expr::Kind::Dict, t.line);
        parse_separated(Tok::RBrace, "expected , or } in a dict", [&] {
          e->items.push_back(parse_expression());
          expect(Tok::Colon, ":");
          e->items.push_back(parse_expression());
        });
        return e;
      }
      default: error_here("expected an expression");
    }
  }

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).parse_template(); }

}  // namespace inferlab::jinja
