// Reading JSON Schemas without writing rules (schema_converter.h): the keyword tables, the types
// and fixed values a schema allows, whether two schemas can share a value, and `not` / `if` where
// they reduce to plain keywords.
#include <cmath>
#include <numeric>

#include "grammar/number_multiples.h"
#include "grammar/schema_converter.h"

namespace inferlab::schema {

const std::set<std::string> kAnnotations = {"title", "description", "$schema", "$id", "default", "examples", "$comment",
                                            "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "$anchor",
                                            // a $dynamicRef that could reach it is resolved or kept to refuse
                                            // (schema_references.h)
                                            "$dynamicAnchor",
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
const char* const kAllTypes[6] = {"object", "array", "string", "number", "boolean", "null"};

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
  for (const auto& [key, value] : a.items())
    if (!kAnnotations.count(key) && !kPlain.count(key) && !(key == "additionalProperties" && value == json(false))) return false;
  std::set<std::string> writable;
  bool listed = false;
  if (a.contains("properties") && a["properties"].is_object())
    for (const auto& [name, unused] : a["properties"].items()) writable.insert(name), listed = true;
  if (a.contains("required") && a["required"].is_array())
    for (const json& n : a["required"])
      if (n.is_string()) writable.insert(n.get<std::string>()), listed = true;
  const bool closed = a.contains("additionalProperties") && a["additionalProperties"] == json(false);
  if (!listed && !closed) return false;  // a map: any name
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

[[noreturn]] void unsupported(const std::string& keyword, const std::string& why) {
  throw UnsupportedSchemaError(keyword, fmt::format("JSON Schema: {} (keyword '{}'); constrained decoding cannot enforce "
                                                    "it, so the request is refused rather than answered unchecked",
                                                    why, keyword));
}

// A const / enum value as the grammar writes it: a number with no fraction as an integer (2.0 and
// 2 are the same JSON Schema value; the grammar writes "2").
json canonical(const json& value) {
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

std::string repeat(int min, int max) {
  if (max < 0) return min == 0 ? "*" : fmt::format("{{{},}}", min);
  if (min == max) return fmt::format("{{{}}}", min);
  return fmt::format("{{{},{}}}", min, max);
}

// The meta-schemas of the published drafts (http or https, with or without a trailing '#').
bool known_dialect(const json& uri) {
  if (!uri.is_string()) return false;
  std::string u = uri.get<std::string>();
  if (!u.empty() && u.back() == '#') u.pop_back();
  if (u.rfind("https://", 0) == 0) u = "http://" + u.substr(8);
  static const std::set<std::string> kDrafts = {"http://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft/2019-09/schema",
                                                "http://json-schema.org/draft-07/schema", "http://json-schema.org/draft-06/schema",
                                                "http://json-schema.org/draft-04/schema", "http://json-schema.org/schema"};
  return kDrafts.count(u) > 0;
}

std::optional<bool> value_satisfies(const json& value, const std::string& keyword, const json& limit) {
  static const std::set<std::string> kLengths = {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"};
  static const std::set<std::string> kBounds = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  if (!kLengths.count(keyword) && !kBounds.count(keyword) && keyword != "required") return std::nullopt;
  const json v = canonical(value);
  const std::string family = v.is_object() ? "object" : v.is_array() ? "array" : v.is_string() ? "string" : v.is_number() ? "number" : "";
  bool applies = false;
  for (const auto& [owner, keys] : kKeywordsOfType) applies = applies || (owner == family && keys.count(keyword));
  if (!applies) return true;  // a keyword of another type says nothing about this value
  if (keyword == "required") {
    if (!limit.is_array()) return std::nullopt;
    for (const json& name : limit)
      if (!name.is_string() || !v.contains(name.get<std::string>())) return name.is_string() ? std::optional<bool>(false) : std::nullopt;
    return true;
  }
  if (!limit.is_number()) return std::nullopt;
  const double bound = limit.get<double>();
  if (kBounds.count(keyword)) {
    const double x = v.get<double>();
    if (keyword == "minimum") return x >= bound;
    if (keyword == "maximum") return x <= bound;
    if (keyword == "exclusiveMinimum") return x > bound;
    return x < bound;
  }
  double size = static_cast<double>(v.size());
  if (v.is_string()) {  // code points: UTF-8 bytes that do not continue one
    size = 0;
    for (unsigned char c : v.get<std::string>()) size += (c & 0xC0) != 0x80;
  }
  return keyword.rfind("min", 0) == 0 ? size >= bound : size <= bound;
}

bool only_annotations(const json& schema) {
  if (!schema.is_object()) return false;
  for (const auto& [key, unused] : schema.items())
    if (!kAnnotations.count(key)) return false;
  return true;
}

namespace {

// The complement of one bound, {"exclusiveMaximum": 0} or {"type": "string", "minLength": 3}: the
// values of the other types, or of its type beyond the bound (x >= 0; at most 2 characters). none
// for anything else (an integer type: its complement has fractions a grammar cannot tell from 1.0).
std::optional<json> bound_negation(const json& negated) {
  static const std::map<std::string, std::pair<std::string, std::string>> kFlipped = {
      // keyword -> (its type family, the keyword bounding the rest)
      {"minimum", {"number", "exclusiveMaximum"}}, {"exclusiveMinimum", {"number", "maximum"}},
      {"maximum", {"number", "exclusiveMinimum"}}, {"exclusiveMaximum", {"number", "minimum"}},
      {"minLength", {"string", "maxLength"}}, {"maxLength", {"string", "minLength"}},
      {"minItems", {"array", "maxItems"}}, {"maxItems", {"array", "minItems"}},
      {"minProperties", {"object", "maxProperties"}}, {"maxProperties", {"object", "minProperties"}}};
  std::string bound;
  for (const auto& [key, unused] : negated.items()) {
    if (kAnnotations.count(key) || key == "type") continue;
    if (!bound.empty() || !kFlipped.count(key)) return std::nullopt;
    bound = key;
  }
  if (bound.empty()) return std::nullopt;
  const auto& [family, flipped] = kFlipped.at(bound);
  if (negated.contains("type") && negated["type"] != json(family)) return std::nullopt;
  const json& limit = negated[bound];
  if (!limit.is_number()) return std::nullopt;
  json others = json::array();
  for (const char* t : kAllTypes)
    if (t != family) others.push_back(t);
  json options = json::array({json{{"type", others}}});
  if (family == "number") {
    options.push_back(json{{"type", "number"}, {flipped, limit}});
  } else {
    // Counts: not at least n is at most n - 1; not at most n is at least n + 1.
    const double n = limit.get<double>();
    if (!(n >= 0) || std::floor(n) != n || n > 1e9) return std::nullopt;
    const bool lower = bound.rfind("min", 0) == 0;
    if (!lower || n > 0) options.push_back(json{{"type", family}, {flipped, static_cast<int64_t>(lower ? n - 1 : n + 1)}});
  }
  return json{{"anyOf", options}};
}

}  // namespace

// `not` where it reduces to a plain schema: not true / {} (nothing), not false (anything), a
// double negation, a negated 'type' (the other types), or a negated bound (the other types and the
// values beyond it); none otherwise.
std::optional<json> negation(const json& negated) {
  if (negated == json(true) || only_annotations(negated)) return json(false);
  if (negated == json(false)) return json(true);
  if (!negated.is_object()) return std::nullopt;
  if (auto flipped = bound_negation(negated)) return flipped;
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

bool matches_nothing(const json& schema) {
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
std::optional<json> simplified(const json& schema) {
  if (!schema.contains("not") && !schema.contains("if") && !schema.contains("then") && !schema.contains("else")) return std::nullopt;
  json out = schema;
  std::vector<json> also;  // schemas that apply too
  if (out.contains("if") || out.contains("then") || out.contains("else")) {
    const bool condition = out.contains("if"), branches = out.contains("then") || out.contains("else");
    const json cond = out.value("if", json(true)), then = out.value("then", json(true)), otherwise = out.value("else", json(true));
    out.erase("if"), out.erase("then"), out.erase("else");
    if (condition && branches) {
      if (cond == json(true) || only_annotations(cond)) {
        also.push_back(then);
      } else if (matches_nothing(cond)) {
        also.push_back(otherwise);
      } else if (const auto failing = negation(cond)) {
        // Either the condition and 'then', or its complement and 'else'.
        auto both = [](const json& a, const json& b) {
          if (b == json(true) || only_annotations(b)) return a;
          return json{{"allOf", json::array({a, b})}};
        };
        json options = json::array();
        if (!matches_nothing(then)) options.push_back(both(cond, then));
        if (!matches_nothing(otherwise) && !matches_nothing(*failing)) options.push_back(both(*failing, otherwise));
        also.push_back(options.empty() ? json(false) : options.size() == 1 ? options[0] : json{{"anyOf", options}});
      } else {
        unsupported("if", "'if' with 'then' / 'else' (which branch applies depends on the value; only an 'if' that "
                          "every value or no value matches, or one bound such as 'minimum' or 'maxLength', is enforced)");
      }
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

// The least common multiple of two multipleOf steps, as a JSON number; none past 15 digits.
std::optional<json> common_multiple(const json& a, const json& b) {
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

// The values a schema allows when they are few and known (const, enum, boolean, null); none
// otherwise. false: no value.
std::optional<std::vector<json>> finite_values(const json& schema) {
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

}  // namespace inferlab::schema
