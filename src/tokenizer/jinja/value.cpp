#include "tokenizer/jinja/value.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"

namespace inferlab::jinja {

using nlohmann::json;

void error_at(int line, const std::string& what) { fail("chat template line {}: {}", line, what); }

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

template <typename Json>
Value value_of(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return Value::none();
    case Json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case Json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();  // above INT64_MAX only as a double, not wrapped negative
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value::integer(static_cast<int64_t>(u)) : Value::number(static_cast<double>(u));
    }
    case Json::value_t::number_float: return Value::number(j.template get<double>());
    case Json::value_t::string: return Value::string(j.template get<std::string>());
    case Json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(value_of(e));
      return Value::list(std::move(a));
    }
    case Json::value_t::object: {
      Object o;
      for (const auto& [k, e] : j.items()) o.emplace_back(k, value_of(e));
      return Value::dict(std::move(o));
    }
    default: return Value();
  }
}

Value from_json(const json& j) { return value_of(j); }
Value from_json(const nlohmann::ordered_json& j) { return value_of(j); }

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

std::string format_double(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return fmt::format("{}", x);
}

namespace {

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

}  // namespace

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

}  // namespace inferlab::jinja
