#include "tokenizer/jinja/render.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "inferlab/util/error.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/text.h"

namespace inferlab::jinja {
namespace {

struct LoopControl {
  enum { None, Break, Continue } state = None;
};

// Statements one render may execute and bytes one output may reach: templates loop over what a
// request sends (messages, tools), so these bound the work one request can make a render do.
constexpr uint64_t kMaxRenderSteps = 1'000'000;
constexpr std::size_t kMaxRenderBytes = 64u << 20;

class Renderer {
  int call_depth_ = 0;
  uint64_t steps_ = 0;

 public:
  std::string render(const Body& body, Scope& scope) {
    std::string out;
    LoopControl control;
    exec(body, scope, out, control);
    return out;
  }

 private:
  void exec(const Body& body, Scope& scope, std::string& out, LoopControl& control) {
    for (const auto& stmt : body) {
      if (control.state != LoopControl::None) return;
      if (++steps_ > kMaxRenderSteps) error_at(stmt->line, fmt::format("the render took more than {} steps", kMaxRenderSteps));
      if (out.size() > kMaxRenderBytes) error_at(stmt->line, fmt::format("the output is larger than {} MiB", kMaxRenderBytes >> 20));
      switch (stmt->kind) {
        case Stmt::Kind::Text: out += stmt->text; break;
        case Stmt::Kind::Output: {
          Value v = eval(*stmt->expr, scope);
          if (!v.is_none() && !v.is_undefined()) out += to_string(v);
          break;
        }
        case Stmt::Kind::If:
          for (const auto& [cond, branch] : stmt->branches)
            if (!cond || truthy(eval(*cond, scope))) {
              exec(branch, scope, out, control);
              break;
            }
          break;
        case Stmt::Kind::For: run_for(*stmt, scope, out); break;
        case Stmt::Kind::Set: {
          Value v = eval(*stmt->expr, scope);
          if (stmt->target_expr) {
            Value owner = eval(*stmt->target_expr->a, scope);
            if (owner.kind != Value::Kind::Object || !owner.is_namespace)
              error_at(stmt->line, "{% set x.y = ... %} needs x to be a namespace()");
            if (holds(v, owner.object.get())) error_at(stmt->line, "{% set x.y = ... %}: the value holds the namespace x itself");
            owner.set(stmt->target_expr->name, v);
          } else if (stmt->targets.size() == 1) {
            scope.set(stmt->targets[0], v);
          } else {
            unpack(stmt->line, stmt->targets, v, scope);
          }
          break;
        }
        case Stmt::Kind::SetBlock: {
          Scope inner(&scope);
          scope.set(stmt->targets[0], Value::string(render(stmt->body, inner)));
          break;
        }
        case Stmt::Kind::Macro: define_macro(stmt, scope); break;
        case Stmt::Kind::Break: control.state = LoopControl::Break; return;
        case Stmt::Kind::Continue: control.state = LoopControl::Continue; return;
      }
    }
  }

  void unpack(int line, const std::vector<std::string>& names, const Value& v, Scope& scope) {
    if (v.kind != Value::Kind::Array) error_at(line, fmt::format("cannot unpack a {} into {} names", kind_name(v), names.size()));
    if (v.array->size() != names.size())
      error_at(line, fmt::format("cannot unpack {} items into {} names", v.array->size(), names.size()));
    for (std::size_t k = 0; k < names.size(); ++k) scope.set(names[k], (*v.array)[k]);
  }

  void run_for(const Stmt& stmt, Scope& scope, std::string& out) {
    Value iterable = eval(*stmt.expr, scope);
    std::optional<Array> found = elements(iterable);
    if (!found && !iterable.is_undefined() && !iterable.is_none())
      error_at(stmt.line, fmt::format("cannot iterate over a {}", kind_name(iterable)));
    Array items = std::move(found).value_or(Array{});
    if (stmt.filter) {
      Array kept;
      for (auto& item : items) {
        Scope probe(&scope);
        bind(stmt, item, probe);
        if (truthy(eval(*stmt.filter, probe))) kept.push_back(item);
      }
      items.swap(kept);
    }
    if (items.empty()) {
      Scope inner(&scope);
      LoopControl control;
      exec(stmt.else_body, inner, out, control);
      return;
    }
    for (std::size_t k = 0; k < items.size(); ++k) {
      Scope inner(&scope);
      bind(stmt, items[k], inner);
      auto n = static_cast<int64_t>(items.size()), idx = static_cast<int64_t>(k);
      Object loop = {{"index", Value::integer(idx + 1)},     {"index0", Value::integer(idx)},
                     {"revindex", Value::integer(n - idx)},  {"revindex0", Value::integer(n - idx - 1)},
                     {"first", Value::boolean(k == 0)},      {"last", Value::boolean(idx == n - 1)},
                     {"length", Value::integer(n)},
                     {"previtem", k > 0 ? items[k - 1] : Value()},
                     {"nextitem", idx + 1 < n ? items[k + 1] : Value()}};
      inner.set("loop", Value::dict(std::move(loop)));
      LoopControl control;
      exec(stmt.body, inner, out, control);
      if (control.state == LoopControl::Break) break;
    }
  }

  void bind(const Stmt& stmt, const Value& item, Scope& scope) {
    if (stmt.targets.size() == 1) scope.set(stmt.targets[0], item);
    else unpack(stmt.line, stmt.targets, item, scope);
  }

  void define_macro(const std::shared_ptr<Stmt>& stmt, Scope& scope) {
    Scope* defining = &scope;
    scope.set(stmt->text, Value::callable([this, stmt, defining, alive = scope.lifetime()](std::vector<Value>& args, Kwargs& kwargs) {
      if (alive.expired())
        fail("chat template line {}: macro {} is called after the block that defined it ended", stmt->line, stmt->text);
      if (call_depth_ >= 64) fail("chat template line {}: macro {} recurses deeper than 64 calls", stmt->line, stmt->text);
      ++call_depth_;
      struct Leave {
        int& depth;
        ~Leave() { --depth; }
      } leave{call_depth_};
      Scope inner(defining);
      for (std::size_t k = 0; k < stmt->params.size(); ++k) {
        const auto& [name, fallback] = stmt->params[k];
        if (k < args.size()) inner.set(name, args[k]);
        else if (const Value* v = kwargs.get(name)) inner.set(name, *v);
        else if (fallback) inner.set(name, eval(*fallback, *defining));
        else inner.set(name, Value());
      }
      return Value::string(render(stmt->body, inner));
    }));
  }

  Value eval(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.literal;
      case Expr::Kind::Name: {
        if (const Value* v = scope.lookup(e.name)) return *v;
        return global_function(e.name);
      }
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        Array a;
        for (auto& item : e.items) a.push_back(eval(*item, scope));
        return Value::list(std::move(a));
      }
      case Expr::Kind::Dict: {
        Value d = Value::dict();
        for (std::size_t k = 0; k + 1 < e.items.size(); k += 2) {
          Value key = eval(*e.items[k], scope);
          if (!key.is_string()) error_at(e.line, "dict keys must be strings");
          d.set(key.s, eval(*e.items[k + 1], scope));
        }
        return d;
      }
      case Expr::Kind::Attr: return member(e.line, eval(*e.a, scope), Value::string(e.name));
      case Expr::Kind::Index: return member(e.line, eval(*e.a, scope), eval(*e.b, scope));
      case Expr::Kind::Slice: return slice(e, scope);
      case Expr::Kind::Call: return call(e, scope);
      case Expr::Kind::Filter: return filter(e, scope);
      case Expr::Kind::Test: {
        bool result = test(e, scope);
        return Value::boolean(e.negated ? !result : result);
      }
      case Expr::Kind::Unary: {
        Value v = eval(*e.a, scope);
        if (!v.is_number()) error_at(e.line, fmt::format("unary {} needs a number, got a {}", e.name, kind_name(v)));
        if (e.name == "+") return v;
        if (v.kind == Value::Kind::Int && v.i == INT64_MIN) error_at(e.line, fmt::format("integer overflow in -({})", v.i));
        return v.kind == Value::Kind::Int ? Value::integer(-v.i) : Value::number(-v.f);
      }
      case Expr::Kind::Not: return Value::boolean(!truthy(eval(*e.a, scope)));
      case Expr::Kind::And: {
        Value l = eval(*e.a, scope);
        return truthy(l) ? eval(*e.b, scope) : l;
      }
      case Expr::Kind::Or: {
        Value l = eval(*e.a, scope);
        return truthy(l) ? l : eval(*e.b, scope);
      }
      case Expr::Kind::Ternary:
        if (truthy(eval(*e.b, scope))) return eval(*e.a, scope);
        return e.c ? eval(*e.c, scope) : Value();
      case Expr::Kind::Binary: return binary(e, scope);
    }
    return Value();
  }

  Value slice(const Expr& e, Scope& scope) {
    Value object = eval(*e.a, scope);
    auto opt = [&](const ExprPtr& p) -> std::optional<int64_t> {
      if (!p) return std::nullopt;
      Value v = eval(*p, scope);
      if (v.is_none() || v.is_undefined()) return std::nullopt;
      if (v.kind != Value::Kind::Int) error_at(e.line, "slice indices must be integers");
      return v.i;
    };
    std::optional<int64_t> start = opt(e.b), stop = opt(e.c), step_opt = opt(e.items[0]);
    int64_t step = step_opt.value_or(1);
    if (step == 0) error_at(e.line, "slice step cannot be zero");
    Array items;
    std::vector<std::string> chars;
    bool is_str = object.is_string();
    if (is_str) chars = characters(object.s);
    else if (object.kind == Value::Kind::Array) items = *object.array;
    else error_at(e.line, fmt::format("cannot slice a {}", kind_name(object)));
    auto n = static_cast<int64_t>(is_str ? chars.size() : items.size());
    // Python's slice.indices()
    auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
      if (!v) return fallback;
      int64_t x = *v < 0 ? *v + n : *v;
      if (step > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    int64_t b = clamp(start, step > 0 ? 0 : n - 1), end = clamp(stop, step > 0 ? n : -1);
    std::string s;
    Array a;
    for (int64_t k = b; step > 0 ? k < end : k > end;) {
      if (is_str) s += chars[k];
      else a.push_back(items[k]);
      if (__builtin_add_overflow(k, step, &k)) break;  // a huge step: past the end
    }
    return is_str ? Value::string(s) : Value::list(std::move(a));
  }

  Value call(const Expr& e, Scope& scope) {
    Value callee = eval(*e.a, scope);
    if (callee.kind != Value::Kind::Function) {
      std::string what = e.a->kind == Expr::Kind::Attr ? "method '" + e.a->name + "'"
                       : e.a->kind == Expr::Kind::Name ? "function '" + e.a->name + "'" : std::string("expression");
      error_at(e.line, fmt::format("{} is not supported or not callable here", what));
    }
    std::vector<Value> args = eval_args(e, scope);
    Kwargs kwargs = eval_kwargs(e, scope);
    return (*callee.function)(args, kwargs);
  }

  Value binary(const Expr& e, Scope& scope) {
    Value l = eval(*e.a, scope);
    Value r = eval(*e.b, scope);
    const std::string& op = e.name;
    if (op == "==") return Value::boolean(equal(l, r));
    if (op == "!=") return Value::boolean(!equal(l, r));
    if (op == "in" || op == "not in") {
      std::optional<bool> found = contains(r, l);
      if (!found && !r.is_undefined() && !r.is_none())
        error_at(e.line, fmt::format("'in' needs a string, list or dict on the right, got a {}", kind_name(r)));
      return Value::boolean(found.value_or(false) == (op == "in"));
    }
    if (op == "~") return Value::string(to_string(l) + to_string(r));
    if (op == "+" && (l.is_string() || r.is_string())) return Value::string(to_string(l) + to_string(r));
    if (op == "+" && l.kind == Value::Kind::Array && r.kind == Value::Kind::Array) {
      Array a = *l.array;
      a.insert(a.end(), r.array->begin(), r.array->end());
      return Value::list(std::move(a));
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int cmp;
      if (l.is_number() && r.is_number()) cmp = l.as_double() < r.as_double() ? -1 : l.as_double() > r.as_double() ? 1 : 0;
      else if (l.is_string() && r.is_string()) cmp = l.s.compare(r.s) < 0 ? -1 : l.s.compare(r.s) > 0 ? 1 : 0;
      else error_at(e.line, fmt::format("cannot compare a {} with a {} using {}", kind_name(l), kind_name(r), op));
      bool result = op == "<" ? cmp < 0 : op == ">" ? cmp > 0 : op == "<=" ? cmp <= 0 : cmp >= 0;
      return Value::boolean(result);
    }
    if (op == "*" && l.is_string() && r.kind == Value::Kind::Int) {
      if (l.s.empty() || r.i <= 0) return Value::string("");
      if (static_cast<uint64_t>(r.i) > kMaxRepeatBytes / l.s.size())
        error_at(e.line, fmt::format("a string of {} bytes * {} is larger than {} MiB", l.s.size(), r.i, kMaxRepeatBytes >> 20));
      std::string out;
      out.reserve(l.s.size() * static_cast<std::size_t>(r.i));
      for (int64_t k = 0; k < r.i; ++k) out += l.s;
      return Value::string(out);
    }
    if (!l.is_number() || !r.is_number())
      error_at(e.line, fmt::format("operator {} needs numbers, got a {} and a {}", op, kind_name(l), kind_name(r)));
    const bool ints = l.kind == Value::Kind::Int && r.kind == Value::Kind::Int;
    if (ints && op != "/" && !(op == "**" && r.i < 0)) return integer_binary(e.line, op, l.i, r.i);
    double x = l.as_double(), y = r.as_double();
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
    if (op == "**") return Value::number(std::pow(x, y));
    if (y == 0) error_at(e.line, "division by zero");
    if (op == "/") return Value::number(x / y);
    if (op == "//") return Value::number(std::floor(x / y));
    if (op == "%") return Value::number(x - y * std::floor(x / y));
    error_at(e.line, "unknown operator " + op);
  }

  // Python's integer arithmetic (floor division and modulo) in 64 bits, checked.
  static Value integer_binary(int line, const std::string& op, int64_t a, int64_t b) {
    int64_t out = 0;
    bool overflow = false;
    if (op == "+") overflow = __builtin_add_overflow(a, b, &out);
    else if (op == "-") overflow = __builtin_sub_overflow(a, b, &out);
    else if (op == "*") overflow = __builtin_mul_overflow(a, b, &out);
    else if (op == "**") {  // b >= 0; squaring by the bits of b
      out = 1;
      for (int64_t base = a, n = b; n > 0 && !overflow; n >>= 1) {
        if (n & 1) overflow = __builtin_mul_overflow(out, base, &out);
        if (n > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
      }
    } else if (op == "//" || op == "%") {
      if (b == 0) error_at(line, "division by zero");
      if (b == -1) {
        overflow = op == "//" && a == INT64_MIN;
        out = op == "//" && !overflow ? -a : 0;
      } else {
        int64_t quotient = a / b, remainder = a % b;
        if (remainder != 0 && (remainder < 0) != (b < 0)) --quotient, remainder += b;
        out = op == "//" ? quotient : remainder;
      }
    } else {
      error_at(line, "unknown operator " + op);
    }
    if (overflow) error_at(line, fmt::format("integer overflow in {} {} {}", a, op, b));
    return Value::integer(out);
  }

  bool test(const Expr& e, Scope& scope) {
    Value v = eval(*e.a, scope);
    return apply_test(e.line, e.name, v, eval_args(e, scope));
  }

  Value filter(const Expr& e, Scope& scope) {
    Value v = eval(*e.a, scope);
    std::vector<Value> args = eval_args(e, scope);
    Kwargs kwargs = eval_kwargs(e, scope);
    return apply_filter(e.line, e.name, v, args, kwargs);
  }

  // A call's, filter's or test's arguments, in order.
  std::vector<Value> eval_args(const Expr& e, Scope& scope) {
    std::vector<Value> args;
    for (auto& a : e.items) args.push_back(eval(*a, scope));
    return args;
  }
  Kwargs eval_kwargs(const Expr& e, Scope& scope) {
    Kwargs kwargs;
    for (auto& [k, v] : e.kwargs) kwargs.items.emplace_back(k, eval(*v, scope));
    return kwargs;
  }
};

}  // namespace

std::string render(const Body& body, Scope& globals) { return Renderer().render(body, globals); }

}  // namespace inferlab::jinja
