// A Jinja interpreter for the subset Hugging Face chat templates use. Output follows
// @huggingface/jinja (what transformers.js renders), including its template preprocessing
// (trim_blocks + lstrip_blocks, the final newline dropped) and value printing (true/false, JSON for
// lists and dicts).
#include "inferlab/tokenizer/chat_template.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <functional>
#include <map>
#include <utf8proc.h>

#include "inferlab/util/error.h"
#include "tokenizer/utf8.h"

namespace inferlab {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Values

struct Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // insertion-ordered, as Python dicts
struct Kwargs;
using Function = std::function<Value(std::vector<Value>&, Kwargs&)>;

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, Array, Object, Function } kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<Array> array;
  std::shared_ptr<Object> object;  // also namespaces (shared, mutable)
  std::shared_ptr<Function> function;
  bool is_namespace = false;

  static Value none() { Value v; v.kind = Kind::None; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::Int; v.i = x; return v; }
  static Value number(double x) { Value v; v.kind = Kind::Float; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::String; v.s = std::move(x); return v; }
  static Value list(Array a = {}) { Value v; v.kind = Kind::Array; v.array = std::make_shared<Array>(std::move(a)); return v; }
  static Value dict(Object o = {}) { Value v; v.kind = Kind::Object; v.object = std::make_shared<Object>(std::move(o)); return v; }
  static Value callable(Function fn) { Value v; v.kind = Kind::Function; v.function = std::make_shared<Function>(std::move(fn)); return v; }

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  double as_double() const { return kind == Kind::Int ? static_cast<double>(i) : kind == Kind::Bool ? b : f; }

  const Value* find(const std::string& key) const {
    if (kind != Kind::Object) return nullptr;
    for (const auto& [k, v] : *object)
      if (k == key) return &v;
    return nullptr;
  }
  void set(const std::string& key, Value value) {
    for (auto& [k, v] : *object)
      if (k == key) { v = std::move(value); return; }
    object->emplace_back(key, std::move(value));
  }
};

struct Kwargs {
  std::vector<std::pair<std::string, Value>> items;
  const Value* get(const std::string& key) const {
    for (const auto& [k, v] : items)
      if (k == key) return &v;
    return nullptr;
  }
};

const char* kind_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "undefined";
    case Value::Kind::None: return "none";
    case Value::Kind::Bool: return "boolean";
    case Value::Kind::Int: return "integer";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "string";
    case Value::Kind::Array: return "list";
    case Value::Kind::Object: return v.is_namespace ? "namespace" : "dict";
    case Value::Kind::Function: return "function";
  }
  return "?";
}

Value from_json(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return Value::none();
    case json::value_t::boolean: return Value::boolean(j.get<bool>());
    case json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();  // above INT64_MAX only as a double, not wrapped negative
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value::integer(static_cast<int64_t>(u)) : Value::number(static_cast<double>(u));
    }
    case json::value_t::number_float: return Value::number(j.get<double>());
    case json::value_t::string: return Value::string(j.get<std::string>());
    case json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(from_json(e));
      return Value::list(std::move(a));
    }
    case json::value_t::object: {
      Object o;
      for (const auto& [k, e] : j.items()) o.emplace_back(k, from_json(e));
      return Value::dict(std::move(o));
    }
    default: return Value();
  }
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.b;
    case Value::Kind::Int: return v.i != 0;
    case Value::Kind::Float: return v.f != 0;
    case Value::Kind::String: return !v.s.empty();
    case Value::Kind::Array: return !v.array->empty();
    case Value::Kind::Object: return v.is_namespace || !v.object->empty();
    case Value::Kind::Function: return true;
  }
  return false;
}

// Whether `v` is, or holds somewhere inside, the container `target`. Lists and namespaces are
// shared and mutable, so `ns.x = ns` or `l.append(l)` would make a reference cycle (a leak, and
// endless output when printed); those are refused.
bool holds(const Value& v, const void* target) {
  std::vector<const Value*> pending{&v};
  while (!pending.empty()) {
    const Value* x = pending.back();
    pending.pop_back();
    if (x->kind == Value::Kind::Array && x->array) {
      if (x->array.get() == target) return true;
      for (const auto& item : *x->array) pending.push_back(&item);
    } else if (x->kind == Value::Kind::Object && x->object) {
      if (x->object.get() == target) return true;
      for (const auto& entry : *x->object) pending.push_back(&entry.second);
    }
  }
  return false;
}

// Template integers are 64-bit (Python's are unbounded): a result that does not fit is an error,
// never undefined behaviour.
bool fits_int64(double x) { return x >= -0x1p63 && x < 0x1p63; }  // false for NaN

// The largest string `'s' * n` may build; chat templates repeat a few spaces for indentation.
constexpr std::size_t kMaxRepeatBytes = 16u << 20;

// JavaScript's Number.prototype.toString for the doubles templates print.
std::string format_double(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return fmt::format("{}", x);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// @huggingface/jinja's toJSON (Python json.dumps with ensure_ascii=False).
std::string to_json(const Value& v, int indent, int depth, bool undefined_as_null) {
  std::string item_sep = indent > 0 ? "," : ", ";
  switch (v.kind) {
    case Value::Kind::Undefined: return undefined_as_null ? "null" : "undefined";
    case Value::Kind::None: return "null";
    case Value::Kind::Bool: return v.b ? "true" : "false";
    case Value::Kind::Int: return std::to_string(v.i);
    case Value::Kind::Float: return format_double(v.f);
    case Value::Kind::String: return json_string(v.s);
    case Value::Kind::Function: fail("chat template: cannot convert a function to JSON");
    case Value::Kind::Array:
    case Value::Kind::Object: {
      std::string pad = indent > 0 ? std::string(indent, ' ') : "";
      std::string base = "\n";
      for (int d = 0; d < depth; ++d) base += pad;
      std::string child = base + pad;
      std::vector<std::string> parts;
      if (v.kind == Value::Kind::Array) {
        for (const auto& e : *v.array) parts.push_back(to_json(e, indent, depth + 1, undefined_as_null));
        std::string out = indent > 0 && !parts.empty() ? "[" + child : "[";
        for (std::size_t k = 0; k < parts.size(); ++k)
          out += (k ? (indent > 0 ? item_sep + child : item_sep) : "") + parts[k];
        return out + (indent > 0 && !parts.empty() ? base + "]" : "]");
      }
      for (const auto& [k, e] : *v.object)
        parts.push_back((indent > 0 ? child : "") + json_string(k) + ": " + to_json(e, indent, depth + 1, undefined_as_null));
      std::string out = "{";
      for (std::size_t k = 0; k < parts.size(); ++k) out += (k ? item_sep : "") + parts[k];
      return out + (indent > 0 && !parts.empty() ? base + "}" : "}");
    }
  }
  return "";
}

std::string to_string(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "null";
    case Value::Kind::Bool: return v.b ? "true" : "false";
    case Value::Kind::Int: return std::to_string(v.i);
    case Value::Kind::Float: {
      if (v.f == std::floor(v.f) && std::isfinite(v.f)) return fmt::format("{:.1f}", v.f);
      return format_double(v.f);
    }
    case Value::Kind::String: return v.s;
    case Value::Kind::Array:
    case Value::Kind::Object: return to_json(v, 0, 0, false);
    case Value::Kind::Function: return "[function]";
  }
  return "";
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::Bool: return a.b == b.b;
    case Value::Kind::String: return a.s == b.s;
    case Value::Kind::Array:
      if (a.array->size() != b.array->size()) return false;
      for (std::size_t k = 0; k < a.array->size(); ++k)
        if (!equal((*a.array)[k], (*b.array)[k])) return false;
      return true;
    case Value::Kind::Object: return a.object == b.object;
    default: return false;
  }
}

// Code points, so that slicing and length count characters as Python does.
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < s.size();) {
    std::size_t n = utf8::sequence_length(s, k);
    if (n == 0) n = 1;
    out.push_back(s.substr(k, n));
    k += n;
  }
  return out;
}

bool is_space_at(const std::string& s, std::size_t k, std::size_t* length) {
  auto c = static_cast<unsigned char>(s[k]);
  if (c < 0x80) {
    *length = 1;
    return c == ' ' || (c >= 9 && c <= 13);
  }
  utf8proc_int32_t cp = 0;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + k), static_cast<utf8proc_ssize_t>(s.size() - k), &cp);
  if (n <= 0) { *length = 1; return false; }
  *length = static_cast<std::size_t>(n);
  return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;  // JavaScript's trim() set
}

std::string trim_left(const std::string& s) {
  std::size_t k = 0, n = 0;
  while (k < s.size() && is_space_at(s, k, &n)) k += n;
  return s.substr(k);
}

std::string trim_right(const std::string& s) {
  std::size_t end = s.size();
  // walk code points forward, remembering where the trailing whitespace began
  std::size_t k = 0, n = 0, last_non_space_end = 0;
  while (k < s.size()) {
    bool space = is_space_at(s, k, &n);
    k += n;
    if (!space) last_non_space_end = k;
  }
  end = last_non_space_end;
  return s.substr(0, end);
}

std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
  std::size_t b = 0, e = s.size();
  if (left) while (b < e && chars.find(s[b]) != std::string::npos) ++b;
  if (right) while (e > b && chars.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}

// ---------------------------------------------------------------------------------------------
// Lexer

enum class Tok {
  Text, Number, String, Name, OpenStmt, CloseStmt, OpenExpr, CloseExpr, LParen, RParen, LBracket,
  RBracket, LBrace, RBrace, Comma, Dot, Colon, Pipe, Op, Assign, Comment, End,
};

struct Token {
  Tok type;
  std::string text;
  int line;
};

// The 1-based line of a position. The lexer asks in increasing order, so newlines are counted
// from the previous answer on: counting from the start each time made lexing quadratic in the
// template's length (a 4 KB template cost tens of milliseconds).
class LineCounter {
 public:
  explicit LineCounter(const std::string& src) : src_(src) {}
  int operator()(std::size_t pos) {
    pos = std::min(pos, src_.size());
    if (pos < counted_to_) counted_to_ = 0, line_ = 1;
    line_ += static_cast<int>(std::count(src_.begin() + counted_to_, src_.begin() + pos, '\n'));
    counted_to_ = pos;
    return line_;
  }

 private:
  const std::string& src_;
  std::size_t counted_to_ = 0;
  int line_ = 1;
};

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<Token> lex(const std::string& source) {
  std::string src = source;
  if (!src.empty() && src.back() == '\n') src.pop_back();
  std::vector<Token> tokens;
  std::size_t pos = 0;
  LineCounter line_at(src);
  auto push_text = [&](std::size_t begin, std::size_t end) {
    if (end > begin) tokens.push_back({Tok::Text, src.substr(begin, end - begin), line_at(begin)});
  };
  auto strip_previous_text = [&] {
    if (!tokens.empty() && tokens.back().type == Tok::Text) {
      tokens.back().text = trim_right(tokens.back().text);
      if (tokens.back().text.empty()) tokens.pop_back();
    }
  };
  // lstrip_blocks: spaces and tabs before a block or comment tag are dropped when they start a
  // line of the original template (the newline itself may already be gone through trim_blocks).
  std::size_t text_begin = 0;
  auto lstrip_previous_text = [&] {
    if (tokens.empty() || tokens.back().type != Tok::Text) return;
    std::string& t = tokens.back().text;
    std::size_t k = t.size();
    while (k > 0 && (t[k - 1] == ' ' || t[k - 1] == '\t')) --k;
    if (k == t.size()) return;
    bool line_start = k > 0 ? (t[k - 1] == '\n' || t[k - 1] == '\r')
                            : (text_begin == 0 || src[text_begin - 1] == '\n' || src[text_begin - 1] == '\r');
    if (!line_start) return;
    t.erase(k);
    if (t.empty()) tokens.pop_back();
  };
  auto skip_ws = [&] {
    while (pos < src.size() && is_ws(src[pos])) ++pos;
  };
  while (pos < src.size()) {
    // Text up to the next tag.
    std::size_t end = pos;
    while (true) {
      end = src.find('{', end);
      if (end == std::string::npos) { end = src.size(); break; }
      if (end + 1 < src.size() && (src[end + 1] == '%' || src[end + 1] == '{' || src[end + 1] == '#')) break;
      ++end;
    }
    push_text(pos, end);
    text_begin = pos;
    pos = end;
    if (pos >= src.size()) break;
    char kind = src[pos + 1];
    bool strip_before = pos + 2 < src.size() && src[pos + 2] == '-';
    int line = line_at(pos);
    if (kind == '#') {
      std::size_t close = src.find("#}", pos + 2);
      if (close == std::string::npos) fail("chat template line {}: comment {{# is never closed with #}}", line);
      if (strip_before) strip_previous_text();
      else lstrip_previous_text();
      bool strip_after = close > pos + 2 && src[close - 1] == '-';
      pos = close + 2;
      if (strip_after) skip_ws();
      else if (pos < src.size() && src[pos] == '\n') ++pos;  // trim_blocks
      tokens.push_back({Tok::Comment, "", line});
      continue;
    }
    if (strip_before) strip_previous_text();
    else if (kind == '%') lstrip_previous_text();
    tokens.push_back({kind == '%' ? Tok::OpenStmt : Tok::OpenExpr, "", line});
    pos += strip_before ? 3 : 2;
    // Tokens inside the tag.
    while (true) {
      skip_ws();
      if (pos >= src.size()) fail("chat template line {}: tag opened here is never closed", line);
      int here = line_at(pos);
      char c = src[pos];
      if (c == '-' && (src.compare(pos, 3, "-%}") == 0 || src.compare(pos, 3, "-}}") == 0)) {
        bool statement = src[pos + 1] == '%';
        tokens.push_back({statement ? Tok::CloseStmt : Tok::CloseExpr, "", here});
        pos += 3;
        skip_ws();
        break;
      }
      if (src.compare(pos, 2, "%}") == 0 || src.compare(pos, 2, "}}") == 0) {
        bool statement = c == '%';
        // "}}" closes an expression only at bracket depth 0; a dict literal's "}" "}" is rare enough
        // in chat templates that, like @huggingface/jinja, it is read as the end of the tag.
        tokens.push_back({statement ? Tok::CloseStmt : Tok::CloseExpr, "", here});
        pos += 2;
        if (statement && pos < src.size() && src[pos] == '\n') ++pos;  // trim_blocks
        break;
      }
      if (c == '\'' || c == '"') {
        std::string value;
        ++pos;
        while (true) {
          if (pos >= src.size()) fail("chat template line {}: string literal is never closed", here);
          char d = src[pos++];
          if (d == c) break;
          if (d != '\\') { value += d; continue; }
          if (pos >= src.size()) fail("chat template line {}: string literal is never closed", here);
          char e = src[pos++];
          switch (e) {
            case 'n': value += '\n'; break;
            case 't': value += '\t'; break;
            case 'r': value += '\r'; break;
            case 'b': value += '\b'; break;
            case 'f': value += '\f'; break;
            case 'v': value += '\v'; break;
            case '\'': case '"': case '\\': value += e; break;
            case 'x': case 'u': {
              std::size_t len = e == 'x' ? 2 : 4;
              std::string hex = src.substr(pos, len);
              if (hex.size() != len || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
                fail("chat template line {}: invalid escape \\{}{}", here, e, hex);
              utf8::append(value, static_cast<char32_t>(std::stoul(hex, nullptr, 16)));
              pos += len;
              break;
            }
            default: fail("chat template line {}: unknown escape \\{} in a string literal", here, e);
          }
        }
        tokens.push_back({Tok::String, value, here});
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        std::size_t start = pos;
        while (pos < src.size() && std::isdigit(static_cast<unsigned char>(src[pos]))) ++pos;
        if (pos + 1 < src.size() && src[pos] == '.' && std::isdigit(static_cast<unsigned char>(src[pos + 1]))) {
          ++pos;
          while (pos < src.size() && std::isdigit(static_cast<unsigned char>(src[pos]))) ++pos;
        }
        tokens.push_back({Tok::Number, src.substr(start, pos - start), here});
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t start = pos;
        while (pos < src.size() && (std::isalnum(static_cast<unsigned char>(src[pos])) || src[pos] == '_')) ++pos;
        tokens.push_back({Tok::Name, src.substr(start, pos - start), here});
        continue;
      }
      static const std::pair<const char*, Tok> symbols[] = {
          {"**", Tok::Op}, {"//", Tok::Op}, {"==", Tok::Op}, {"!=", Tok::Op}, {"<=", Tok::Op}, {">=", Tok::Op},
          {"(", Tok::LParen}, {")", Tok::RParen}, {"[", Tok::LBracket}, {"]", Tok::RBracket}, {"{", Tok::LBrace},
          {"}", Tok::RBrace}, {",", Tok::Comma}, {".", Tok::Dot}, {":", Tok::Colon}, {"|", Tok::Pipe},
          {"<", Tok::Op}, {">", Tok::Op}, {"+", Tok::Op}, {"-", Tok::Op}, {"~", Tok::Op}, {"*", Tok::Op},
          {"/", Tok::Op}, {"%", Tok::Op}, {"=", Tok::Assign}};
      bool matched = false;
      for (const auto& [text, type] : symbols) {
        std::size_t n = std::char_traits<char>::length(text);
        if (src.compare(pos, n, text) == 0) {
          tokens.push_back({type, text, here});
          pos += n;
          matched = true;
          break;
        }
      }
      if (!matched) fail("chat template line {}: unexpected character {:?}", here, std::string(1, c));
    }
  }
  tokens.push_back({Tok::End, "", line_at(src.size())});
  return tokens;
}

// ---------------------------------------------------------------------------------------------
// AST

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
        auto s = std::make_shared<Stmt>(Stmt{Stmt::Kind::Text, t.line});
        s->text = t.text;
        body.push_back(s);
        ++pos_;
        continue;
      }
      if (t.type == Tok::OpenExpr) {
        ++pos_;
        auto s = std::make_shared<Stmt>(Stmt{Stmt::Kind::Output, t.line});
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
    auto stmt = std::make_shared<Stmt>(Stmt{Stmt::Kind::Text, keyword.line});
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
          expect(Tok::OpenStmt, "{%");
          next();
          expect(Tok::CloseStmt, "%}");
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
      if (target->kind == Expr::Kind::Name) names.push_back(target->name);
      while (peek().type == Tok::Comma) {
        ++pos_;
        ExprPtr more = parse_primary_postfix();
        if (more->kind != Expr::Kind::Name) error_here("can only unpack into names");
        names.push_back(more->name);
      }
      if (target->kind == Expr::Kind::Tuple)
        for (auto& item : target->items) {
          if (item->kind != Expr::Kind::Name) error_here("can only unpack into names");
          names.push_back(item->name);
        }
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
        expect(Tok::OpenStmt, "{%");
        next();
        expect(Tok::CloseStmt, "%}");
      }
    } else if (k == "macro") {
      stmt->kind = Stmt::Kind::Macro;
      if (peek().type != Tok::Name) error_here("expected a macro name");
      stmt->text = next().text;
      expect(Tok::LParen, "(");
      while (peek().type != Tok::RParen) {
        if (peek().type != Tok::Name) error_here("expected a parameter name");
        std::string param = next().text;
        ExprPtr fallback;
        if (peek().type == Tok::Assign) {
          ++pos_;
          fallback = parse_expression();
        }
        stmt->params.emplace_back(param, fallback);
        if (peek().type == Tok::Comma) ++pos_;
        else if (peek().type != Tok::RParen) error_here("expected , or )");
      }
      ++pos_;
      expect(Tok::CloseStmt, "%}");
      stmt->body = parse_body({"endmacro"});
      expect(Tok::OpenStmt, "{%");
      next();
      expect(Tok::CloseStmt, "%}");
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

  // Nesting is bounded so hostile input cannot exhaust the stack.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > 256) fail("chat template line {}: nesting deeper than 256 levels", p.peek().line);
    }
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
      if (++p.depth_ > 256) fail("chat template line {}: nesting deeper than 256 levels", p.peek().line);
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

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    ChainGuard chain(*this);
    while (is_name("or")) {
      chain.link();
      auto e = make(Expr::Kind::Or, next().line);
      e->a = left;
      e->b = parse_and();
      left = e;
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    ChainGuard chain(*this);
    while (is_name("and")) {
      chain.link();
      auto e = make(Expr::Kind::And, next().line);
      e->a = left;
      e->b = parse_not();
      left = e;
    }
    return left;
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
    ExprPtr left = parse_multiplicative();
    ChainGuard chain(*this);
    while (is_op("+") || is_op("-") || is_op("~")) {
      chain.link();
      auto e = make(Expr::Kind::Binary, peek().line);
      e->name = next().text;
      e->a = left;
      e->b = parse_multiplicative();
      left = e;
    }
    return left;
  }

  ExprPtr parse_multiplicative() {
    ExprPtr left = parse_test();
    ChainGuard chain(*this);
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.link();
      auto e = make(Expr::Kind::Binary, peek().line);
      e->name = next().text;
      e->a = left;
      e->b = parse_test();
      left = e;
    }
    return left;
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
    ExprPtr left = parse_unary();
    ChainGuard chain(*this);
    while (is_op("**")) {
      chain.link();
      auto e = make(Expr::Kind::Binary, peek().line);
      e->name = next().text;
      e->a = left;
      e->b = parse_unary();
      left = e;
    }
    return left;
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
    while (peek().type != Tok::RParen) {
      if (peek().type == Tok::Name && peek(1).type == Tok::Assign) {
        std::string key = next().text;
        ++pos_;
        e.kwargs.emplace_back(key, parse_expression());
      } else {
        e.items.push_back(parse_expression());
      }
      if (peek().type == Tok::Comma) ++pos_;
      else if (peek().type != Tok::RParen) error_here("expected , or ) in an argument list");
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
        while (peek().type != Tok::RBracket) {
          e->items.push_back(parse_expression());
          if (peek().type == Tok::Comma) ++pos_;
          else if (peek().type != Tok::RBracket) error_here("expected , or ] in a list");
        }
        ++pos_;
        return e;
      }
      case Tok::LBrace: {
        ++pos_;
        auto e = make(Expr::Kind::Dict, t.line);
        while (peek().type != Tok::RBrace) {
          e->items.push_back(parse_expression());
          expect(Tok::Colon, ":");
          e->items.push_back(parse_expression());
          if (peek().type == Tok::Comma) ++pos_;
          else if (peek().type != Tok::RBrace) error_here("expected , or } in a dict");
        }
        ++pos_;
        return e;
      }
      default: error_here("expected an expression");
    }
  }

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Evaluation

struct LoopControl {
  enum { None, Break, Continue } state = None;
};

class Scope {
 public:
  explicit Scope(Scope* parent) : parent_(parent) {}
  const Value* lookup(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent_)
      if (auto it = s->vars_.find(name); it != s->vars_.end()) return &it->second;
    return nullptr;
  }
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }

 private:
  Scope* parent_;
  std::map<std::string, Value> vars_;
};

class Renderer {
  int call_depth_ = 0;

 public:
  std::string render(const Body& body, Scope& scope) {
    std::string out;
    LoopControl control;
    exec(body, scope, out, control);
    return out;
  }

 private:
  [[noreturn]] static void error(int line, const std::string& what) { fail("chat template line {}: {}", line, what); }

  void exec(const Body& body, Scope& scope, std::string& out, LoopControl& control) {
    for (const auto& stmt : body) {
      if (control.state != LoopControl::None) return;
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
              error(stmt->line, "{% set x.y = ... %} needs x to be a namespace()");
            if (holds(v, owner.object.get())) error(stmt->line, "{% set x.y = ... %}: the value holds the namespace x itself");
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
    if (v.kind != Value::Kind::Array) error(line, fmt::format("cannot unpack a {} into {} names", kind_name(v), names.size()));
    if (v.array->size() != names.size())
      error(line, fmt::format("cannot unpack {} items into {} names", v.array->size(), names.size()));
    for (std::size_t k = 0; k < names.size(); ++k) scope.set(names[k], (*v.array)[k]);
  }

  void run_for(const Stmt& stmt, Scope& scope, std::string& out) {
    Value iterable = eval(*stmt.expr, scope);
    Array items;
    if (iterable.kind == Value::Kind::Array) items = *iterable.array;
    else if (iterable.kind == Value::Kind::Object)
      for (const auto& [k, v] : *iterable.object) items.push_back(Value::string(k));
    else if (iterable.is_string())
      for (auto& ch : characters(iterable.s)) items.push_back(Value::string(ch));
    else if (!iterable.is_undefined() && !iterable.is_none())
      error(stmt.line, fmt::format("cannot iterate over a {}", kind_name(iterable)));
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
    scope.set(stmt->text, Value::callable([this, stmt, defining](std::vector<Value>& args, Kwargs& kwargs) {
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
        return global(e.name);
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
          if (!key.is_string()) error(e.line, "dict keys must be strings");
          d.set(key.s, eval(*e.items[k + 1], scope));
        }
        return d;
      }
      case Expr::Kind::Attr: return member(e.line, eval(*e.a, scope), Value::string(e.name), true);
      case Expr::Kind::Index: return member(e.line, eval(*e.a, scope), eval(*e.b, scope), false);
      case Expr::Kind::Slice: return slice(e, scope);
      case Expr::Kind::Call: return call(e, scope);
      case Expr::Kind::Filter: return filter(e, scope);
      case Expr::Kind::Test: {
        bool result = test(e, scope);
        return Value::boolean(e.negated ? !result : result);
      }
      case Expr::Kind::Unary: {
        Value v = eval(*e.a, scope);
        if (!v.is_number()) error(e.line, fmt::format("unary {} needs a number, got a {}", e.name, kind_name(v)));
        if (e.name == "+") return v;
        if (v.kind == Value::Kind::Int && v.i == INT64_MIN) error(e.line, fmt::format("integer overflow in -({})", v.i));
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

  Value global(const std::string& name) {
    if (name == "raise_exception")
      return Value::callable([](std::vector<Value>& args, Kwargs&) -> Value {
        fail("chat template raised an exception: {}", args.empty() ? "" : to_string(args[0]));
      });
    if (name == "namespace")
      return Value::callable([](std::vector<Value>& args, Kwargs& kwargs) {
        Value ns = Value::dict();
        ns.is_namespace = true;
        if (!args.empty() && args[0].kind == Value::Kind::Object)
          for (auto& [k, v] : *args[0].object) ns.set(k, v);
        for (auto& [k, v] : kwargs.items) ns.set(k, v);
        return ns;
      });
    if (name == "range")
      return Value::callable([](std::vector<Value>& args, Kwargs&) {
        int64_t start = 0, stop = 0, step = 1;
        if (args.size() == 1) stop = args[0].i;
        else if (args.size() >= 2) { start = args[0].i; stop = args[1].i; }
        if (args.size() >= 3) step = args[2].i;
        if (step == 0) fail("chat template: range() step must not be zero");
        Array a;
        for (int64_t k = start; step > 0 ? k < stop : k > stop;) {
          a.push_back(Value::integer(k));
          if (a.size() > 10'000'000) fail("chat template: range() too large");
          if (__builtin_add_overflow(k, step, &k)) break;  // the next value is past any int64 stop
        }
        return Value::list(std::move(a));
      });
    if (name == "dict")
      return Value::callable([](std::vector<Value>&, Kwargs& kwargs) {
        Value d = Value::dict();
        for (auto& [k, v] : kwargs.items) d.set(k, v);
        return d;
      });
    if (name == "strftime_now")
      return Value::callable([](std::vector<Value>& args, Kwargs&) {
        std::time_t now = std::time(nullptr);
        std::tm local{};
        localtime_r(&now, &local);
        char buffer[256];
        std::size_t n = std::strftime(buffer, sizeof buffer, args.empty() ? "%Y-%m-%d" : args[0].s.c_str(), &local);
        return Value::string(std::string(buffer, n));
      });
    return Value();
  }

  Value member(int line, const Value& object, const Value& key, bool attribute) {
    if (object.kind == Value::Kind::Object) {
      if (!key.is_string()) error(line, fmt::format("dict keys are strings, got a {}", kind_name(key)));
      if (const Value* v = object.find(key.s)) return *v;
      return object_method(object, key.s);
    }
    if (object.kind == Value::Kind::Array || object.is_string()) {
      if (key.kind == Value::Kind::Int) {
        auto size = static_cast<int64_t>(object.kind == Value::Kind::Array ? object.array->size() : characters(object.s).size());
        int64_t index = key.i < 0 ? key.i + size : key.i;
        if (index < 0 || index >= size) return Value();
        if (object.kind == Value::Kind::Array) return (*object.array)[index];
        return Value::string(characters(object.s)[index]);
      }
      if (key.is_string()) return object.is_string() ? string_method(object, key.s) : list_method(object, key.s);
      error(line, fmt::format("cannot index a {} with a {}", kind_name(object), kind_name(key)));
    }
    (void)attribute;
    return Value();
  }

  Value slice(const Expr& e, Scope& scope) {
    Value object = eval(*e.a, scope);
    auto opt = [&](const ExprPtr& p) -> std::optional<int64_t> {
      if (!p) return std::nullopt;
      Value v = eval(*p, scope);
      if (v.is_none() || v.is_undefined()) return std::nullopt;
      if (v.kind != Value::Kind::Int) error(e.line, "slice indices must be integers");
      return v.i;
    };
    std::optional<int64_t> start = opt(e.b), stop = opt(e.c), step_opt = opt(e.items[0]);
    int64_t step = step_opt.value_or(1);
    if (step == 0) error(e.line, "slice step cannot be zero");
    std::vector<Value> elements;
    std::vector<std::string> chars;
    bool is_str = object.is_string();
    if (is_str) chars = characters(object.s);
    else if (object.kind == Value::Kind::Array) elements = *object.array;
    else error(e.line, fmt::format("cannot slice a {}", kind_name(object)));
    auto n = static_cast<int64_t>(is_str ? chars.size() : elements.size());
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
      else a.push_back(elements[k]);
      if (__builtin_add_overflow(k, step, &k)) break;  // a huge step: past the end
    }
    return is_str ? Value::string(s) : Value::list(std::move(a));
  }

  Value call(const Expr& e, Scope& scope) {
    Value callee = eval(*e.a, scope);
    if (callee.kind != Value::Kind::Function) {
      std::string what = e.a->kind == Expr::Kind::Attr ? "method '" + e.a->name + "'"
                       : e.a->kind == Expr::Kind::Name ? "function '" + e.a->name + "'" : std::string("expression");
      error(e.line, fmt::format("{} is not supported or not callable here", what));
    }
    std::vector<Value> args;
    for (auto& a : e.items) args.push_back(eval(*a, scope));
    Kwargs kwargs;
    for (auto& [k, v] : e.kwargs) kwargs.items.emplace_back(k, eval(*v, scope));
    return (*callee.function)(args, kwargs);
  }

  static Value string_method(const Value& self, const std::string& name) {
    std::string s = self.s;
    auto fn = [](auto f) { return Value::callable(f); };
    if (name == "upper") return fn([s](std::vector<Value>&, Kwargs&) {
      std::string out;
      for (auto& ch : characters(s)) {
        utf8proc_int32_t cp = 0;
        utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(ch.data()), static_cast<utf8proc_ssize_t>(ch.size()), &cp);
        if (cp < 0) { out += ch; continue; }
        utf8::append(out, static_cast<char32_t>(utf8proc_toupper(cp)));
      }
      return Value::string(out);
    });
    if (name == "lower") return fn([s](std::vector<Value>&, Kwargs&) {
      std::string out;
      for (auto& ch : characters(s)) {
        utf8proc_int32_t cp = 0;
        utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(ch.data()), static_cast<utf8proc_ssize_t>(ch.size()), &cp);
        if (cp < 0) { out += ch; continue; }
        utf8::append(out, static_cast<char32_t>(utf8proc_tolower(cp)));
      }
      return Value::string(out);
    });
    if (name == "strip" || name == "lstrip" || name == "rstrip") return fn([s, name](std::vector<Value>& args, Kwargs&) {
      bool left = name != "rstrip", right = name != "lstrip";
      if (!args.empty() && args[0].is_string()) return Value::string(strip_chars(s, args[0].s, left, right));
      std::string out = s;
      if (left) out = trim_left(out);
      if (right) out = trim_right(out);
      return Value::string(out);
    });
    if (name == "startswith" || name == "endswith") return fn([s, name](std::vector<Value>& args, Kwargs&) {
      std::vector<std::string> options;
      if (!args.empty() && args[0].is_string()) options.push_back(args[0].s);
      else if (!args.empty() && args[0].kind == Value::Kind::Array)
        for (auto& v : *args[0].array) options.push_back(v.s);
      for (auto& o : options)
        if (name == "startswith" ? s.starts_with(o) : s.ends_with(o)) return Value::boolean(true);
      return Value::boolean(false);
    });
    if (name == "split") return fn([s](std::vector<Value>& args, Kwargs& kwargs) {
      const Value* sep = !args.empty() ? &args[0] : kwargs.get("sep");
      const Value* max = args.size() > 1 ? &args[1] : kwargs.get("maxsplit");
      int64_t maxsplit = max && max->kind == Value::Kind::Int ? max->i : -1;
      Array parts;
      if (!sep || sep->is_none()) {  // whitespace runs, no empty parts
        std::size_t k = 0, n = 0;
        while (true) {
          while (k < s.size() && is_space_at(s, k, &n)) k += n;
          if (k >= s.size()) break;
          if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
            parts.push_back(Value::string(trim_right(s.substr(k))));
            break;
          }
          std::size_t start = k;
          while (k < s.size() && !is_space_at(s, k, &n)) k += n;
          parts.push_back(Value::string(s.substr(start, k - start)));
        }
        return Value::list(std::move(parts));
      }
      if (!sep->is_string() || sep->s.empty()) fail("chat template: split() separator must be a non-empty string");
      std::size_t start = 0;
      while (true) {
        std::size_t at = s.find(sep->s, start);
        if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) {
          parts.push_back(Value::string(s.substr(start)));
          break;
        }
        parts.push_back(Value::string(s.substr(start, at - start)));
        start = at + sep->s.size();
      }
      return Value::list(std::move(parts));
    });
    if (name == "replace") return fn([s](std::vector<Value>& args, Kwargs&) {
      if (args.size() < 2 || !args[0].is_string() || !args[1].is_string()) fail("chat template: replace(old, new) needs two strings");
      int64_t count = args.size() > 2 && args[2].kind == Value::Kind::Int ? args[2].i : -1;
      return Value::string(replace_all(s, args[0].s, args[1].s, count));
    });
    if (name == "title" || name == "capitalize") return fn([s, name](std::vector<Value>&, Kwargs&) {
      return Value::string(name == "title" ? title_case(s) : capitalize(s));
    });
    if (name == "count") return fn([s](std::vector<Value>& args, Kwargs&) {
      if (args.empty() || !args[0].is_string() || args[0].s.empty()) return Value::integer(0);
      int64_t n = 0;
      for (std::size_t at = s.find(args[0].s); at != std::string::npos; at = s.find(args[0].s, at + args[0].s.size())) ++n;
      return Value::integer(n);
    });
    if (name == "find") return fn([s](std::vector<Value>& args, Kwargs&) {
      if (args.empty() || !args[0].is_string()) return Value::integer(-1);
      std::size_t at = s.find(args[0].s);
      return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(characters(s.substr(0, at)).size()));
    });
    if (name == "join") return fn([s](std::vector<Value>& args, Kwargs&) {
      std::string out;
      if (!args.empty() && args[0].kind == Value::Kind::Array)
        for (std::size_t k = 0; k < args[0].array->size(); ++k) out += (k ? s : "") + to_string((*args[0].array)[k]);
      return Value::string(out);
    });
    if (name == "length") return Value::integer(static_cast<int64_t>(characters(s).size()));
    return Value();
  }

  static Value list_method(const Value& self, const std::string& name) {
    auto array = self.array;
    if (name == "append") return Value::callable([array](std::vector<Value>& args, Kwargs&) {
      if (!args.empty() && holds(args[0], array.get())) fail("chat template: a list cannot be appended into itself");
      if (!args.empty()) array->push_back(args[0]);
      return Value();
    });
    if (name == "length") return Value::integer(static_cast<int64_t>(array->size()));
    return Value();
  }

  static Value object_method(const Value& self, const std::string& name) {
    auto object = self.object;
    if (self.is_namespace) return Value();
    if (name == "items") return Value::callable([object](std::vector<Value>&, Kwargs&) {
      Array a;
      for (auto& [k, v] : *object) a.push_back(Value::list({Value::string(k), v}));
      return Value::list(std::move(a));
    });
    if (name == "keys") return Value::callable([object](std::vector<Value>&, Kwargs&) {
      Array a;
      for (auto& [k, v] : *object) a.push_back(Value::string(k));
      return Value::list(std::move(a));
    });
    if (name == "values") return Value::callable([object](std::vector<Value>&, Kwargs&) {
      Array a;
      for (auto& [k, v] : *object) a.push_back(v);
      return Value::list(std::move(a));
    });
    if (name == "get") return Value::callable([object](std::vector<Value>& args, Kwargs&) {
      if (!args.empty() && args[0].is_string())
        for (auto& [k, v] : *object)
          if (k == args[0].s) return v;
      return args.size() > 1 ? args[1] : Value::none();
    });
    return Value();
  }

  static std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    if (from.empty()) return s;
    std::string out;
    std::size_t start = 0;
    for (int64_t done = 0; count < 0 || done < count; ++done) {
      std::size_t at = s.find(from, start);
      if (at == std::string::npos) break;
      out += s.substr(start, at - start) + to;
      start = at + from.size();
    }
    return out + s.substr(start);
  }

  static std::string capitalize(const std::string& s) {
    std::string out;
    bool first = true;
    for (auto& ch : characters(s)) {
      utf8proc_int32_t cp = 0;
      utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(ch.data()), static_cast<utf8proc_ssize_t>(ch.size()), &cp);
      if (cp < 0) { out += ch; first = false; continue; }
      utf8::append(out, static_cast<char32_t>(first ? utf8proc_toupper(cp) : utf8proc_tolower(cp)));
      first = false;
    }
    return out;
  }

  static std::string title_case(const std::string& s) {
    std::string out;
    bool start = true;
    for (auto& ch : characters(s)) {
      utf8proc_int32_t cp = 0;
      utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(ch.data()), static_cast<utf8proc_ssize_t>(ch.size()), &cp);
      if (cp < 0) { out += ch; continue; }
      bool letter = utf8proc_category(cp) <= UTF8PROC_CATEGORY_LO && utf8proc_category(cp) >= UTF8PROC_CATEGORY_LU;
      utf8::append(out, static_cast<char32_t>(start ? utf8proc_toupper(cp) : utf8proc_tolower(cp)));
      start = !letter;
    }
    return out;
  }

  Value binary(const Expr& e, Scope& scope) {
    Value l = eval(*e.a, scope);
    Value r = eval(*e.b, scope);
    const std::string& op = e.name;
    if (op == "==") return Value::boolean(equal(l, r));
    if (op == "!=") return Value::boolean(!equal(l, r));
    if (op == "in" || op == "not in") {
      bool found = false;
      if (r.is_string() && l.is_string()) found = r.s.find(l.s) != std::string::npos;
      else if (r.kind == Value::Kind::Array) found = std::any_of(r.array->begin(), r.array->end(), [&](const Value& v) { return equal(v, l); });
      else if (r.kind == Value::Kind::Object && l.is_string()) found = r.find(l.s) != nullptr;
      else if (!r.is_undefined() && !r.is_none()) error(e.line, fmt::format("'in' needs a string, list or dict on the right, got a {}", kind_name(r)));
      return Value::boolean(op == "in" ? found : !found);
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
      else error(e.line, fmt::format("cannot compare a {} with a {} using {}", kind_name(l), kind_name(r), op));
      bool result = op == "<" ? cmp < 0 : op == ">" ? cmp > 0 : op == "<=" ? cmp <= 0 : cmp >= 0;
      return Value::boolean(result);
    }
    if (op == "*" && l.is_string() && r.kind == Value::Kind::Int) {
      if (l.s.empty() || r.i <= 0) return Value::string("");
      if (static_cast<uint64_t>(r.i) > kMaxRepeatBytes / l.s.size())
        error(e.line, fmt::format("a string of {} bytes * {} is larger than {} MiB", l.s.size(), r.i, kMaxRepeatBytes >> 20));
      std::string out;
      out.reserve(l.s.size() * static_cast<std::size_t>(r.i));
      for (int64_t k = 0; k < r.i; ++k) out += l.s;
      return Value::string(out);
    }
    if (!l.is_number() || !r.is_number())
      error(e.line, fmt::format("operator {} needs numbers, got a {} and a {}", op, kind_name(l), kind_name(r)));
    const bool ints = l.kind == Value::Kind::Int && r.kind == Value::Kind::Int;
    if (ints && op != "/" && !(op == "**" && r.i < 0)) return integer_binary(e.line, op, l.i, r.i);
    double x = l.as_double(), y = r.as_double();
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
    if (op == "**") return Value::number(std::pow(x, y));
    if (y == 0) error(e.line, "division by zero");
    if (op == "/") return Value::number(x / y);
    if (op == "//") return Value::number(std::floor(x / y));
    if (op == "%") return Value::number(x - y * std::floor(x / y));
    error(e.line, "unknown operator " + op);
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
      if (b == 0) error(line, "division by zero");
      if (b == -1) {
        overflow = op == "//" && a == INT64_MIN;
        out = op == "//" && !overflow ? -a : 0;
      } else {
        int64_t quotient = a / b, remainder = a % b;
        if (remainder != 0 && (remainder < 0) != (b < 0)) --quotient, remainder += b;
        out = op == "//" ? quotient : remainder;
      }
    } else {
      error(line, "unknown operator " + op);
    }
    if (overflow) error(line, fmt::format("integer overflow in {} {} {}", a, op, b));
    return Value::integer(out);
  }

  bool test(const Expr& e, Scope& scope) {
    Value v = eval(*e.a, scope);
    std::vector<Value> args;
    for (auto& a : e.items) args.push_back(eval(*a, scope));
    const std::string& t = e.name;
    if (t == "defined") return !v.is_undefined();
    if (t == "undefined") return v.is_undefined();
    if (t == "none") return v.is_none();
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.kind == Value::Kind::Int;
    if (t == "float") return v.kind == Value::Kind::Float;
    if (t == "boolean") return v.kind == Value::Kind::Bool;
    if (t == "true") return v.kind == Value::Kind::Bool && v.b;
    if (t == "false") return v.kind == Value::Kind::Bool && !v.b;
    if (t == "mapping") return v.kind == Value::Kind::Object;
    if (t == "sequence" || t == "iterable") return v.kind == Value::Kind::Array || v.is_string() || (t == "iterable" && v.kind == Value::Kind::Object);
    if (t == "callable") return v.kind == Value::Kind::Function;
    if (t == "odd" || t == "even") {
      if (v.kind != Value::Kind::Int) error(e.line, "odd/even tests need an integer");
      return (v.i % 2 != 0) == (t == "odd");
    }
    if (t == "divisibleby") return v.kind == Value::Kind::Int && !args.empty() && args[0].i != 0 && v.i % args[0].i == 0;
    if (t == "equalto" || t == "eq" || t == "sameas") return !args.empty() && equal(v, args[0]);
    if (t == "ne") return args.empty() || !equal(v, args[0]);
    if (t == "in") {
      if (args.empty()) return false;
      const Value& c = args[0];
      if (c.kind == Value::Kind::Array) return std::any_of(c.array->begin(), c.array->end(), [&](const Value& x) { return equal(x, v); });
      if (c.is_string() && v.is_string()) return c.s.find(v.s) != std::string::npos;
      if (c.kind == Value::Kind::Object && v.is_string()) return c.find(v.s) != nullptr;
      return false;
    }
    if (t == "lower" || t == "upper") {
      if (!v.is_string()) return false;
      Kwargs none;
      std::vector<Value> no_args;
      Value converted = (*string_method(v, t).function)(no_args, none);
      return converted.s == v.s;
    }
    error(e.line, fmt::format("the Jinja test '{}' is not supported", t));
  }

  Value filter(const Expr& e, Scope& scope) {
    Value v = eval(*e.a, scope);
    std::vector<Value> args;
    for (auto& a : e.items) args.push_back(eval(*a, scope));
    Kwargs kwargs;
    for (auto& [k, x] : e.kwargs) kwargs.items.emplace_back(k, eval(*x, scope));
    return apply_filter(e.line, e.name, v, args, kwargs, scope);
  }

  Value attribute_of(int line, const Value& item, const std::string& path) {
    Value current = item;
    std::size_t start = 0;
    while (true) {
      std::size_t dot = path.find('.', start);
      std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      current = member(line, current, Value::string(part), true);
      if (dot == std::string::npos) return current;
      start = dot + 1;
    }
  }

  bool run_named_test(int line, const std::string& name, const Value& v, const std::vector<Value>& extra, Scope& scope) {
    Expr probe;
    probe.kind = Expr::Kind::Test;
    probe.line = line;
    probe.name = name;
    auto literal = std::make_shared<Expr>();
    literal->kind = Expr::Kind::Literal;
    literal->literal = v;
    probe.a = literal;
    for (auto& x : extra) {
      auto arg = std::make_shared<Expr>();
      arg->kind = Expr::Kind::Literal;
      arg->literal = x;
      probe.items.push_back(arg);
    }
    return test(probe, scope);
  }

  Value apply_filter(int line, const std::string& name, const Value& v, std::vector<Value>& args, Kwargs& kwargs, Scope& scope) {
    auto need_array = [&] {
      if (v.kind != Value::Kind::Array) error(line, fmt::format("filter '{}' needs a list, got a {}", name, kind_name(v)));
    };
    if (name == "length" || name == "count") {
      if (v.is_string()) return Value::integer(static_cast<int64_t>(characters(v.s).size()));
      if (v.kind == Value::Kind::Array) return Value::integer(static_cast<int64_t>(v.array->size()));
      if (v.kind == Value::Kind::Object) return Value::integer(static_cast<int64_t>(v.object->size()));
      error(line, fmt::format("filter 'length' needs a string, list or dict, got a {}", kind_name(v)));
    }
    if (name == "trim") {
      if (!v.is_string()) error(line, "filter 'trim' needs a string");
      return Value::string(trim_right(trim_left(v.s)));
    }
    if (name == "tojson") {
      const Value* indent = args.empty() ? kwargs.get("indent") : &args[0];
      int width = indent && indent->kind == Value::Kind::Int ? static_cast<int>(indent->i) : 0;
      return Value::string(to_json(v, width, 0, true));
    }
    if (name == "string") return Value::string(to_string(v));
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      if (!v.is_string()) error(line, fmt::format("filter '{}' needs a string", name));
      std::vector<Value> none;
      Kwargs no;
      return (*string_method(v, name).function)(none, no);
    }
    if (name == "default" || name == "d") {
      bool boolean = (args.size() > 1 && truthy(args[1])) || (kwargs.get("boolean") && truthy(*kwargs.get("boolean")));
      Value fallback = args.empty() ? Value::string("") : args[0];
      if (v.is_undefined() || (boolean && !truthy(v))) return fallback;
      return v;
    }
    if (name == "first" || name == "last") {
      if (v.is_string()) {
        auto chars = characters(v.s);
        if (chars.empty()) return Value();
        return Value::string(name == "first" ? chars.front() : chars.back());
      }
      need_array();
      if (v.array->empty()) return Value();
      return name == "first" ? v.array->front() : v.array->back();
    }
    if (name == "join") {
      need_array();
      std::string sep = args.empty() ? "" : to_string(args[0]);
      std::string out;
      for (std::size_t k = 0; k < v.array->size(); ++k) out += (k ? sep : "") + to_string((*v.array)[k]);
      return Value::string(out);
    }
    if (name == "list") {
      if (v.kind == Value::Kind::Array) return Value::list(*v.array);
      Array a;
      if (v.is_string()) for (auto& ch : characters(v.s)) a.push_back(Value::string(ch));
      else if (v.kind == Value::Kind::Object) for (auto& [k, x] : *v.object) a.push_back(Value::string(k));
      return Value::list(std::move(a));
    }
    if (name == "reverse") {
      if (v.is_string()) {
        auto chars = characters(v.s);
        std::string out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
        return Value::string(out);
      }
      need_array();
      Array a(v.array->rbegin(), v.array->rend());
      return Value::list(std::move(a));
    }
    if (name == "items") {
      if (v.kind != Value::Kind::Object) error(line, "filter 'items' needs a dict");
      std::vector<Value> none;
      Kwargs no;
      return (*object_method(v, "items").function)(none, no);
    }
    if (name == "dictsort") {
      if (v.kind != Value::Kind::Object) error(line, "filter 'dictsort' needs a dict");
      Object sorted = *v.object;
      std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.first < b.first; });
      Array a;
      for (auto& [k, x] : sorted) a.push_back(Value::list({Value::string(k), x}));
      return Value::list(std::move(a));
    }
    if (name == "unique") {
      need_array();
      Array a;
      for (auto& x : *v.array)
        if (std::none_of(a.begin(), a.end(), [&](const Value& y) { return equal(x, y); })) a.push_back(x);
      return Value::list(std::move(a));
    }
    if (name == "map") {
      need_array();
      Array a;
      const Value* attribute = kwargs.get("attribute");
      for (auto& x : *v.array) {
        if (attribute) {
          Value got = attribute_of(line, x, to_string(*attribute));
          if (got.is_undefined() && kwargs.get("default")) got = *kwargs.get("default");
          a.push_back(got);
        } else if (!args.empty() && args[0].is_string()) {
          std::vector<Value> rest(args.begin() + 1, args.end());
          Kwargs no;
          a.push_back(apply_filter(line, args[0].s, x, rest, no, scope));
        } else {
          error(line, "filter 'map' needs attribute=... or a filter name");
        }
      }
      return Value::list(std::move(a));
    }
    if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
      need_array();
      bool by_attribute = name == "selectattr" || name == "rejectattr";
      bool keep_when = name == "selectattr" || name == "select";
      std::size_t next_arg = 0;
      std::string attribute;
      if (by_attribute) {
        if (args.empty()) error(line, fmt::format("filter '{}' needs an attribute name", name));
        attribute = to_string(args[next_arg++]);
      }
      std::string test_name = next_arg < args.size() ? to_string(args[next_arg++]) : "";
      std::vector<Value> extra(args.begin() + static_cast<long>(std::min(next_arg, args.size())), args.end());
      Array a;
      for (auto& x : *v.array) {
        Value subject = by_attribute ? attribute_of(line, x, attribute) : x;
        bool passed = test_name.empty() ? truthy(subject) : run_named_test(line, test_name, subject, extra, scope);
        if (passed == keep_when) a.push_back(x);
      }
      return Value::list(std::move(a));
    }
    if (name == "int") {
      if (v.kind == Value::Kind::Int) return v;
      if (v.kind == Value::Kind::Float) {
        if (!fits_int64(v.f)) error(line, fmt::format("filter 'int': {} does not fit a 64-bit integer", format_double(v.f)));
        return Value::integer(static_cast<int64_t>(v.f));
      }
      if (v.is_string()) {
        try { return Value::integer(std::stoll(v.s)); } catch (...) { return args.empty() ? Value::integer(0) : args[0]; }
      }
      if (v.kind == Value::Kind::Bool) return Value::integer(v.b);
      return Value::integer(0);
    }
    if (name == "float") {
      if (v.is_number()) return Value::number(v.as_double());
      if (v.is_string()) {
        try { return Value::number(std::stod(v.s)); } catch (...) { return Value::number(0); }
      }
      return Value::number(0);
    }
    if (name == "abs") {
      if (v.kind == Value::Kind::Int && v.i == INT64_MIN) error(line, fmt::format("integer overflow in abs({})", v.i));
      if (v.kind == Value::Kind::Int) return Value::integer(v.i < 0 ? -v.i : v.i);
      if (v.kind == Value::Kind::Float) return Value::number(std::fabs(v.f));
      error(line, "filter 'abs' needs a number");
    }
    if (name == "round") {
      if (!v.is_number()) error(line, "filter 'round' needs a number");
      int precision = args.empty() ? 0 : static_cast<int>(args[0].i);
      double scale = std::pow(10.0, precision);
      return Value::number(std::round(v.as_double() * scale) / scale);
    }
    if (name == "replace") {
      if (!v.is_string() || args.size() < 2) error(line, "filter 'replace' needs a string and (old, new)");
      int64_t count = args.size() > 2 && args[2].kind == Value::Kind::Int ? args[2].i : -1;
      return Value::string(replace_all(v.s, to_string(args[0]), to_string(args[1]), count));
    }
    if (name == "safe" || name == "e" || name == "escape" || name == "forceescape") {
      if (name == "safe") return v;
      std::string out;
      for (char c : to_string(v)) {
        switch (c) {
          case '&': out += "&amp;"; break;
          case '<': out += "&lt;"; break;
          case '>': out += "&gt;"; break;
          case '"': out += "&#34;"; break;
          case '\'': out += "&#39;"; break;
          default: out += c;
        }
      }
      return Value::string(out);
    }
    if (name == "indent") {
      if (!v.is_string()) error(line, "filter 'indent' needs a string");
      const Value* width_arg = !args.empty() ? &args[0] : kwargs.get("width");
      std::string pad = width_arg ? (width_arg->is_string() ? width_arg->s : std::string(std::max<int64_t>(0, width_arg->i), ' ')) : "    ";
      const Value* first_arg = args.size() > 1 ? &args[1] : kwargs.get("first");
      const Value* blank_arg = args.size() > 2 ? &args[2] : kwargs.get("blank");
      bool first = first_arg && truthy(*first_arg), blank = blank_arg && truthy(*blank_arg);
      std::string out;
      std::size_t start = 0;
      for (int k = 0;; ++k) {
        std::size_t nl = v.s.find('\n', start);
        std::string part = v.s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        if (k > 0) out += '\n';
        out += ((!first && k == 0) || (!blank && part.empty())) ? part : pad + part;
        if (nl == std::string::npos) break;
        start = nl + 1;
      }
      return Value::string(out);
    }
    if (name == "min" || name == "max" || name == "sum") {
      need_array();
      if (v.array->empty()) return name == "sum" ? Value::integer(0) : Value();
      if (name == "sum") {
        Value total = Value::integer(0);
        for (auto& x : *v.array) {
          if (!x.is_number()) error(line, "filter 'sum' needs numbers");
          total = total.kind == Value::Kind::Int && x.kind == Value::Kind::Int ? Value::integer(total.i + x.i) : Value::number(total.as_double() + x.as_double());
        }
        return total;
      }
      Value best = v.array->front();
      for (auto& x : *v.array) {
        bool less = x.is_number() && best.is_number() ? x.as_double() < best.as_double() : to_string(x) < to_string(best);
        if (name == "min" ? less : (!less && !equal(x, best))) best = x;
      }
      return best;
    }
    if (name == "sort") {
      need_array();
      Array a = *v.array;
      const Value* attribute = kwargs.get("attribute");
      bool reverse = kwargs.get("reverse") && truthy(*kwargs.get("reverse"));
      auto key = [&](const Value& x) { return attribute ? attribute_of(line, x, to_string(*attribute)) : x; };
      std::stable_sort(a.begin(), a.end(), [&](const Value& x, const Value& y) {
        Value kx = key(x), ky = key(y);
        bool less = kx.is_number() && ky.is_number() ? kx.as_double() < ky.as_double() : to_string(kx) < to_string(ky);
        return reverse ? (!less && !equal(kx, ky)) : less;
      });
      return Value::list(std::move(a));
    }
    if (name == "wordcount") {
      std::vector<Value> none;
      Kwargs no;
      return Value::integer(static_cast<int64_t>((*string_method(Value::string(to_string(v)), "split").function)(none, no).array->size()));
    }
    error(line, fmt::format("the Jinja filter '{}' is not supported", name));
  }
};

}  // namespace

struct ChatTemplate::Impl {
  Body body;
};

ChatTemplate::ChatTemplate(const std::string& source) : impl_(std::make_unique<Impl>()) {
  impl_->body = Parser(lex(source)).parse_template();
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt, const nlohmann::json& extra) const {
  if (!messages.is_array()) fail("chat template: messages must be a JSON array, got {}", messages.type_name());
  if (!extra.is_object() && !extra.is_null()) fail("chat template: extra variables must be a JSON object");
  Scope globals(nullptr);
  globals.set("messages", from_json(messages));
  globals.set("add_generation_prompt", Value::boolean(add_generation_prompt));
  if (extra.is_object())
    for (const auto& [key, value] : extra.items()) globals.set(key, from_json(value));
  Renderer renderer;
  return renderer.render(impl_->body, globals);
}

}  // namespace inferlab
