// JSON Schema -> GBNF (json_schema.h): one rule per object, array, string shape and $ref, over
// shared primitive rules.
#include "inferlab/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>

#include "inferlab/grammar/regex.h"
#include "grammar/number_ranges.h"

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
)";

const std::set<std::string> kAnnotations = {"title", "description", "$schema", "$id", "default", "examples", "$comment",
                                            "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "$anchor",
                                            // draft 2020-12 makes these annotations: a string's content is not asserted
                                            "contentMediaType", "contentEncoding", "contentSchema"};
// The keywords that constrain one type of value; a value of another type ignores them.
const std::map<std::string, std::set<std::string>> kKeywordsOfType = {
    {"object", {"properties", "required", "additionalProperties", "propertyNames", "minProperties", "maxProperties"}},
    {"array", {"items", "prefixItems", "minItems", "maxItems", "uniqueItems"}},
    {"string", {"pattern", "format", "minLength", "maxLength"}},
    {"number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
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

const std::set<std::string> kEnforced = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "type", "properties", "required",
                                         "additionalProperties", "propertyNames", "items", "prefixItems", "uniqueItems", "minItems",
                                         "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "pattern",
                                         "format", "minLength", "maxLength", "minProperties", "maxProperties"};

class SchemaConverter {
 public:
  SchemaConverter(const json& root, const GrammarLimits& limits) : root_(root), limits_(limits) {}

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

  int bound(const json& schema, const char* key, int fallback) {
    if (!schema.contains(key)) return fallback;
    const json& v = schema[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) unsupported(key, fmt::format("'{}' must be a non-negative integer", key));
    if (v.get<int64_t>() > limits_.max_repetition)
      unsupported(key, fmt::format("'{}' is {}; at most {} can be enforced", key, v.dump(), limits_.max_repetition));
    return static_cast<int>(v.get<int64_t>());
  }

  static std::string repeat(int min, int max) {
    if (max < 0) return min == 0 ? "*" : fmt::format("{{{},}}", min);
    if (min == max) return fmt::format("{{{}}}", min);
    return fmt::format("{{{},{}}}", min, max);
  }

  std::string visit(const json& schema, const std::string& hint, int depth) {
    if (depth > limits_.max_schema_depth)
      throw GrammarError(fmt::format("JSON Schema: nested deeper than {} levels (--max-schema-depth)", limits_.max_schema_depth));
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return "json-value";
      unsupported("false", "the schema 'false' matches nothing");
    }
    if (!schema.is_object()) throw GrammarError(fmt::format("JSON Schema: a schema must be an object or a boolean, got {}", schema.dump()));
    for (const auto& [key, value] : schema.items())
      if (!kAnnotations.count(key) && !kEnforced.count(key)) unsupported(key, fmt::format("'{}' is not supported", key));

    // A keyword beside $ref or allOf applies too (draft 2020-12); those two are read alone here.
    auto alone = [&](const char* keyword) {
      for (const auto& [key, value] : schema.items())
        if (key != keyword && !kAnnotations.count(key))
          unsupported(keyword, fmt::format("'{}' beside '{}' (both would apply; move '{}' inside)", keyword, key, key));
    };
    if (schema.contains("$ref")) {
      bool siblings = false;
      for (const auto& [key, value] : schema.items()) siblings = siblings || (key != "$ref" && !kAnnotations.count(key));
      if (!siblings) return reference(schema["$ref"], depth);
      return visit(merged_all_of(json::array({schema})), hint, depth + 1);  // $ref and its siblings both apply
    }
    if (schema.contains("const")) return literal(schema["const"]);
    if (schema.contains("enum")) {
      const json& values = schema["enum"];
      if (!values.is_array() || values.empty()) unsupported("enum", "'enum' must be a non-empty array");
      std::string body;
      for (const json& v : values) body += (body.empty() ? "" : " | ") + literal(v);
      return rule(hint, body);
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (schema.contains(key)) {
        const json& options = schema[key];
        if (!options.is_array() || options.empty()) unsupported(key, fmt::format("'{}' must be a non-empty array", key));
        alone(key);
        // oneOf allows a value that matches exactly one option: read as anyOf, the grammar would also
        // take a value matching two. Only options no value can match together are taken.
        if (std::string(key) == "oneOf")
          for (std::size_t i = 0; i < options.size(); ++i)
            for (std::size_t j = i + 1; j < options.size(); ++j)
              if (!disjoint(options[i], options[j]))
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
      only({"properties", "required", "additionalProperties", "propertyNames", "minProperties", "maxProperties"});
      return object(schema, hint, depth);
    }
    if (type == "array") {
      only({"items", "prefixItems", "minItems", "maxItems", "uniqueItems"});
      return array(schema, hint, depth);
    }
    if (type == "string") {
      only({"pattern", "format", "minLength", "maxLength"});
      return string(schema, hint);
    }
    if (type == "number" || type == "integer") {
      only({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"});
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

  // The subschemas that declare "$anchor": name, anywhere in the schema.
  static void find_anchor(const json& node, const std::string& name, std::vector<const json*>& found) {
    if (node.is_object()) {
      if (auto it = node.find("$anchor"); it != node.end() && *it == name) found.push_back(&node);
      for (const auto& [key, value] : node.items())
        if (key != "const" && key != "enum" && key != "default" && key != "examples") find_anchor(value, name, found);
    } else if (node.is_array()) {
      for (const json& item : node) find_anchor(item, name, found);
    }
  }

  // The subschema a $ref names: a JSON pointer into this schema or an '#anchor'; refused otherwise.
  const json& ref_target(const json& ref) const {
    if (!ref.is_string()) unsupported("$ref", "'$ref' must be a string");
    const std::string target = ref.get<std::string>();
    const json* resolved = nullptr;
    if (target.rfind("#/", 0) == 0 || target == "#") {
      resolved = pointer_target(target);
    } else if (target.size() > 1 && target[0] == '#') {  // a plain-name fragment: the subschema with that $anchor
      std::vector<const json*> found;
      find_anchor(root_, target.substr(1), found);
      if (found.size() > 1)
        unsupported("$ref", fmt::format("'$ref' {}: {} subschemas declare that $anchor (their $id scopes are not resolved)",
                                        ref.dump(), found.size()));
      if (!found.empty()) resolved = found[0];
    }
    if (!resolved)
      unsupported("$ref", fmt::format("'$ref' {} does not point into this schema (a JSON pointer '#/...' or an '#anchor'; "
                                      "URIs of other documents are not fetched)", ref.dump()));
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
    struct Closed {  // a part's additionalProperties (not true) and the properties it lists
      json additional;
      std::set<std::string> listed;
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
        if (c.additional == json(false))
          refuse(fmt::format("with additionalProperties false in one part and '{}' listed only in another", name));
        json& props = out["properties"];
        props[name] = props.contains(name) ? json{{"allOf", json::array({props[name], c.additional})}} : c.additional;
      }
    }
    if ((out.contains("const") || out.contains("enum")) && out.size() > 1)
      refuse("with 'const' / 'enum' in one part and other keywords in another");
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
      if (format != "date" && format != "time" && format != "date-time" && format != "uuid" && format != "email")
        unsupported("format", fmt::format("format {} is not supported (date, time, date-time, uuid, email are)",
                                          schema["format"].dump()));
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

  // Items in order: the prefixItems' schemas one by one, then `items` for the rest (false: no
  // more), within minItems / maxItems. uniqueItems true cannot be enforced by a grammar.
  std::string array(const json& schema, const std::string& hint, int depth) {
    if (schema.contains("uniqueItems") && schema["uniqueItems"] != json(false))
      unsupported("uniqueItems", "'uniqueItems' true (no grammar can rule out a repeated item)");
    std::vector<std::string> prefix;
    if (schema.contains("prefixItems")) {
      const json& items = schema["prefixItems"];
      if (!items.is_array()) unsupported("prefixItems", "'prefixItems' must be an array of schemas");
      for (std::size_t i = 0; i < items.size(); ++i) prefix.push_back(visit(items[i], fmt::format("{}-{}", hint, i), depth + 1));
    }
    const bool no_more = schema.contains("items") && schema["items"] == json(false);
    std::string item = schema.contains("items") && !no_more ? visit(schema["items"], hint + "-item", depth + 1) : "json-value";
    int min = bound(schema, "minItems", 0), max = bound(schema, "maxItems", -1);
    const int k = static_cast<int>(prefix.size());
    if (no_more) max = max < 0 ? k : std::min(max, k);
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

  std::string object(const json& schema, const std::string& hint, int depth) {
    const json properties = schema.value("properties", json::object());
    if (!properties.is_object()) unsupported("properties", "'properties' must be an object");
    std::vector<std::string> required;
    if (schema.contains("required")) {
      if (!schema["required"].is_array()) unsupported("required", "'required' must be an array of names");
      for (const json& name : schema["required"]) {
        if (!name.is_string()) unsupported("required", "'required' must be an array of names");
        required.push_back(name.get<std::string>());
      }
    }
    const json additional = schema.value("additionalProperties", json(true));
    struct Property {
      std::string name;
      json schema;
      bool required;
    };
    std::vector<Property> props;
    for (const auto& [name, sub] : properties.items())
      props.push_back({name, sub, std::find(required.begin(), required.end(), name) != required.end()});
    for (const std::string& name : required)
      if (!properties.contains(name)) {
        if (additional.is_boolean() && !additional.get<bool>())
          unsupported("required", fmt::format("'{}' is required but not in 'properties' and additionalProperties is false", name));
        props.push_back({name, additional.is_object() ? additional : json::object(), true});
      }
    // The schema's order: 'properties' as listed (a model answers in that order, so a schema can put
    // "reasoning" before "answer"), then required names that 'properties' does not list.

    // minProperties / maxProperties: on a map, the count of its key-value pairs; but the grammar
    // cannot keep a map's keys distinct, so of minimums only 1 (a non-empty map) is exact. With
    // listed properties, only bounds the schema already implies (the required ones at least, the
    // listed ones at most, since unlisted ones are never written) are taken.
    const int min_properties = bound(schema, "minProperties", 0), max_properties = bound(schema, "maxProperties", -1);
    if (max_properties >= 0 && max_properties < min_properties)
      unsupported("maxProperties", "'maxProperties' below 'minProperties'");
    if (!props.empty()) {
      const int required_count = static_cast<int>(std::count_if(props.begin(), props.end(), [](const Property& p) { return p.required; }));
      if (min_properties > required_count)
        unsupported("minProperties", fmt::format("'minProperties' {} above the {} required properties (the grammar cannot count "
                                                 "optional ones)", min_properties, required_count));
      if (max_properties >= 0 && max_properties < static_cast<int>(props.size()))
        unsupported("maxProperties", fmt::format("'maxProperties' {} below the {} properties the object may have (the grammar "
                                                 "cannot count optional ones)", max_properties, props.size()));
    }

    if (schema.contains("propertyNames") && !props.empty())
      unsupported("propertyNames", "'propertyNames' beside 'properties' or 'required' (only for a map of any keys)");
    if (props.empty()) {
      if (min_properties > 1)
        unsupported("minProperties", fmt::format("'minProperties' {} on a map (the grammar cannot keep its keys distinct; "
                                                 "0 or 1 can be enforced)", min_properties));
      const bool empty_only = (additional.is_boolean() && !additional.get<bool>()) || max_properties == 0 ||
                              schema.value("propertyNames", json(true)) == json(false);
      if (empty_only && min_properties > 0)
        unsupported("minProperties", "'minProperties' on an object that can have no property");
      if (empty_only) return rule(hint, "\"{\" ws \"}\"");
      // A map: any keys (propertyNames: keys of that string schema), each value by additionalProperties.
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
      std::string value = additional.is_object() ? visit(additional, hint + "-value", depth + 1) : "json-value";
      std::string kv = key + " ws \":\" ws " + value + " ws";
      const std::string pairs =
          max_properties == 1 ? kv : kv + " ( \",\" ws " + kv + " )" + repeat(0, max_properties < 0 ? -1 : max_properties - 1);
      return rule(hint, "\"{\" ws " + (min_properties > 0 ? pairs : "( " + pairs + " )?") + " \"}\"");
    }
    if (!additional.is_boolean() && !(additional.is_object() && additional.empty()))
      unsupported("additionalProperties", "'additionalProperties' as a schema beside 'properties'");

    // Properties in the schema's order; optional ones may be skipped. after[i]: the properties
    // from i on once one was written (each needs a comma); first[i]: none written yet.
    const std::size_t k = props.size();
    std::vector<std::string> kv(k), after(k + 1, "\"\""), first(k + 1, "\"\"");
    for (std::size_t i = 0; i < k; ++i)
      kv[i] = literal(json(props[i].name)) + " ws \":\" ws " + visit(props[i].schema, hint + "-" + props[i].name, depth + 1) + " ws";
    for (std::size_t i = k; i-- > 0;) {
      std::string a = props[i].required ? "\",\" ws " + kv[i] + " " + after[i + 1]
                                        : "( \",\" ws " + kv[i] + " )? " + after[i + 1];
      after[i] = i + 1 == k ? (props[i].required ? "\",\" ws " + kv[i] : "( \",\" ws " + kv[i] + " )?") : rule(hint + "-after", a);
      std::string f = props[i].required ? kv[i] + " " + after[i + 1] : kv[i] + " " + after[i + 1] + " | " + first[i + 1];
      first[i] = rule(hint + "-first", f);
    }
    return rule(hint, "\"{\" ws " + first[0] + " \"}\"");
  }

  const json& root_;
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
