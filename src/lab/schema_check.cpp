#include "inferlab/lab/schema_check.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "inferlab/util/error.h"

namespace inferlab::lab {

using json = nlohmann::json;

namespace {

// Keywords that say nothing about validity.
const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id",
                                            "$comment", "$defs", "definitions", "deprecated", "readOnly",
                                            "writeOnly"};
const std::set<std::string> kChecked = {"type", "enum", "const", "properties", "required", "additionalProperties",
                                        "items", "minItems", "maxItems", "minLength", "maxLength", "minimum",
                                        "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf",
                                        "allOf", "$ref"};

// Code points of a UTF-8 string: the bytes that do not continue a sequence.
std::size_t code_points(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool has_type(const json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "number") return value.is_number();
  if (type == "integer")  // 2.0 is an integer in JSON Schema
    return value.is_number_integer() || (value.is_number_float() && std::isfinite(value.get<double>()) &&
                                         std::floor(value.get<double>()) == value.get<double>());
  fail("schema check: unknown type '{}'", type);
}

// A JSON pointer segment (RFC 6901 escapes).
std::string segment(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

struct Checker {
  const json& root;
  std::vector<std::string> out;

  const json& resolve(const std::string& ref) {
    if (ref == "#") return root;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      std::string p = prefix;
      if (ref.rfind(p, 0) == 0) {
        const std::string container = p.substr(2, p.size() - 3), name = ref.substr(p.size());
        if (root.contains(container) && root[container].contains(name)) return root[container][name];
      }
    }
    fail("schema check: cannot resolve $ref '{}'", ref);
  }

  void add(const std::string& where, const std::string& what) { out.push_back((where.empty() ? "/" : where) + ": " + what); }

  // Violations of `schema` by `value` (at pointer `where`), counted without recording, for anyOf/oneOf.
  std::size_t count(const json& schema, const json& value, const std::string& where) {
    Checker inner{root, {}};
    inner.check(schema, value, where);
    return inner.out.size();
  }

  void check(const json& schema, const json& value, const std::string& where) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) add(where, "not allowed by a false schema");
      return;
    }
    if (!schema.is_object()) fail("schema check: a schema must be an object or a boolean, got {}", schema.dump());
    for (const auto& [key, _] : schema.items())
      if (!kChecked.count(key) && !kAnnotations.count(key))
        fail("schema check: keyword '{}' is not checked by this validator", key);

    if (schema.contains("$ref")) check(resolve(schema["$ref"].get<std::string>()), value, where);
    if (schema.contains("type")) {
      const json& t = schema["type"];
      bool any = false;
      for (const json& one : t.is_array() ? t : json::array({t})) any = any || has_type(value, one.get<std::string>());
      if (!any) return add(where, "type " + std::string(value.type_name()) + ", schema wants " + t.dump());
    }
    if (schema.contains("enum")) {
      bool found = false;
      for (const json& v : schema["enum"]) found = found || v == value;
      if (!found) add(where, value.dump() + " is not one of " + schema["enum"].dump());
    }
    if (schema.contains("const") && schema["const"] != value) add(where, value.dump() + " is not " + schema["const"].dump());

    if (value.is_object()) {
      const json empty = json::object();
      const json& properties = schema.contains("properties") ? schema["properties"] : empty;
      if (schema.contains("required"))
        for (const json& name : schema["required"])
          if (!value.contains(name.get<std::string>())) add(where, "required property '" + name.get<std::string>() + "' is missing");
      for (const auto& [key, member] : value.items()) {
        const std::string at = where + "/" + segment(key);
        if (properties.contains(key)) check(properties[key], member, at);
        else if (schema.contains("additionalProperties")) check(schema["additionalProperties"], member, at);
      }
    }
    if (value.is_array()) {
      const std::size_t n = value.size();
      if (schema.contains("minItems") && n < schema["minItems"].get<std::size_t>())
        add(where, std::to_string(n) + " items, minItems " + schema["minItems"].dump());
      if (schema.contains("maxItems") && n > schema["maxItems"].get<std::size_t>())
        add(where, std::to_string(n) + " items, maxItems " + schema["maxItems"].dump());
      if (schema.contains("items"))
        for (std::size_t i = 0; i < n; ++i) check(schema["items"], value[i], where + "/" + std::to_string(i));
    }
    if (value.is_string()) {
      const std::size_t n = code_points(value.get<std::string>());
      if (schema.contains("minLength") && n < schema["minLength"].get<std::size_t>())
        add(where, std::to_string(n) + " characters, minLength " + schema["minLength"].dump());
      if (schema.contains("maxLength") && n > schema["maxLength"].get<std::size_t>())
        add(where, std::to_string(n) + " characters, maxLength " + schema["maxLength"].dump());
    }
    if (value.is_number()) {
      const double v = value.get<double>();
      auto bound = [&](const char* name, bool ok) {
        if (schema.contains(name) && !ok) add(where, value.dump() + ", " + name + " " + schema[name].dump());
      };
      if (schema.contains("minimum")) bound("minimum", v >= schema["minimum"].get<double>());
      if (schema.contains("maximum")) bound("maximum", v <= schema["maximum"].get<double>());
      if (schema.contains("exclusiveMinimum")) bound("exclusiveMinimum", v > schema["exclusiveMinimum"].get<double>());
      if (schema.contains("exclusiveMaximum")) bound("exclusiveMaximum", v < schema["exclusiveMaximum"].get<double>());
    }
    if (schema.contains("allOf"))
      for (const json& s : schema["allOf"]) check(s, value, where);
    if (schema.contains("anyOf")) {
      bool any = false;
      for (const json& s : schema["anyOf"]) any = any || count(s, value, where) == 0;
      if (!any) add(where, "matches none of anyOf");
    }
    if (schema.contains("oneOf")) {
      std::size_t matching = 0;
      for (const json& s : schema["oneOf"]) matching += count(s, value, where) == 0;
      if (matching != 1) add(where, "matches " + std::to_string(matching) + " of oneOf (exactly one wanted)");
    }
  }
};

}  // namespace

std::vector<std::string> schema_violations(const json& schema, const json& value) {
  Checker checker{schema, {}};
  checker.check(schema, value, "");
  return checker.out;
}

}  // namespace inferlab::lab
