// Jinja values: what templates compute with, made from the JSON the caller passes in, and printed
// as @huggingface/jinja prints them (true/false, JSON for lists and dicts).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

namespace inferlab::jinja {

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

// The largest string `'s' * n` may build, and the widest indent of the indent and tojson filters;
// chat templates repeat a few spaces for indentation.
constexpr std::size_t kMaxRepeatBytes = 16u << 20;

// Errors raised while rendering: "chat template line N: what".
[[noreturn]] void error_at(int line, const std::string& what);

const char* kind_name(const Value& v);  // "integer", "list", "namespace"... for error messages
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);  // keys in the order given, as Python's json.loads keeps them
bool truthy(const Value& v);
bool equal(const Value& a, const Value& b);

// Whether `v` is, or holds somewhere inside, the container `target`. Lists and namespaces are
// shared and mutable, so `ns.x = ns` or `l.append(l)` would make a reference cycle (a leak, and
// endless output when printed); those are refused.
bool holds(const Value& v, const void* target);

// JavaScript's Number.prototype.toString for the doubles templates print.
std::string format_double(double x);
// @huggingface/jinja's toJSON (Python json.dumps with ensure_ascii=False).
std::string to_json(const Value& v, int indent, int depth, bool undefined_as_null);
// How {{ v }} and the string filter print a value.
std::string to_string(const Value& v);

}  // namespace inferlab::jinja
