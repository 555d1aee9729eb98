// JSON Schema -> GBNF (json_schema.h): one rule per object, array, string shape and $ref, over
// shared primitive rules.
#include "inferlab/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <tuple>
#include <map>
#include <numeric>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>

#include "inferlab/grammar/regex.h"
#include "grammar/number_multiples.h"
#include "grammar/number_ranges.h"
#include "grammar/pattern_automaton.h"
#include "grammar/schema_references.h"

namespace inferlab {
namespace {

// Ordered: properties are written in the order the schema lists them.
using json = nlohmann::ordered_json;

// Whitespace between tokens: none, a space, or a newline and indentation (pretty printing).
constexpr const char* kPrimitives = R"(ws ::= "" | " " | "\n" [ \t]{0,20}
json-char ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-string ::= "\"" json-char* "\""
json-integer ::= "-"? json-natural
json-natural ::= "0" | [1-9] [0-9]{0,14}
json-number ::= json-integer json-fraction? ( [eE] [-+]? [0-9]{1,3} )?
json-fraction ::= "." [0-9]{1,15}
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws ( json-string ws ":" ws json-value ws ( "," ws json-string ws ":" ws json-value ws )* )? "}"
json-array ::= "[" ws ( json-value ws ( "," ws json-value ws )* )? "]"
date ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] )
time ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
date-time ::= date "T" time
uuid ::= [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}
email ::= [a-z0-9]{1,16} ( "." [a-z0-9]{1,16} )? "@" [a-z0-9]{1,16} ( "." [a-z]{2,8} ){1,2}
ipv4 ::= ipv4-octet "." ipv4-octet "." ipv4-octet "." ipv4-octet
ipv4-octet ::= "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]
ipv6 ::= ( ipv6-h16 ":" ){6} ipv6-ls32 | "::" ( ipv6-h16 ":" ){5} ipv6-ls32 | ipv6-h16? "::" ( ipv6-h16 ":" ){4} ipv6-ls32 | ( ( ipv6-h16 ":" ){0,1} ipv6-h16 )? "::" ( ipv6-h16 ":" ){3} ipv6-ls32 | ( ( ipv6-h16 ":" ){0,2} ipv6-h16 )? "::" ( ipv6-h16 ":" ){2} ipv6-ls32 | ( ( ipv6-h16 ":" ){0,3} ipv6-h16 )? "::" ipv6-h16 ":" ipv6-ls32 | ( ( ipv6-h16 ":" ){0,4} ipv6-h16 )? "::" ipv6-ls32 | ( ( ipv6-h16 ":" ){0,5} ipv6-h16 )? "::" ipv6-h16 | ( ( ipv6-h16 ":" ){0,6} ipv6-h16 )? "::"
ipv6-h16 ::= [0-9a-fA-F]{1,4}
ipv6-ls32 ::= ipv6-h16 ":" ipv6-h16 | ipv4
duration ::= "P" ( duration-date duration-time? | duration-time | [0-9]{1,9} "W" )
duration-date ::= [0-9]{1,9} "D" | [0-9]{1,9} "M" ( [0-9]{1,9} "D" )? | [0-9]{1,9} "Y" ( [0-9]{1,9} "M" ( [0-9]{1,9} "D" )? )?
duration-time ::= "T" ( [0-9]{1,9} "H" ( [0-9]{1,9} "M" ( [0-9]{1,9} "S" )? )? | [0-9]{1,9} "M" ( [0-9]{1,9} "S" )? | [0-9]{1,9} "S" )
json-pointer ::= ( "/" json-pointer-char* )*
json-pointer-char ::= [^"\\/~\x00-\x1f] | "\\" ["\\bfnrt] | "\\u00" [01] [0-9a-f] | "~" [01]
)";

const std::set<std::string> kAnnotations = {"title", "description", "$schema", "$id", "default", "examples", "$comment",
                                            "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "$anchor",
                                            // draft 2020-12 makes these annotations: a string's content is not asserted
                                            "contentMediaType", "contentEncoding", "contentSchema"};
// The keywords that constrain one type of value; a value of another type ignores them.
const std::map<std::string, std::set<std::string>> kKeywordsOfType = {
    {"object", {"properties", "required", "additionalProperties", "propertyNames", "minProperties", "maxProperties",
                "patternProperties", "dependentRequired", "dependentSchemas"}},
    {"array", {"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains"}},
    {"string", {"pattern", "format", "minLength", "maxLength"}},
    {"number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}},
};
const char* const kAllTypes[] = {"object", "array", "string", "number", "boolean", "null"};

// The schema with only the keywords that apply to values of `type` (an integer is a number).
json keywords_for(const json& schema, const std::string& type) {
  const std::string family = type == "integer" ? "number" : type;
  json out = json::object();
  for (const auto& [key, value] : schema.items()) {
    bool other_type = false;
    for (const auto& [owner, keys] : kKeywordsOfType)
      if (owner != family && keys.count(key)) other_type = true;
    if (!other_type) out[key] = value;
  }
  out["type"] = type;
  return out;
}

// The JSON types a schema's values may have ("integer" counted as "number"); all six when it
// does not say.
std::set<std::string> value_types(const json& schema) {
  std::set<std::string> types;
  auto add_value = [&](const json& v) {
    types.insert(v.is_object() ? "object" : v.is_array() ? "array" : v.is_string() ? "string" : v.is_number() ? "number"
                 : v.is_boolean() ? "boolean" : "null");
  };
  if (schema.is_boolean() || !schema.is_object()) return {std::begin(kAllTypes), std::end(kAllTypes)};
  if (schema.contains("const")) {
    add_value(schema["const"]);
    return types;
  }
  if (schema.contains("enum") && schema["enum"].is_array()) {
    for (const json& v : schema["enum"]) add_value(v);
    return types;
  }
  if (schema.contains("type")) {
    const json& t = schema["type"];
    for (const json& one : t.is_array() ? t : json::array({t}))
      if (one.is_string()) types.insert(one == "integer" ? "number" : one.get<std::string>());
    return types;
  }
  return {std::begin(kAllTypes), std::end(kAllTypes)};
}

// The values a const / enum schema allows, or none when it does not fix them.
std::optional<std::vector<json>> fixed_values(const json& schema) {
  if (!schema.is_object()) return std::nullopt;
  if (schema.contains("const")) return std::vector<json>{schema["const"]};
  if (schema.contains("enum") && schema["enum"].is_array()) return schema["enum"].get<std::vector<json>>();
  return std::nullopt;
}

bool share_a_value(const std::vector<json>& a, const std::vector<json>& b) {
  for (const json& x : a)
    for (const json& y : b)
      if (nlohmann::json(x) == nlohmann::json(y)) return true;  // objects equal whatever their key order
  return false;
}

// Whether no value can match both schemas, as far as can be told without solving them: their
// types differ, their fixed values differ, or both are objects that require one property with
// different fixed values (a tagged union, as pydantic's discriminators write it).
bool disjoint(const json& a, const json& b) {
  const std::set<std::string> ta = value_types(a), tb = value_types(b);
  bool common_type = false;
  for (const std::string& t : ta) common_type = common_type || tb.count(t);
  if (!common_type) return true;
  const auto va = fixed_values(a), vb = fixed_values(b);
  if (va && vb) return !share_a_value(*va, *vb);
  if (ta != std::set<std::string>{"object"} || tb != std::set<std::string>{"object"}) return false;
  auto required = [](const json& s) {
    std::set<std::string> names;
    if (s.contains("required") && s["required"].is_array())
      for (const json& n : s["required"])
        if (n.is_string()) names.insert(n.get<std::string>());
    return names;
  };
  const std::set<std::string> ra = required(a), rb = required(b);
  const json pa = a.value("properties", json::object()), pb = b.value("properties", json::object());
  for (const std::string& name : ra) {
    if (!rb.count(name) || !pa.contains(name) || !pb.contains(name)) continue;
    const auto fa = fixed_values(pa[name]), fb = fixed_values(pb[name]);
    if (fa && fb && !share_a_value(*fa, *fb)) return true;
  }
  return false;
}

// Whether every object the grammar writes for `a` breaks `b`: `a` is an object schema that writes
// only the names it lists (strict mode: nothing else that adds names), and `b` requires a name
// among none of them. Objects with different required names, as oneOf options often are.
bool writes_none_required_by(const json& a, const json& b) {
  if (!a.is_object() || value_types(a) != std::set<std::string>{"object"}) return false;
  static const std::set<std::string> kPlain = {"type", "properties", "required", "dependentRequired", "minProperties", "maxProperties"};
  for (const auto& [key, unused] : a.items())
    if (!kAnnotations.count(key) && !kPlain.count(key)) return false;
  std::set<std::string> writable;
  bool listed = false;
  if (a.contains("properties") && a["properties"].is_object())
    for (const auto& [name, unused] : a["properties"].items()) writable.insert(name), listed = true;
  if (a.contains("required") && a["required"].is_array())
    for (const json& n : a["required"])
      if (n.is_string()) writable.insert(n.get<std::string>()), listed = true;
  if (!listed) return false;  // a map: any name
  if (a.contains("dependentRequired") && a["dependentRequired"].is_object())
    for (const auto& [trigger, names] : a["dependentRequired"].items()) {
      writable.insert(trigger);
      if (names.is_array())
        for (const json& n : names)
          if (n.is_string()) writable.insert(n.get<std::string>());
    }
  if (!b.is_object() || !b.contains("required") || !b["required"].is_array()) return false;
  for (const json& n : b["required"])
    if (n.is_string() && !writable.count(n.get<std::string>())) return true;
  return false;
}

const std::set<std::string> kEnforced = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "type",
                                         "properties", "required", "additionalProperties", "propertyNames", "patternProperties",
                                         "dependentRequired", "dependentSchemas", "items", "prefixItems", "uniqueItems", "minItems",
                                         "contains", "minContains", "maxContains",
                                         "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "pattern",
                                         "format", "minLength", "maxLength", "minProperties", "maxProperties"};

class SchemaConverter {
 public:
  SchemaConverter(const json& root, const GrammarLimits& limits) : root_(resolve_references(root)), limits_(limits) {}

  std::string convert(const std::string& name, bool primitives) {
    prefix_ = name;
    std::string top = visit(root_, name + "-value", 0);
    std::string out = name + " ::= " + top + "\n" + (primitives ? kPrimitives : "");
    for (const auto& [rule_name, body] : rules_) out += rule_name + " ::= " + body + "\n";
    if (out.size() > limits_.max_grammar_bytes)
      throw GrammarError(fmt::format("the schema's grammar is {} bytes; at most {} are accepted (--max-grammar-bytes)",
                                     out.size(), limits_.max_grammar_bytes));
    return out;
  }

 private:
  [[noreturn]] static void unsupported(const std::string& keyword, const std::string& why) {
    throw UnsupportedSchemaError(keyword, fmt::format("JSON Schema: {} (keyword '{}'); constrained decoding cannot enforce "
                                                      "it, so the request is refused rather than answered unchecked",
                                                      why, keyword));
  }

  std::string rule(const std::string& hint, const std::string& body) {
    std::string name;
    for (char c : hint) name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-';
    if (name.empty()) name = "r";
    std::string unique = name;
    for (int i = 2; rules_.count(unique) || reserved_.count(unique); ++i) unique = fmt::format("{}-{}", name, i);
    rules_[unique] = body;
    return unique;
  }

  std::string reserve(const std::string& hint) {
    std::string unique = rule(hint, "");
    rules_.erase(unique);
    reserved_.insert(unique);
    return unique;
  }

  // For the rule generators (pattern_automaton.h, number_multiples.h).
  RuleSink sink() {
    return {[this](const std::string& hint) { return reserve(hint); },
            [this](const std::string& name, const std::string& body) {
              reserved_.erase(name);
              rules_[name] = body;
            }};
  }

  // A const / enum value as the grammar writes it: a number with no fraction as an integer (2.0 and
  // 2 are the same JSON Schema value; the grammar writes "2").
  static json canonical(const json& value) {
    if (value.is_number_float()) {
      const double d = value.get<double>();
      if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) <= 9007199254740992.0) return json(static_cast<int64_t>(d));
      return value;
    }
    if (value.is_array() || value.is_object()) {
      json out = value;
      for (auto& item : out) item = canonical(item);
      return out;
    }
    return value;
  }
  std::string literal(const json& value) { return gbnf_literal(canonical(value).dump()); }

  // A count: a non-negative integer, which JSON may write as 2.0 (draft 2020-12 allows it).
  int bound(const json& schema, const char* key, int fallback) {
    if (!schema.contains(key)) return fallback;
    const json& v = schema[key];
    const bool integral = v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                                    std::floor(v.get<double>()) == v.get<double>());
    if (!integral || v.get<double>() < 0) unsupported(key, fmt::format("'{}' must be a non-negative integer", key));
    if (v.get<double>() > limits_.max_repetition)
      unsupported(key, fmt::format("'{}' is {}; at most {} can be enforced", key, v.dump(), limits_.max_repetition));
    return static_cast<int>(v.get<double>());
  }

  static std::string repeat(int min, int max) {
    if (max < 0) return min == 0 ? "*" : fmt::format("{{{},}}", min);
    if (min == max) return fmt::format("{{{}}}", min);
    return fmt::format("{{{},{}}}", min, max);
  }

  // The meta-schemas of the published drafts (http or https, with or without a trailing '#').
  static bool known_dialect(const json& uri) {
    if (!uri.is_string()) return false;
    std::string u = uri.get<std::string>();
    if (!u.empty() && u.back() == '#') u.pop_back();
    if (u.rfind("https://", 0) == 0) u = "http://" + u.substr(8);
    static const std::set<std::string> kDrafts = {"http://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft/2019-09/schema",
                                                  "http://json-schema.org/draft-07/schema", "http://json-schema.org/draft-06/schema",
                                                  "http://json-schema.org/draft-04/schema", "http://json-schema.org/schema"};
    return kDrafts.count(u) > 0;
  }

  static bool only_annotations(const json& schema) {
    if (!schema.is_object()) return false;
    for (const auto& [key, unused] : schema.items())
      if (!kAnnotations.count(key)) return false;
    return true;
  }

  // `not` where it reduces to a plain schema: not true / {} (nothing), not false (anything), a
  // double negation, or a negated 'type' (the other types); none otherwise.
  static std::optional<json> negation(const json& negated) {
    if (negated == json(true) || only_annotations(negated)) return json(false);
    if (negated == json(false)) return json(true);
    if (!negated.is_object()) return std::nullopt;
    bool type_only = negated.contains("type"), not_only = negated.contains("not");
    for (const auto& [key, unused] : negated.items()) {
      if (kAnnotations.count(key)) continue;
      type_only = type_only && key == "type";
      not_only = not_only && key == "not";
    }
    if (not_only) return negated["not"];
    if (!type_only) return std::nullopt;
    std::set<std::string> types;
    for (const json& t : negated["type"].is_array() ? negated["type"] : json::array({negated["type"]}))
      if (t.is_string()) types.insert(t.get<std::string>());
    // Not an integer: a number with a fraction, which a grammar of digits cannot tell from 1.0.
    if (types.count("integer") && !types.count("number")) return std::nullopt;
    json rest = json::array();
    for (const char* t : kAllTypes)
      if (!types.count(t)) rest.push_back(t);
    if (rest.empty()) return json(false);
    return json{{"type", rest}};
  }

  static bool matches_nothing(const json& schema) {
    if (schema == json(false)) return true;
    if (!schema.is_object() || !schema.contains("not")) return false;
    for (const auto& [key, unused] : schema.items())
      if (key != "not" && !kAnnotations.count(key)) return false;
    const auto n = negation(schema["not"]);
    return n && *n == json(false);
  }

  // The schema with `not` and `if` / `then` / `else` read as plain keywords where they reduce to
  // them (then / else without if and if without either apply nothing; if true applies then, if
  // false else); none when it has neither; refused by name where they do not reduce.
  static std::optional<json> simplified(const json& schema) {
    if (!schema.contains("not") && !schema.contains("if") && !schema.contains("then") && !schema.contains("else")) return std::nullopt;
    for (const char* k : {"unevaluatedProperties", "unevaluatedItems"})
      if (schema.contains(k) && (schema.contains("if") || schema.contains("not")))
        unsupported(k, fmt::format("'{}' beside 'if' or 'not' (what those evaluate depends on the value)", k));
    json out = schema;
    std::vector<json> also;  // schemas that apply too
    if (out.contains("if") || out.contains("then") || out.contains("else")) {
      const bool condition = out.contains("if"), branches = out.contains("then") || out.contains("else");
      const json cond = out.value("if", json(true)), then = out.value("then", json(true)), otherwise = out.value("else", json(true));
      out.erase("if"), out.erase("then"), out.erase("else");
      if (condition && branches) {
        if (cond == json(true) || only_annotations(cond)) also.push_back(then);
        else if (matches_nothing(cond)) also.push_back(otherwise);
        else unsupported("if", "'if' with 'then' / 'else' (which branch applies depends on the value; only an 'if' that "
                               "every value or no value matches is enforced)");
      }
    }
    if (out.contains("not")) {
      const auto negated = negation(out["not"]);
      if (!negated)
        unsupported("not", "'not' of a schema other than true, false, {}, a 'not', or a 'type' (its complement is not a "
                           "grammar written here)");
      out.erase("not");
      also.push_back(*negated);
    }
    json parts = out.contains("allOf") && out["allOf"].is_array() ? out["allOf"] : json::array();
    for (const json& x : also) {
      if (matches_nothing(x)) return json(false);
      if (x != json(true) && !only_annotations(x)) parts.push_back(x);
    }
    if (!parts.empty()) out["allOf"] = parts;
    return out;
  }

  std::string visit(const json& schema, const std::string& hint, int depth) {
    if (depth > limits_.max_schema_depth)
      throw GrammarError(fmt::format("JSON Schema: nested deeper than {} levels (--max-schema-depth)", limits_.max_schema_depth));
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return "json-value";
      unsupported("false", "the schema 'false' matches nothing");
    }
    if (!schema.is_object()) throw GrammarError(fmt::format("JSON Schema: a schema must be an object or a boolean, got {}", schema.dump()));
    if (auto it = schema.find("$schema"); it != schema.end() && !known_dialect(*it))
      unsupported("$schema", fmt::format("'$schema' {} is not a JSON Schema draft's meta-schema (a custom one may change "
                                         "what the keywords mean)", it->dump()));
    if (auto reduced = simplified(schema)) {
      if (*reduced == json(false))
        unsupported(schema.contains("not") ? "not" : "if", "'not' / 'if' leave a schema that no value matches");
      return visit(*reduced, hint, depth + 1);
    }
    if (schema.contains("unevaluatedProperties") || schema.contains("unevaluatedItems"))
      return visit(without_unevaluated(schema), hint, depth + 1);
    for (const auto& [key, value] : schema.items())
      if (!kAnnotations.count(key) && !kEnforced.count(key)) unsupported(key, fmt::format("'{}' is not supported", key));

    // A keyword beside $ref applies too (draft 2020-12): the two are merged, as allOf parts are.
    if (schema.contains("$ref")) {
      bool siblings = false;
      for (const auto& [key, value] : schema.items()) siblings = siblings || (key != "$ref" && !kAnnotations.count(key));
      if (!siblings) return reference(schema["$ref"], depth);
      return visit(merged_all_of(json::array({schema})), hint, depth + 1);  // $ref and its siblings both apply
    }
    if (schema.contains("const") || schema.contains("enum")) {
      // The values as listed; beside them only 'type' is read (it keeps the values of its types).
      for (const auto& [key, unused] : schema.items())
        if (!kAnnotations.count(key) && key != "const" && key != "enum" && key != "type")
          unsupported(key, fmt::format("'{}' beside 'const' / 'enum' (the listed values are written; '{}' is not checked "
                                       "against them)", key, key));
      std::vector<json> values;
      if (schema.contains("enum")) {
        if (!schema["enum"].is_array() || schema["enum"].empty()) unsupported("enum", "'enum' must be a non-empty array");
        for (const json& v : schema["enum"]) values.push_back(v);
      }
      if (schema.contains("const")) {
        const bool listed = !schema.contains("enum") || share_a_value(values, {schema["const"]});
        values = listed ? std::vector<json>{schema["const"]} : std::vector<json>{};
      }
      if (schema.contains("type")) {
        std::set<std::string> types;
        for (const json& t : schema["type"].is_array() ? schema["type"] : json::array({schema["type"]}))
          if (t.is_string()) types.insert(t.get<std::string>());
        std::vector<json> kept;
        for (const json& v : values) {
          const json c = canonical(v);
          const std::string t = c.is_object() ? "object" : c.is_array() ? "array" : c.is_string() ? "string"
                                : c.is_number_integer() || c.is_number_unsigned() ? "integer" : c.is_number() ? "number"
                                : c.is_boolean() ? "boolean" : "null";
          if (types.count(t) || (t == "integer" && types.count("number"))) kept.push_back(v);
        }
        values = kept;
      }
      if (values.empty()) unsupported(schema.contains("enum") ? "enum" : "const", "no value of 'const' / 'enum' is allowed beside the other keywords");
      std::string body;
      for (const json& v : values) body += (body.empty() ? "" : " | ") + literal(v);
      return values.size() == 1 ? literal(values[0]) : rule(hint, body);
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (schema.contains(key)) {
        const json& given = schema[key];
        if (!given.is_array() || given.empty()) unsupported(key, fmt::format("'{}' must be a non-empty array", key));
        // Keywords beside it (a base schema) apply too: each option merged with them, as allOf. An
        // option false matches nothing, so it is never the one that matches.
        json base = schema;
        base.erase(key);
        bool siblings = false;
        for (const auto& [k, unused] : base.items()) siblings = siblings || !kAnnotations.count(k);
        json options = json::array();
        for (const json& option : given)
          if (option != json(false)) options.push_back(siblings ? merged_all_of(json::array({base, option})) : option);
        if (options.empty()) unsupported(key, fmt::format("every '{}' option is false, so nothing matches", key));
        // oneOf allows a value that matches exactly one option: read as anyOf, the grammar would also
        // take a value matching two. Only options no value can match together are taken.
        if (std::string(key) == "oneOf")
          for (std::size_t i = 0; i < options.size(); ++i)
            for (std::size_t j = i + 1; j < options.size(); ++j)
              if (!disjoint(options[i], options[j]) &&
                  !(writes_none_required_by(options[i], options[j]) && writes_none_required_by(options[j], options[i])))
                unsupported("oneOf", fmt::format("'oneOf' options {} and {} may both match one value (the grammar cannot "
                                                 "require exactly one; use anyOf, or options of different types or "
                                                 "different const values)",
                                                 i, j));
        std::string body;
        for (std::size_t i = 0; i < options.size(); ++i)
          body += (i ? " | " : "") + visit(options[i], fmt::format("{}-{}", hint, i), depth + 1);
        return rule(hint, body);
      }
    if (schema.contains("allOf")) {
      const json& parts = schema["allOf"];
      if (!parts.is_array() || parts.empty()) unsupported("allOf", "'allOf' must be a non-empty array");
      bool siblings = false;
      for (const auto& [key, value] : schema.items()) siblings = siblings || (key != "allOf" && !kAnnotations.count(key));
      if (parts.size() == 1 && !siblings) return visit(parts[0], hint, depth + 1);
      return visit(merged_all_of(json::array({schema})), hint, depth + 1);
    }

    if (schema.contains("type") && schema["type"].is_array()) {
      std::string body;
      for (const json& type : schema["type"]) {
        if (!type.is_string()) unsupported("type", "'type' must be a string or a list of strings");
        // Each type with the keywords that apply to it ({"type": ["string", "null"], "maxLength": 3}).
        body += (body.empty() ? "" : " | ") + visit(keywords_for(schema, type.get<std::string>()), hint + "-" + type.get<std::string>(), depth + 1);
      }
      if (body.empty()) unsupported("type", "an empty 'type' list");
      return rule(hint, body);
    }
    std::string type;
    if (schema.contains("type")) {
      if (!schema["type"].is_string()) unsupported("type", "'type' must be a string or a list of strings");
      type = schema["type"].get<std::string>();
    } else {
      // No type: a keyword constrains only values of its own type, and a value of any other type
      // matches ({"maxLength": 3} allows 12 and null). The union of all six types, each under its
      // own keywords.
      bool typed_keywords = false;
      for (const auto& [owner, keys] : kKeywordsOfType)
        for (const std::string& key : keys) typed_keywords = typed_keywords || schema.contains(key);
      if (!typed_keywords) return "json-value";
      std::string body;
      for (const char* t : kAllTypes) body += (body.empty() ? "" : " | ") + visit(keywords_for(schema, t), hint + "-" + t, depth + 1);
      return rule(hint, body);
    }
    auto only = [&](std::initializer_list<const char*> allowed) {
      for (const auto& [key, value] : schema.items()) {
        if (kAnnotations.count(key) || key == "type") continue;
        bool ok = false;
        for (const char* a : allowed) ok = ok || key == a;
        if (!ok) unsupported(key, fmt::format("'{}' does not apply to type '{}'", key, type));
      }
    };
    if (type.empty()) return "json-value";
    if (type == "object") {
      only({"properties", "required", "additionalProperties", "propertyNames", "minProperties", "maxProperties",
            "patternProperties", "dependentRequired", "dependentSchemas"});
      return object(schema, hint, depth);
    }
    if (type == "array") {
      only({"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains"});
      return array(schema, hint, depth);
    }
    if (type == "string") {
      only({"pattern", "format", "minLength", "maxLength"});
      return string(schema, hint);
    }
    if (type == "number" || type == "integer") {
      only({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"});
      return number(schema, type == "integer");
    }
    only({});
    if (type == "boolean") return "json-boolean";
    if (type == "null") return "json-null";
    unsupported("type", fmt::format("unknown type '{}'", type));
  }

  // A JSON pointer's target in this schema ("#/$defs/a~1b/0": ~1 is '/', ~0 '~', %XX a byte), or
  // nullptr when it names nothing.
  const json* pointer_target(const std::string& pointer) const {
    const json* at = &root_;
    std::size_t i = 1;  // after '#'
    while (i < pointer.size()) {
      if (pointer[i] != '/') return nullptr;
      const std::size_t end = std::min(pointer.find('/', i + 1), pointer.size());
      std::string token;
      for (std::size_t j = i + 1; j < end; ++j) {
        if (pointer[j] == '%' && j + 2 < end && std::isxdigit(static_cast<unsigned char>(pointer[j + 1])) &&
            std::isxdigit(static_cast<unsigned char>(pointer[j + 2]))) {
          token += static_cast<char>(std::stoi(pointer.substr(j + 1, 2), nullptr, 16));
          j += 2;
        } else if (pointer[j] == '~' && j + 1 < end && (pointer[j + 1] == '0' || pointer[j + 1] == '1')) {
          token += pointer[j + 1] == '1' ? '/' : '~';
          ++j;
        } else {
          token += pointer[j];
        }
      }
      if (at->is_object()) {
        auto it = at->find(token);
        if (it == at->end()) return nullptr;
        at = &*it;
      } else if (at->is_array()) {
        if (token.empty() || token.size() > 9 || token.find_first_not_of("0123456789") != std::string::npos) return nullptr;
        const std::size_t index = std::stoul(token);
        if (index >= at->size()) return nullptr;
        at = &(*at)[index];
      } else {
        return nullptr;
      }
      i = end;
    }
    return at;
  }

  // The subschema a $ref names: resolve_references has made each a JSON pointer from the root, or
  // marked it as naming a schema outside this document, which is never fetched.
  const json& ref_target(const json& ref) const {
    if (!ref.is_string()) unsupported("$ref", "'$ref' must be a string");
    const std::string target = ref.get<std::string>();
    if (!target.empty() && target[0] == kUnresolvedRef)
      unsupported("$ref", fmt::format("'$ref' {} names no schema in this document (by JSON pointer, $id or $anchor); remote "
                                      "schemas are never fetched", json(target.substr(1)).dump()));
    const json* resolved = target.rfind("#/", 0) == 0 || target == "#" ? pointer_target(target) : nullptr;
    if (!resolved)
      unsupported("$ref", fmt::format("'$ref' {} does not point into this schema (a JSON pointer '#/...', an '#anchor' or "
                                      "an $id of this document)", ref.dump()));
    return *resolved;
  }

  std::string reference(const json& ref, int depth) {
    const json& resolved = ref_target(ref);
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    const std::string name = prefix_ + "-ref" + target.substr(1);
    std::string rule_name = reserve(name);
    refs_[target] = rule_name;  // before visiting: recursive schemas refer to the rule by name
    std::string body = visit(resolved, name + "-body", depth + 1);
    reserved_.erase(rule_name);
    rules_[rule_name] = body;
    return rule_name;
  }

  // unevaluatedProperties / unevaluatedItems where what the schema evaluates does not depend on the
  // value: its properties, patternProperties and prefixItems, with those of its allOf parts and
  // $ref targets (read in place). Then unevaluatedProperties is additionalProperties over all of
  // them (nothing, when some part has additionalProperties, which evaluates every property), and
  // unevaluatedItems is items (nothing, when some part has items). anyOf, oneOf, if, not,
  // dependentSchemas and contains make it depend on the value: refused.
  json without_unevaluated(const json& schema) {
    const char* keyword = schema.contains("unevaluatedProperties") ? "unevaluatedProperties" : "unevaluatedItems";
    json rest = schema;
    rest.erase("unevaluatedProperties");
    rest.erase("unevaluatedItems");
    bool all_properties = false, all_items = false;
    std::deque<json> parts{rest};
    for (int reads = 0; !parts.empty(); ++reads) {
      const json part = std::move(parts.front());
      parts.pop_front();
      if (!part.is_object()) continue;
      if (reads > 64) unsupported(keyword, fmt::format("'{}' over '$ref' / 'allOf' that refer to themselves", keyword));
      for (const char* k : {"anyOf", "oneOf", "if", "then", "else", "not", "dependentSchemas", "contains", "$dynamicRef"})
        if (part.contains(k))
          unsupported(keyword, fmt::format("'{}' beside '{}' (what it evaluates depends on the value)", keyword, k));
      all_properties = all_properties || part.contains("additionalProperties") || part.value("unevaluatedProperties", json(false)) == json(true);
      all_items = all_items || part.contains("items") || part.value("unevaluatedItems", json(false)) == json(true);
      if (part.contains("$ref")) parts.push_back(ref_target(part["$ref"]));
      if (part.contains("allOf") && part["allOf"].is_array())
        for (const json& p : part["allOf"]) parts.push_back(p);
    }
    json merged = merged_all_of(json::array({rest}));
    const std::set<std::string> types = value_types(merged);
    // The properties it lets through: every other one, where all are evaluated or it is true.
    if (schema.contains("unevaluatedProperties") && types.count("object") && !merged.contains("additionalProperties"))
      merged["additionalProperties"] = all_properties ? json(true) : schema["unevaluatedProperties"];
    if (schema.contains("unevaluatedItems") && !all_items && schema["unevaluatedItems"] != json(true) && types.count("array"))
      merged["items"] = schema["unevaluatedItems"];
    return merged;
  }

  // The least common multiple of two multipleOf steps, as a JSON number; none past 15 digits.
  static std::optional<json> common_multiple(const json& a, const json& b) {
    const auto sa = parse_decimal_step(a.dump()), sb = parse_decimal_step(b.dump());
    if (!sa || !sb) return std::nullopt;
    const int decimals = std::max(sa->decimals, sb->decimals);
    unsigned __int128 ma = sa->mantissa, mb = sb->mantissa;
    for (int i = sa->decimals; i < decimals; ++i) ma *= 10;
    for (int i = sb->decimals; i < decimals; ++i) mb *= 10;
    if (ma > 999999999999999 || mb > 999999999999999) return std::nullopt;
    const uint64_t x = static_cast<uint64_t>(ma), y = static_cast<uint64_t>(mb);
    const unsigned __int128 lcm = static_cast<unsigned __int128>(x / std::gcd(x, y)) * y;
    if (lcm > 999999999999999) return std::nullopt;
    std::string digits = std::to_string(static_cast<uint64_t>(lcm));
    if (decimals == 0) return json(static_cast<uint64_t>(lcm));
    while (static_cast<int>(digits.size()) <= decimals) digits.insert(digits.begin(), '0');
    digits.insert(digits.end() - decimals, '.');
    return json::parse(digits);
  }

  // allOf (and $ref beside other keywords, which draft 2020-12 reads the same way) as one schema:
  // the parts' keywords together where each is constrained by one part, or by several in a way
  // that combines exactly: types intersect, required names unite, a property in two parts takes
  // both schemas, items both schemas, bounds the tighter one, equal values stay. $ref and nested
  // allOf parts are read through. Anything else is refused: a grammar enforcing one part only would
  // accept values another part forbids.
  json merged_all_of(const json& parts) const {
    static const std::set<std::string> kLower = {"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"};
    static const std::set<std::string> kUpper = {"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"};
    auto refuse = [](const std::string& why) { unsupported("allOf", "'allOf' " + why); };
    json out = json::object();
    struct Closed {  // a part's additionalProperties (not true), the properties it lists and its patterns
      json additional;
      std::set<std::string> listed;
      std::vector<PatternDfa> patterns;
    };
    std::vector<Closed> closed;
    std::deque<json> pending(parts.begin(), parts.end());
    int expansions = 0, part_index = 0;
    std::map<std::string, int> origin;  // the part each keyword came from first
    while (!pending.empty()) {
      json part = std::move(pending.front());
      pending.pop_front();
      if (part.is_boolean()) {
        if (!part.get<bool>()) unsupported("false", "the schema 'false' matches nothing");
        continue;
      }
      if (!part.is_object()) throw GrammarError(fmt::format("JSON Schema: an allOf part must be an object or a boolean, got {}", part.dump()));
      // not / if read within their own part: an 'if' here and a 'then' in another part do not meet.
      if (auto reduced = simplified(part)) {
        if (*reduced == json(false)) unsupported(part.contains("not") ? "not" : "if", "'not' / 'if' leave a schema that no value matches");
        pending.push_front(*reduced);
        continue;
      }
      // A part's own unevaluated* sees only that part's evaluations: true adds nothing; others refused.
      for (const char* k : {"unevaluatedProperties", "unevaluatedItems"})
        if (part.contains(k)) {
          if (part[k] != json(true))
            unsupported(k, fmt::format("'{}' inside 'allOf' / '$ref' beside other keywords (it sees only its own part)", k));
          part.erase(k);
        }
      if (part.contains("$ref") || part.contains("allOf")) {
        // Read through, in order (the order properties are written in): this part's own keywords, then
        // what $ref names, then the allOf parts.
        if (++expansions > 64)
          unsupported("$ref", "'$ref' beside other keywords or in 'allOf' that refers to itself (more than 64 parts read through)");
        std::vector<json> inner;
        if (part.contains("$ref")) inner.push_back(ref_target(part["$ref"]));
        if (part.contains("allOf")) {
          if (!part["allOf"].is_array() || part["allOf"].empty()) refuse("must be a non-empty array");
          for (const json& p : part["allOf"]) inner.push_back(p);
        }
        part.erase("$ref");
        part.erase("allOf");
        for (auto it = inner.rbegin(); it != inner.rend(); ++it) pending.push_front(*it);
        pending.push_front(std::move(part));
        continue;
      }
      if (part.contains("additionalProperties") && part["additionalProperties"] != json(true)) {
        Closed c{part["additionalProperties"], {}};
        if (part.contains("properties") && part["properties"].is_object())
          for (const auto& [name, unused] : part["properties"].items()) c.listed.insert(name);
        if (part.contains("patternProperties") && part["patternProperties"].is_object())
          for (const auto& [pattern, unused] : part["patternProperties"].items()) {
            try {
              c.patterns.push_back(PatternDfa::compile(pattern, limits_));
            } catch (const GrammarError& e) {
              unsupported("patternProperties", fmt::format("pattern {}: {}", json(pattern).dump(), e.what()));
            }
          }
        closed.push_back(std::move(c));
      }
      ++part_index;
      for (const auto& [key, value] : part.items()) {
        if (kAnnotations.count(key)) continue;
        // items applies to what prefixItems leaves, in its own schema only: from two parts, items
        // would apply to every item.
        for (const auto& [a, b] : {std::pair{"items", "prefixItems"}, std::pair{"prefixItems", "items"}})
          if (key == a && origin.count(b) && origin[b] != part_index)
            refuse(fmt::format("with '{}' in one part and '{}' in another", b, a));
        if (!out.contains(key)) {
          out[key] = value;
          origin[key] = part_index;
          continue;
        }
        json& have = out[key];
        if (nlohmann::json(have) == nlohmann::json(value)) continue;
        if (key == "type") {
          auto types_of = [&](const json& t) {
            std::set<std::string> set;
            for (const json& one : t.is_array() ? t : json::array({t}))
              if (one.is_string()) set.insert(one.get<std::string>());
            return set;
          };
          const std::set<std::string> a = types_of(have), b = types_of(value);
          auto allows = [](const std::set<std::string>& types, const std::string& t) {
            return types.count(t) || (t == "integer" && types.count("number"));
          };
          json both = json::array();
          for (const std::string t : {"object", "array", "string", "number", "integer", "boolean", "null"}) {
            if (t == "integer" && a.count("number") && b.count("number")) continue;  // within "number" already
            if (allows(a, t) && allows(b, t)) both.push_back(t);
          }
          if (both.empty()) refuse(fmt::format("parts with no type in common ({} and {})", have.dump(), value.dump()));
          have = both.size() == 1 ? both[0] : both;
        } else if (key == "required") {
          if (!have.is_array() || !value.is_array()) unsupported("required", "'required' must be an array of names");
          for (const json& name : value)
            if (std::find(have.begin(), have.end(), name) == have.end()) have.push_back(name);
        } else if (key == "properties") {
          if (!have.is_object() || !value.is_object()) unsupported("properties", "'properties' must be an object");
          for (const auto& [name, sub] : value.items())
            have[name] = have.contains(name) ? json{{"allOf", json::array({have[name], sub})}} : sub;
        } else if (key == "items" && have.is_object() && value.is_object()) {
          have = json{{"allOf", json::array({have, value})}};
        } else if ((kLower.count(key) || kUpper.count(key)) && have.is_number() && value.is_number()) {
          const bool tighter = kLower.count(key) ? value.get<double>() > have.get<double>() : value.get<double>() < have.get<double>();
          if (tighter) have = value;
        } else if (key == "multipleOf" && have.is_number() && value.is_number()) {
          // A multiple of both steps is a multiple of their least common multiple.
          const auto lcm = common_multiple(have, value);
          if (!lcm) refuse(fmt::format("with 'multipleOf' {} and {} whose common multiple exceeds 15 digits", have.dump(), value.dump()));
          have = *lcm;
        } else {
          refuse(fmt::format("with '{}' in two parts ({} and {}): the grammar cannot enforce both", key, have.dump(), value.dump()));
        }
      }
    }
    // A part closed by additionalProperties forbids (false) or constrains (a schema) every property it
    // does not list, whichever part lists it.
    for (const Closed& c : closed) {
      std::set<std::string> names;
      if (out.contains("properties"))
        for (const auto& [name, unused] : out["properties"].items()) names.insert(name);
      if (out.contains("required") && out["required"].is_array())
        for (const json& name : out["required"])
          if (name.is_string()) names.insert(name.get<std::string>());
      for (const std::string& name : names) {
        if (c.listed.count(name)) continue;
        if (std::any_of(c.patterns.begin(), c.patterns.end(), [&](const PatternDfa& p) { return p.matches(name); })) continue;
        if (c.additional == json(false))
          refuse(fmt::format("with additionalProperties false in one part and '{}' listed only in another", name));
        json& props = out["properties"];
        props[name] = props.contains(name) ? json{{"allOf", json::array({props[name], c.additional})}} : c.additional;
      }
    }
    if ((out.contains("const") || out.contains("enum")) && out.size() > 1)
      refuse("with 'const' / 'enum' in one part and other keywords in another");
    // additionalProperties covers the names its own part neither lists nor matches.
    if (out.contains("patternProperties") && out.contains("additionalProperties") &&
        origin["patternProperties"] != origin["additionalProperties"])
      refuse("with 'patternProperties' in one part and 'additionalProperties' in another");
    return out;
  }

  std::string string(const json& schema, const std::string& hint) {
    const bool length = schema.contains("minLength") || schema.contains("maxLength");
    if (schema.contains("pattern")) {
      if (length || schema.contains("format")) unsupported("pattern", "'pattern' together with a length or a format");
      if (!schema["pattern"].is_string()) unsupported("pattern", "'pattern' must be a string");
      std::string pattern = schema["pattern"].get<std::string>();
      // A JSON Schema pattern matches anywhere in the string unless anchored.
      if (pattern.empty() || pattern.front() != '^') pattern = ".*(" + pattern + ")";
      if (pattern.back() != '$' || (pattern.size() >= 2 && pattern[pattern.size() - 2] == '\\')) pattern = "(" + pattern + ").*";
      try {
        return rule(hint, "\"\\\"\" " + regex_to_gbnf_expression(pattern, true, limits_) + " \"\\\"\"");
      } catch (const GrammarError& e) {
        unsupported("pattern", e.what());
      }
    }
    if (schema.contains("format")) {
      if (length) unsupported("format", "'format' together with a length");
      const std::string format = schema["format"].is_string() ? schema["format"].get<std::string>() : "";
      if (format != "date" && format != "time" && format != "date-time" && format != "uuid" && format != "email" &&
          format != "ipv4" && format != "ipv6" && format != "duration" && format != "json-pointer")
        unsupported("format", fmt::format("format {} is not supported (date, time, date-time, uuid, email, ipv4, ipv6, "
                                          "duration, json-pointer are)", schema["format"].dump()));
      return rule(hint, "\"\\\"\" " + format + " \"\\\"\"");
    }
    if (length) {
      int min = bound(schema, "minLength", 0), max = bound(schema, "maxLength", -1);
      if (max >= 0 && max < min) unsupported("maxLength", "'maxLength' below 'minLength'");
      return rule(hint, "\"\\\"\" json-char" + repeat(min, max) + " \"\\\"\"");
    }
    return "json-string";
  }

  // Numbers have at most 15 integer digits (below 2^53), so bounds at or beyond +-(10^15 - 1) hold
  // already (zod's safe-integer bounds). An integer's range is written digit by digit; a bounded
  // number's too, on both sides of the point (number_ranges.h), and without an exponent.
  std::string number(const json& schema, bool integer) {
    if (schema.contains("multipleOf")) return multiples(schema, integer);
    constexpr double kReach = 999999999999999.0;
    auto value = [&](const char* key) -> std::optional<double> {
      if (!schema.contains(key)) return std::nullopt;
      if (!schema[key].is_number()) unsupported(key, fmt::format("'{}' must be a number", key));
      return schema[key].get<double>();
    };
    const auto max = value("maximum"), min = value("minimum");
    const auto exclusive_min = value("exclusiveMinimum"), exclusive_max = value("exclusiveMaximum");
    if (integer) {
      // The inclusive integer bounds, clamped to what the grammar can write at all.
      double lo = -kReach, hi = kReach;
      if (min) lo = std::max(lo, std::ceil(*min));
      if (exclusive_min) lo = std::max(lo, std::floor(*exclusive_min) + 1);
      if (max) hi = std::min(hi, std::floor(*max));
      if (exclusive_max) hi = std::min(hi, std::ceil(*exclusive_max) - 1);
      if (lo > hi)
        unsupported(min ? "minimum" : "exclusiveMinimum", "no integer lies within 'minimum' / 'maximum' (and their exclusive forms)");
      if (lo == -kReach && hi == kReach) return "json-integer";
      const int64_t low = static_cast<int64_t>(lo), high = static_cast<int64_t>(hi);
      std::vector<std::string> options;
      if (low < 0) options.push_back("\"-\" " + natural_range(high < 0 ? -high : 1, -low));
      if (high >= 0) options.push_back(natural_range(std::max<int64_t>(low, 0), high));
      std::string body;
      for (const std::string& o : options) body += (body.empty() ? "" : " | ") + o;
      return rule("integer", body);
    }
    if (!max && !min && !exclusive_min && !exclusive_max) return "json-number";
    // Of an inclusive and an exclusive bound on one side, the tighter (the exclusive one at a tie).
    auto tighter = [&](const char* inclusive, const std::optional<double>& a, const char* exclusive,
                       const std::optional<double>& b, bool lower) -> std::optional<DecimalBound> {
      if (!a && !b) return std::nullopt;
      const bool use_exclusive = b && (!a || (lower ? *b >= *a : *b <= *a));
      return DecimalBound{schema[use_exclusive ? exclusive : inclusive].dump(), use_exclusive};
    };
    const auto lower = tighter("minimum", min, "exclusiveMinimum", exclusive_min, true);
    const auto upper = tighter("maximum", max, "exclusiveMaximum", exclusive_max, false);
    std::optional<std::string> body;
    try {
      body = decimal_range(lower, upper);
    } catch (const std::invalid_argument& e) {  // a bound JSON cannot write as digits (infinity)
      unsupported(lower ? (lower->exclusive ? "exclusiveMinimum" : "minimum") : (upper->exclusive ? "exclusiveMaximum" : "maximum"),
                  fmt::format("a bound that is not a finite number ({})", e.what()));
    }
    if (!body)
      unsupported(min ? "minimum" : exclusive_min ? "exclusiveMinimum" : max ? "maximum" : "exclusiveMaximum",
                  "no number with at most 15 digits on each side of the point lies within 'minimum' / 'maximum' (and "
                  "their exclusive forms)");
    return rule("number", *body);
  }

  // multipleOf: the multiples of the step, digit by digit modulo its mantissa (number_multiples.h),
  // exact for any step with at most 15 significant digits whose automaton is small enough. Bounds
  // are taken where they keep or drop whole signs (minimum 0, exclusiveMinimum 0, ...); others are
  // refused with it.
  std::string multiples(const json& schema, bool integer) {
    // Bounds on the automata, so that a step's grammar stays well within --max-grammar-bytes.
    constexpr uint64_t kMaxStates = 64;
    constexpr std::size_t kMaxRangeBytes = 32000;
    constexpr double kReach = 999999999999999.0;  // 15 digits, as integers are written
    const json& given = schema["multipleOf"];
    if (!given.is_number() || !(given.get<double>() > 0) || !std::isfinite(given.get<double>()))
      unsupported("multipleOf", "'multipleOf' must be a number above 0");
    const auto step = parse_decimal_step(given.dump());
    if (!step) unsupported("multipleOf", fmt::format("'multipleOf' {} has more than 15 significant digits", given.dump()));
    if (integer && integer_modulus(*step) == 1) {  // every integer is a multiple (of 1, 0.5, 1e-8, ...)
      json rest = schema;
      rest.erase("multipleOf");
      return number(rest, true);
    }
    const bool integral = integer || step->decimals == 0;  // only integers are multiples
    auto value = [&](const char* key) -> std::optional<double> {
      if (!schema.contains(key)) return std::nullopt;
      if (!schema[key].is_number()) unsupported(key, fmt::format("'{}' must be a number", key));
      return schema[key].get<double>();
    };
    const auto min = value("minimum"), max = value("maximum"), exclusive_min = value("exclusiveMinimum"),
               exclusive_max = value("exclusiveMaximum");
    auto above_lower = [&](double v) { return (!min || v >= *min) && (!exclusive_min || v > *exclusive_min); };
    auto below_upper = [&](double v) { return (!max || v <= *max) && (!exclusive_max || v < *exclusive_max); };
    const bool lower = min || exclusive_min, upper = max || exclusive_max;
    // The smallest positive multiple; the multiples of each sign lie at or beyond it. A bound keeps
    // all multiples of a sign, drops them all, or cuts through them.
    const double unit = integral ? static_cast<double>(integer_modulus(*step)) : given.get<double>();
    bool cut = false;
    Signs signs;
    signs.zero = above_lower(0) && below_upper(0);
    if (!above_lower(-unit)) signs.negative = false;
    else if (lower || !below_upper(-unit)) cut = true;
    if (!below_upper(unit)) signs.positive = false;
    else if (upper || !above_lower(unit)) cut = true;

    // The integer range (15 digits at most, as every integer is written).
    double lo = -kReach, hi = kReach;
    if (min) lo = std::max(lo, std::ceil(*min));
    if (exclusive_min) lo = std::max(lo, std::floor(*exclusive_min) + 1);
    if (max) hi = std::min(hi, std::floor(*max));
    if (exclusive_max) hi = std::min(hi, std::ceil(*exclusive_max) - 1);
    const double digits = std::to_string(static_cast<int64_t>(std::max(std::fabs(lo), std::fabs(hi)))).size();
    if (integral && digits * static_cast<double>(integer_modulus(*step)) <= 1000) {
      // Digit by digit, the range's bounds and the remainder together.
      if (lo > hi) unsupported("multipleOf", "no integer lies within the bounds beside 'multipleOf'");
      const auto body = multiples_in_range(static_cast<int64_t>(lo), static_cast<int64_t>(hi), integer_modulus(*step), sink(),
                                           prefix_ + "-multiple", kMaxRangeBytes);
      if (body) return rule(prefix_ + "-multiple", *body);
      if (cut)
        unsupported("multipleOf", fmt::format("no multiple of 'multipleOf' {} lies within the bounds, or the digit automaton "
                                              "of the range and the step exceeds {} bytes of grammar", given.dump(), kMaxRangeBytes));
      // Too many rules with the digits counted: the signs alone, the digits not bounded.
    }
    if (cut)
      unsupported("multipleOf", "'multipleOf' beside a bound that cuts through the multiples (only bounds that keep or drop "
                                "all negative or all positive multiples, such as minimum 0, are enforced with a fractional or "
                                "large step)");
    if (!signs.negative && !signs.zero && !signs.positive)
      unsupported("multipleOf", "no multiple of 'multipleOf' lies within the bounds");
    if (!integral && !signs.zero && (signs.negative || signs.positive) && unit < 1)
      unsupported("multipleOf", "'multipleOf' below 1 with zero excluded by a bound (the grammar would have to tell 0.0 from 0.5)");
    if (!integral && step->mantissa == 1) {
      // 0.1, 0.01, ...: any number with at most that many decimals.
      if (step->decimals > limits_.max_repetition)
        unsupported("multipleOf", fmt::format("'multipleOf' {} allows more than {} decimals", given.dump(), limits_.max_repetition));
      const std::string decimals = fmt::format("json-natural ( \".\" [0-9]{{1,{}}} )?", step->decimals);
      std::string body;
      if (signs.negative) body = "\"-\" " + decimals;
      if (signs.zero) body += (body.empty() ? "" : " | ") + (signs.positive ? decimals : std::string("\"0\""));
      return rule(prefix_ + "-multiple", body);
    }
    const uint64_t states = multiples_rule_count(*step, integer);
    if (states > kMaxStates)
      unsupported("multipleOf", fmt::format("'multipleOf' {} needs a digit automaton of {} states; at most {} are written "
                                            "(the grammar would be too large)", given.dump(), states, kMaxStates));
    return rule(prefix_ + "-multiple", multiples_expression(*step, integer, signs, sink(), prefix_ + "-multiple"));
  }

  // The values a schema allows when they are few and known (const, enum, boolean, null); none
  // otherwise. false: no value.
  static std::optional<std::vector<json>> finite_values(const json& schema) {
    if (schema == json(false)) return std::vector<json>{};
    if (!schema.is_object()) return std::nullopt;
    bool fixed = false, typed = false;
    for (const auto& [key, unused] : schema.items()) {
      if (kAnnotations.count(key)) continue;
      if (key == "const" || key == "enum") fixed = true;
      else if (key == "type") typed = true;
      else return std::nullopt;
    }
    if (fixed && typed) return std::nullopt;
    if (schema.contains("const")) return std::vector<json>{canonical(schema["const"])};
    if (schema.contains("enum")) {
      if (!schema["enum"].is_array()) return std::nullopt;
      std::vector<json> values;
      for (const json& v : schema["enum"]) values.push_back(canonical(v));
      return values;
    }
    if (!typed) return std::nullopt;
    std::vector<json> values;
    for (const json& t : schema["type"].is_array() ? schema["type"] : json::array({schema["type"]})) {
      if (t == "boolean") values.insert(values.end(), {json(false), json(true)});
      else if (t == "null") values.push_back(json(nullptr));
      else return std::nullopt;
    }
    return values;
  }

  // uniqueItems true where each item's values are a few known ones: which were written is tracked,
  // so none repeats (equal values are written one way: canonical()). Anything else is refused.
  std::string unique_array(const json& schema, const std::string& hint) {
    auto refuse = [](const std::string& why) {
      unsupported("uniqueItems", "'uniqueItems' true " + why + " (the grammar can rule out a repeated item only among a "
                                 "few known values: enum, const, boolean, null)");
    };
    std::vector<std::vector<json>> positions;  // prefixItems' values, position by position
    if (schema.contains("prefixItems")) {
      if (!schema["prefixItems"].is_array()) unsupported("prefixItems", "'prefixItems' must be an array of schemas");
      for (const json& p : schema["prefixItems"]) {
        auto values = finite_values(p);
        if (!values) refuse("over a prefix item that is not a few known values");
        positions.push_back(*values);
      }
    }
    std::vector<json> rest;  // items' values; none when items is false
    if (!schema.contains("items")) {
      refuse("where items may be any value");
    } else if (auto values = finite_values(schema["items"])) {
      rest = *values;
    } else {
      refuse("over items that are not a few known values");
    }
    // The distinct values, and each position's as a bit set over them.
    std::vector<json> distinct;
    auto bits = [&](const std::vector<json>& values) {
      uint32_t set = 0;
      for (const json& v : values) {
        std::size_t i = 0;
        while (i < distinct.size() && nlohmann::json(distinct[i]) != nlohmann::json(v)) ++i;
        if (i == distinct.size()) {
          if (distinct.size() >= 10) refuse("over more than 10 distinct values");
          distinct.push_back(v);
        }
        set |= 1u << i;
      }
      return set;
    };
    std::vector<uint32_t> allowed;
    for (const auto& values : positions) allowed.push_back(bits(values));
    const uint32_t rest_allowed = bits(rest);
    const int k = static_cast<int>(allowed.size()), m = static_cast<int>(distinct.size());
    const int min = bound(schema, "minItems", 0);
    int max = bound(schema, "maxItems", -1);
    const int longest = k + (rest_allowed ? m : 0);
    max = max < 0 ? longest : std::min(max, longest);
    std::map<std::pair<int, uint32_t>, std::optional<std::string>> memo;
    std::function<std::optional<std::string>(int, uint32_t)> state = [&](int i, uint32_t used) -> std::optional<std::string> {
      if (auto it = memo.find({i, used}); it != memo.end()) return it->second;
      if (memo.size() > 1024) refuse("over more item states than 1024");
      std::vector<std::string> options;
      if (i >= min) options.push_back("\"\"");
      const uint32_t here = i < k ? allowed[i] : rest_allowed;
      for (int v = 0; v < m && i < max; ++v)
        if ((here >> v & 1) && !(used >> v & 1))
          if (auto next = state(i + 1, used | 1u << v))
            options.push_back((i ? "\",\" ws " : "") + literal(distinct[v]) + " ws" + (*next == "\"\"" ? "" : " " + *next));
      std::optional<std::string> out;
      if (!options.empty()) {
        std::string body;
        for (const std::string& o : options) body += (body.empty() ? "" : " | ") + o;
        out = rule(hint + "-unique", body);
      }
      memo[{i, used}] = out;
      return out;
    };
    const auto body = state(0, 0);
    if (!body) unsupported("minItems", "no array of distinct items reaches 'minItems'");
    return rule(hint, "\"[\" ws " + *body + " \"]\"");
  }

  // contains (at least `need` items match it, all match items): blocks of items each ending with
  // one that matches both, then any items; every such array parses, taking the first `need`
  // matching items as the blocks' ends.
  std::string containing(const json& schema, const std::string& hint, int depth, int need) {
    for (const char* k : {"prefixItems", "maxItems"})
      if (schema.contains(k)) unsupported("contains", fmt::format("'contains' beside '{}'", k));
    if (schema.contains("uniqueItems") && schema["uniqueItems"] != json(false)) unsupported("contains", "'contains' beside 'uniqueItems'");
    if (bound(schema, "minItems", 0) > need) unsupported("contains", "'contains' beside a 'minItems' above 'minContains'");
    const json& wanted = schema["contains"];
    if (matches_nothing(wanted)) unsupported("contains", "'contains' false: no item matches, so no array does");
    const json items = schema.value("items", json(true));
    if (matches_nothing(items)) unsupported("contains", "'contains' beside 'items' false");
    const std::string item = items == json(true) ? "json-value" : visit(items, hint + "-item", depth + 1);
    const std::string match = visit(items == json(true) ? wanted : merged_all_of(json::array({items, wanted})), hint + "-match", depth + 1);
    const std::string block = rule(hint + "-block", "( " + item + " ws \",\" ws )* " + match + " ws");
    std::string body = "\"[\" ws " + block;
    if (need > 1) body += " ( \",\" ws " + block + " )" + repeat(need - 1, need - 1);
    return rule(hint, body + " ( \",\" ws " + item + " ws )* \"]\"");
  }

  // Items in order: the prefixItems' schemas one by one, then `items` for the rest (false: no
  // more), within minItems / maxItems; uniqueItems true only over a few known values (above).
  std::string array(const json& schema, const std::string& hint, int depth) {
    // minContains / maxContains without contains apply nothing; minContains 0 makes contains apply nothing.
    if (schema.contains("contains")) {
      if (schema.contains("maxContains"))
        unsupported("maxContains", "'maxContains' (it would need the items that do not match 'contains', a complement the "
                                   "grammar cannot write)");
      const int need = bound(schema, "minContains", 1);
      if (need > 0) return containing(schema, hint, depth, need);
    }
    if (schema.contains("uniqueItems") && schema["uniqueItems"] != json(false)) {
      if (schema["uniqueItems"] != json(true)) unsupported("uniqueItems", "'uniqueItems' must be a boolean");
      return unique_array(schema, hint);
    }
    std::vector<std::string> prefix;
    std::optional<int> cut;
    if (schema.contains("prefixItems")) {
      const json& items = schema["prefixItems"];
      if (!items.is_array()) unsupported("prefixItems", "'prefixItems' must be an array of schemas");
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (items[i] == json(false)) {  // no item can be there: the array ends before it
          cut = static_cast<int>(i);
          break;
        }
        prefix.push_back(visit(items[i], fmt::format("{}-{}", hint, i), depth + 1));
      }
    }
    const bool no_more = schema.contains("items") && schema["items"] == json(false);
    std::string item = schema.contains("items") && !no_more ? visit(schema["items"], hint + "-item", depth + 1) : "json-value";
    int min = bound(schema, "minItems", 0), max = bound(schema, "maxItems", -1);
    const int k = static_cast<int>(prefix.size());
    if (no_more) max = max < 0 ? k : std::min(max, k);
    if (cut) max = max < 0 ? *cut : std::min(max, *cut);
    if (max >= 0 && max < min) unsupported("maxItems", "'maxItems' below 'minItems' (or more items required than 'items' false allows)");
    if (max == 0) return rule(hint, "\"[\" ws \"]\"");
    // element(i): the i-th item's schema; after(i): what may follow once i items are written.
    auto element = [&](int i) { return i < k ? prefix[i] : item; };
    std::string tail;  // after(i) for i >= k: the rest as a repetition
    {
      const int from = std::max(k, 1);
      const int rest_min = std::max(min - from, 0), rest_max = max < 0 ? -1 : max - from;
      tail = rest_max == 0 ? "" : "( \",\" ws " + item + " ws )" + repeat(rest_min, rest_max);
    }
    std::string after = tail;  // after(k), or after(1) when there is no prefix
    for (int i = k - 1; i >= 1; --i) {  // after(i) = "," element(i) after(i + 1), optional when i >= min
      if (max >= 0 && i >= max) {
        after = "";
        continue;
      }
      std::string next = "\",\" ws " + element(i) + " ws" + (after.empty() ? "" : " " + after);
      after = rule(hint + "-after", i >= min ? "( " + next + " )?" : next);
    }
    const std::string first = element(0) + " ws" + (after.empty() ? "" : " " + after);
    return rule(hint, min == 0 ? "\"[\" ws ( " + first + " )? \"]\"" : "\"[\" ws " + first + " \"]\"");
  }

  // The names an object may have and what each takes: 'properties' as listed, then required names
  // they do not list, then the names of dependentRequired (each trigger, then the names it
  // requires), written in that order, each optional unless required; then, in any order, the
  // names none of those lists: those a patternProperties regex matches, and the rest under
  // additionalProperties (for a map, a schema without properties or required, always; beside
  // listed properties, only when additionalProperties is a schema: xgrammar's strict mode).
  // A listed name that a pattern matches takes both schemas. The listed names are a state machine
  // over which were written, so dependentRequired and minProperties / maxProperties hold exactly.
  std::string object(const json& schema, const std::string& hint, int depth) {
    const json properties = schema.value("properties", json::object());
    if (!properties.is_object()) unsupported("properties", "'properties' must be an object");
    auto names_of = [&](const json& list, const char* keyword) {
      std::vector<std::string> names;
      if (!list.is_array()) unsupported(keyword, fmt::format("'{}' must be an array of names", keyword));
      for (const json& name : list) {
        if (!name.is_string()) unsupported(keyword, fmt::format("'{}' must be an array of names", keyword));
        names.push_back(name.get<std::string>());
      }
      return names;
    };
    const std::vector<std::string> required = schema.contains("required") ? names_of(schema["required"], "required") : std::vector<std::string>{};
    const bool is_map = properties.empty() && required.empty();
    const json additional = schema.value("additionalProperties", json(true));
    if (!additional.is_boolean() && !additional.is_object())
      unsupported("additionalProperties", "'additionalProperties' must be a schema");

    std::vector<json> pattern_schemas;
    std::vector<PatternDfa> patterns;
    if (schema.contains("patternProperties")) {
      const json& given = schema["patternProperties"];
      if (!given.is_object()) unsupported("patternProperties", "'patternProperties' must be an object of schemas");
      for (const auto& [pattern, sub] : given.items()) {
        try {
          patterns.push_back(PatternDfa::compile(pattern, limits_));
        } catch (const GrammarError& e) {
          unsupported("patternProperties", fmt::format("pattern {}: {}", json(pattern).dump(), e.what()));
        }
        pattern_schemas.push_back(sub);
      }
    }

    // dependentRequired, and dependentSchemas where it says the same: trigger -> names it requires.
    std::vector<std::pair<std::string, std::vector<std::string>>> dependencies;
    std::vector<std::string> forbidden;  // names no instance may have (dependentSchemas false)
    if (schema.contains("dependentRequired")) {
      if (!schema["dependentRequired"].is_object()) unsupported("dependentRequired", "'dependentRequired' must be an object");
      for (const auto& [trigger, names] : schema["dependentRequired"].items())
        dependencies.push_back({trigger, names_of(names, "dependentRequired")});
    }
    if (schema.contains("dependentSchemas")) {
      if (!schema["dependentSchemas"].is_object()) unsupported("dependentSchemas", "'dependentSchemas' must be an object");
      for (const auto& [trigger, sub] : schema["dependentSchemas"].items()) {
        if (sub == json(true)) continue;
        if (sub == json(false)) {
          forbidden.push_back(trigger);
          continue;
        }
        // Only what names the properties present: 'required', and properties that allow anything.
        bool names_only = sub.is_object();
        if (names_only)
          for (const auto& [key, value] : sub.items()) {
            if (kAnnotations.count(key) || key == "required") continue;
            bool anything = key == "properties" && value.is_object();
            if (anything)
              for (const auto& [unused, p] : value.items()) anything = anything && (p == json(true) || (p.is_object() && p.empty()));
            names_only = names_only && anything;
          }
        if (!names_only)
          unsupported("dependentSchemas", fmt::format("'dependentSchemas' for {} beyond 'required' (a schema that applies only "
                                                      "when a property is present)", json(trigger).dump()));
        if (sub.contains("required")) dependencies.push_back({trigger, names_of(sub["required"], "dependentSchemas")});
      }
    }

    struct Property {
      std::string name;
      json schema;
      bool required = false;
      bool allowed = true;  // false: never written (its schema is false)
    };
    std::vector<Property> props;
    std::map<std::string, int> index;
    auto add = [&](const std::string& name, bool is_required) {
      if (auto it = index.find(name); it != index.end()) {
        props[it->second].required = props[it->second].required || is_required;
        return it->second;
      }
      // Its schema: its entry in 'properties' and every pattern matching it; else additionalProperties.
      std::vector<json> parts;
      if (properties.contains(name)) parts.push_back(properties[name]);
      for (std::size_t i = 0; i < patterns.size(); ++i)
        if (patterns[i].matches(name)) parts.push_back(pattern_schemas[i]);
      if (parts.empty()) parts.push_back(additional);
      const bool allowed = std::none_of(parts.begin(), parts.end(), [](const json& p) { return matches_nothing(p); });
      index[name] = static_cast<int>(props.size());
      props.push_back({name, parts.size() == 1 ? parts[0] : json{{"allOf", parts}}, is_required, allowed});
      return index[name];
    };
    for (const auto& [name, unused] : properties.items()) add(name, false);
    for (const std::string& name : required) add(name, true);
    for (const auto& [trigger, names] : dependencies) {
      add(trigger, false);
      for (const std::string& name : names) add(name, false);
    }
    for (const std::string& name : forbidden) props[add(name, false)].allowed = false;
    for (const Property& p : props)
      if (p.required && !p.allowed)
        unsupported("required", fmt::format("'{}' is required but its schema is false (or additionalProperties false)", p.name));

    const int min_properties = bound(schema, "minProperties", 0), max_properties = bound(schema, "maxProperties", -1);
    if (max_properties >= 0 && max_properties < min_properties) unsupported("maxProperties", "'maxProperties' below 'minProperties'");

    // The names no listed one equals: grouped by the patterns they match, each group's values under
    // those patterns' schemas, or under additionalProperties where none matches.
    const bool names_false = schema.contains("propertyNames") && schema["propertyNames"] == json(false);
    std::optional<json> unmatched;  // the schema of names neither listed nor matched; none: never written
    // Beside listed properties only an additionalProperties the schema states opens the other names
    // (absent: strict mode).
    if (additional != json(false) && (is_map || schema.contains("additionalProperties"))) unmatched = additional;
    std::vector<std::string> pair_options;
    if (names_false) {
      if (!props.empty() || !patterns.empty())
        unsupported("propertyNames", "'propertyNames' false beside properties that may be written");
    } else if (patterns.empty() && props.empty()) {
      if (unmatched) {
        // A map of any keys (propertyNames: keys of that string schema).
        std::string key = "json-string";
        if (schema.contains("propertyNames")) {
          const json& names = schema["propertyNames"];
          if (names.is_object()) {
            for (const char* fixed : {"const", "enum"})
              if (names.contains(fixed))
                for (const json& v : names[fixed].is_array() ? names[fixed] : json::array({names[fixed]}))
                  if (!v.is_string()) unsupported("propertyNames", fmt::format("'propertyNames' {} {} is not a string", fixed, v.dump()));
            key = visit(keywords_for(names, "string"), hint + "-name", depth + 1);
          } else if (names != json(true)) {
            unsupported("propertyNames", "'propertyNames' must be a schema");
          }
        }
        const std::string value = *unmatched == json(true) || (unmatched->is_object() && unmatched->empty())
                                      ? "json-value" : visit(*unmatched, hint + "-value", depth + 1);
        pair_options.push_back(key + " ws \":\" ws " + value + " ws");
      }
    } else {
      if (schema.contains("propertyNames") && schema["propertyNames"] != json(true))
        unsupported("propertyNames", "'propertyNames' beside 'properties', 'required', 'patternProperties' or 'dependentRequired' "
                                     "(only for a map of any keys)");
      std::vector<std::string> listed;
      for (const Property& p : props) listed.push_back(p.name);
      const bool any_unlisted = unmatched || !patterns.empty();
      if (any_unlisted) {
        std::map<std::vector<bool>, std::string> groups;
        try {
          groups = unlisted_name_groups(patterns, listed, sink(), hint + "-key", limits_);
        } catch (const GrammarError& e) {
          // Too many listed names to write the others' automaton: where additionalProperties only
          // allows them (true), they are left out (strict mode) rather than refused.
          const bool allows_only = patterns.empty() && !is_map && (*unmatched == json(true) || (unmatched->is_object() && unmatched->empty()));
          if (!allows_only) unsupported(patterns.empty() ? "additionalProperties" : "patternProperties", e.what());
          unmatched.reset();
        }
        for (const auto& [matched, key] : groups) {
          std::vector<json> parts;
          for (std::size_t i = 0; i < matched.size(); ++i)
            if (matched[i]) parts.push_back(pattern_schemas[i]);
          if (parts.empty()) {
            if (!unmatched) continue;
            parts.push_back(*unmatched);
          }
          if (std::any_of(parts.begin(), parts.end(), [](const json& p) { return matches_nothing(p); })) continue;
          const json value = parts.size() == 1 ? parts[0] : json{{"allOf", parts}};
          pair_options.push_back(key + " ws \":\" ws " + visit(value, hint + "-value", depth + 1) + " ws");
        }
      }
    }
    std::optional<std::string> pair;
    if (!pair_options.empty()) {
      std::string body;
      for (const std::string& o : pair_options) body += (body.empty() ? "" : " | ") + o;
      pair = rule(hint + "-pair", body);
    }

    // The listed properties' key-value texts, and the dependencies between them by index.
    const int k = static_cast<int>(props.size());
    std::vector<std::string> kv(k);
    for (int i = 0; i < k; ++i)
      if (props[i].allowed)
        kv[i] = literal(json(props[i].name)) + " ws \":\" ws " + visit(props[i].schema, hint + "-" + props[i].name, depth + 1) + " ws";
    std::vector<std::vector<int>> requires_names(k), required_by(k);
    for (const auto& [trigger, names] : dependencies)
      for (const std::string& name : names) {
        requires_names[index[trigger]].push_back(index[name]);
        required_by[index[name]].push_back(index[trigger]);
      }
    if (!dependencies.empty() && k > 62)
      unsupported("dependentRequired", fmt::format("'dependentRequired' over an object of {} listed names (at most 62)", k));
    // keep[i]: the properties before i whose presence a later decision still depends on.
    std::vector<uint64_t> keep(k + 1, 0);
    for (int i = 0; i <= k; ++i)
      for (int j = 0; j < i; ++j) {
        bool matters = false;
        for (int r : requires_names[j]) matters = matters || r >= i;
        for (int t : required_by[j]) matters = matters || t >= i;
        if (matters) keep[i] |= uint64_t{1} << j;
      }
    const bool counting = min_properties > 0 || max_properties >= 0;
    const int cap = max_properties >= 0 ? max_properties : min_properties;

    // After the listed properties, `count` of them written: the unlisted pairs, within the counts.
    std::map<std::pair<int, bool>, std::optional<std::string>> tails;
    auto tail = [&](int count, bool written) -> std::optional<std::string> {
      if (auto it = tails.find({count, written}); it != tails.end()) return it->second;
      const int need = std::max(min_properties - count, 0), room = max_properties < 0 ? -1 : max_properties - count;
      std::optional<std::string> out;
      if (!pair || room == 0) {
        if (need == 0) out = "\"\"";
      } else {
        if (need > 1)
          unsupported("minProperties", fmt::format("'minProperties' {} needs {} properties besides the listed ones, and the grammar "
                                                   "cannot keep a map's keys distinct (at most 1 can be required)",
                                                   min_properties, need));
        const std::string next = "\",\" ws " + *pair;
        if (written) {
          out = rule(hint + "-more", "( " + next + " )" + repeat(need, room));
        } else {
          const std::string rest = room == 1 ? "" : " ( " + next + " )" + repeat(0, room < 0 ? -1 : room - 1);
          out = rule(hint + "-more", need > 0 ? *pair + rest : "( " + *pair + rest + " )?");
        }
      }
      tails[{count, written}] = out;
      return out;
    };
    std::map<std::tuple<int, uint64_t, int, bool>, std::optional<std::string>> memo;
    std::size_t states = 0;
    std::function<std::optional<std::string>(int, uint64_t, int, bool)> sequence =
        [&](int i, uint64_t present, int count, bool written) -> std::optional<std::string> {
      if (i == k) return tail(count, written);
      const auto key = std::make_tuple(i, present, count, written);
      if (auto it = memo.find(key); it != memo.end()) return it->second;
      if (++states > 4096)
        unsupported(!dependencies.empty() ? "dependentRequired" : max_properties >= 0 ? "maxProperties" : "minProperties",
                    "the object's properties need more than 4096 grammar states to track");
      std::vector<std::string> options;
      bool obligated = props[i].required;
      for (int t : required_by[i]) obligated = obligated || (t < i && (present >> t & 1));
      bool may = props[i].allowed && (max_properties < 0 || count < max_properties);
      for (int r : requires_names[i]) may = may && (r >= i || (present >> r & 1));  // later ones: obligated there
      if (may) {
        const uint64_t bit = i < 64 ? uint64_t{1} << i : 0;  // beyond 64 only without dependencies: never kept
        const auto rest = sequence(i + 1, (present | bit) & keep[i + 1], counting ? std::min(count + 1, cap) : 0, true);
        if (rest) options.push_back((written ? "\",\" ws " : "") + kv[i] + (*rest == "\"\"" ? "" : " " + *rest));
      }
      if (!obligated) {
        const auto rest = sequence(i + 1, present & keep[i + 1], count, written);
        if (rest) options.push_back(*rest);
      }
      std::optional<std::string> out;
      if (!options.empty()) {
        std::string body;
        for (const std::string& o : options) body += (body.empty() ? "" : " | ") + o;
        out = rule(hint + "-props", body);
      }
      memo[key] = out;
      return out;
    };
    const auto body = sequence(0, 0, 0, false);
    if (!body)
      unsupported(min_properties > 0 ? "minProperties" : !dependencies.empty() ? "dependentRequired" : "required",
                  "no object can have the properties these keywords require");
    return rule(hint, "\"{\" ws " + (*body == "\"\"" ? "" : *body + " ") + "\"}\"");
  }

  const json root_;  // with every $ref a pointer from the root (schema_references.h)
  const GrammarLimits& limits_;
  std::map<std::string, std::string> rules_;
  std::set<std::string> reserved_;
  std::map<std::string, std::string> refs_;
  std::string prefix_;
};

}  // namespace

std::string json_schema_to_gbnf(const json& schema, const GrammarLimits& limits) {
  return SchemaConverter(schema, limits).convert("root", true);
}

std::string json_schema_rules(const json& schema, const std::string& name, const GrammarLimits& limits) {
  return SchemaConverter(schema, limits).convert(name, false);
}

std::string json_primitives_gbnf() { return kPrimitives; }

std::string json_object_gbnf() { return std::string("root ::= json-object\n") + kPrimitives; }

}  // namespace inferlab
