// JSON Schema -> GBNF (json_schema.h): one rule per object, array, string shape and $ref, over
// shared primitive rules. The converter is split along its seams (schema_converter.h); this file
// holds the rule table, the dispatch by keyword and type, and $ref.
#include "inferlab/grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "grammar/schema_converter.h"
#include "grammar/schema_references.h"

namespace inferlab {
namespace schema {
namespace {

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
relative-json-pointer ::= ( "0" | [1-9] [0-9]{0,8} ) ( "#" | json-pointer )
hostname ::= hostname-label ( "." hostname-label ){0,6}
hostname-label ::= [a-zA-Z0-9] ( "-"? [a-zA-Z0-9] ){0,15}
uri ::= uri-scheme ":" ( "//" uri-authority uri-abempty | "/" ( uri-pchar+ uri-abempty )? | uri-pchar+ uri-abempty | "" ) uri-tail
uri-reference ::= uri | ( "//" uri-authority uri-abempty | "/" ( uri-pchar+ uri-abempty )? | uri-nc+ uri-abempty | "" ) uri-tail
uri-scheme ::= [a-zA-Z] [a-zA-Z0-9+.\-]{0,15}
uri-authority ::= hostname ( ":" [0-9]{1,5} )?
uri-abempty ::= ( "/" uri-pchar* )*
uri-tail ::= ( "?" uri-query )? ( "#" uri-query )?
uri-query ::= ( uri-pchar | [/?] )*
uri-pchar ::= uri-nc | ":"
uri-nc ::= [a-zA-Z0-9._~!$&'()*+,;=@\-] | "%" [0-9a-fA-F]{2}
uri-template ::= ( [!#$&()*+,\-./0-9:;=?@A-Z\[\]_a-z~] | "%" [0-9a-fA-F]{2} | "{" [+#./;?&]? uri-template-var ( "," uri-template-var )* "}" )*
uri-template-var ::= [a-zA-Z0-9_]+ ( "." [a-zA-Z0-9_]+ )* ( ":" [1-9] [0-9]{0,3} | "*" )?
regex ::= regex-branch ( "|" regex-branch )*
regex-branch ::= "^"? ( regex-atom [*+?]? )* "$"?
regex-atom ::= [a-zA-Z0-9 _,:;!@#%&=<>'~\-] | "." | "\\\\" [dDwWsS.*+?()|^$] | "[" "^"? regex-class-item+ "]" | [(] regex [)]
regex-class-item ::= [a-zA-Z0-9 _] | "a-z" | "A-Z" | "0-9"
)";

}  // namespace

// The values a const / enum schema lists that its other keywords allow: 'type' keeps the values of
// its types, and lengths, counts, bounds and 'required' the values that meet them (checked here,
// value by value); any other keyword beside them is refused.
std::vector<json> listed_values(const json& schema) {
  for (const auto& [key, limit] : schema.items()) {
    if (kAnnotations.count(key) || key == "const" || key == "enum" || key == "type") continue;
    if (!value_satisfies(json(nullptr), key, limit))
      unsupported(key, fmt::format("'{}' beside 'const' / 'enum' (the listed values are written; '{}' is not checked "
                                   "against them)", key, key));
  }
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
  for (const auto& [key, limit] : schema.items()) {
    if (kAnnotations.count(key) || key == "const" || key == "enum" || key == "type") continue;
    std::vector<json> kept;
    for (const json& v : values)
      if (value_satisfies(v, key, limit).value_or(false)) kept.push_back(v);
    values = kept;
  }
  return values;
}

SchemaConverter::SchemaConverter(const json& root, const GrammarLimits& limits) : root_(resolve_references(root)), limits_(limits) {}

std::string SchemaConverter::convert(const std::string& name, bool primitives) {
  prefix_ = name;
  std::string top = visit(root_, name + "-value", 0);
  std::string out = name + " ::= " + top + "\n" + (primitives ? kPrimitives : "");
  for (const auto& [rule_name, body] : rules_) out += rule_name + " ::= " + body + "\n";
  if (out.size() > limits_.max_grammar_bytes)
    throw GrammarError(fmt::format("the schema's grammar is {} bytes; at most {} are accepted (--max-grammar-bytes)",
                                   out.size(), limits_.max_grammar_bytes));
  return out;
}

std::string SchemaConverter::rule(const std::string& hint, const std::string& body) {
  std::string name;
  for (char c : hint) name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-';
  if (name.empty()) name = "r";
  std::string unique = name;
  for (int i = 2; rules_.count(unique) || reserved_.count(unique); ++i) unique = fmt::format("{}-{}", name, i);
  rules_[unique] = body;
  return unique;
}

std::string SchemaConverter::reserve(const std::string& hint) {
  std::string unique = rule(hint, "");
  rules_.erase(unique);
  reserved_.insert(unique);
  return unique;
}

// For the rule generators (pattern_automaton.h, number_multiples.h).
RuleSink SchemaConverter::sink() {
  return {[this](const std::string& hint) { return reserve(hint); },
          [this](const std::string& name, const std::string& body) {
            reserved_.erase(name);
            rules_[name] = body;
          }};
}

std::string SchemaConverter::literal(const json& value) { return gbnf_literal(canonical(value).dump()); }

// A count: a non-negative integer, which JSON may write as 2.0 (draft 2020-12 allows it).
int SchemaConverter::bound(const json& schema, const char* key, int fallback) {
  if (!schema.contains(key)) return fallback;
  const json& v = schema[key];
  const bool integral = v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                                  std::floor(v.get<double>()) == v.get<double>());
  if (!integral || v.get<double>() < 0) unsupported(key, fmt::format("'{}' must be a non-negative integer", key));
  if (v.get<double>() > limits_.max_repetition)
    unsupported(key, fmt::format("'{}' is {}; at most {} can be enforced", key, v.dump(), limits_.max_repetition));
  return static_cast<int>(v.get<double>());
}

std::string SchemaConverter::visit(const json& schema, const std::string& hint, int depth) {
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
  // Before not / if: what those evaluate matters to unevaluated* (without_unevaluated reads them).
  if (schema.contains("unevaluatedProperties") || schema.contains("unevaluatedItems"))
    return visit(without_unevaluated(schema), hint, depth + 1);
  if (auto reduced = simplified(schema)) {
    if (*reduced == json(false))
      unsupported(schema.contains("not") ? "not" : "if", "'not' / 'if' leave a schema that no value matches");
    return visit(*reduced, hint, depth + 1);
  }
  for (const auto& [key, value] : schema.items())
    if (!kAnnotations.count(key) && !kEnforced.count(key)) unsupported(key, fmt::format("'{}' is not supported", key));

  // A keyword beside $ref applies too (draft 2020-12): the two are merged, as allOf parts are.
  if (schema.contains("$ref")) {
    bool siblings = false;
    for (const auto& [key, value] : schema.items()) siblings = siblings || (key != "$ref" && !kAnnotations.count(key));
    if (!siblings) return reference(schema["$ref"], depth);
    return visit(merged_all_of(json::array({schema})), hint, depth + 1);  // $ref and its siblings both apply
  }
  // (anyOf / oneOf first: beside const / enum, each option is merged with them.)
  for (const char* key : {"anyOf", "oneOf"})
    if (schema.contains(key)) return any_of(schema, key, hint, depth);
  if (schema.contains("const") || schema.contains("enum")) {
    const std::vector<json> values = listed_values(schema);
    if (values.empty()) unsupported(schema.contains("enum") ? "enum" : "const", "no value of 'const' / 'enum' is allowed beside the other keywords");
    std::string body;
    for (const json& v : values) body += (body.empty() ? "" : " | ") + literal(v);
    return values.size() == 1 ? literal(values[0]) : rule(hint, body);
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
const json* SchemaConverter::pointer_target(const std::string& pointer) const {
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
const json& SchemaConverter::ref_target(const json& ref) const {
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

std::string SchemaConverter::reference(const json& ref, int depth) {
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

}  // namespace schema

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const GrammarLimits& limits) {
  return schema::SchemaConverter(schema, limits).convert("root", true);
}

std::string json_schema_rules(const nlohmann::ordered_json& schema, const std::string& name, const GrammarLimits& limits) {
  return schema::SchemaConverter(schema, limits).convert(name, false);
}

std::string json_primitives_gbnf() { return schema::kPrimitives; }

std::string json_object_gbnf() { return std::string("root ::= json-object\n") + schema::kPrimitives; }

}  // namespace inferlab
