// allOf merged into one schema, anyOf / oneOf as alternatives (oneOf where its options provably
// exclude each other), and unevaluatedProperties / unevaluatedItems read as additionalProperties /
// items over what the schema evaluates (schema_converter.h).
#include <algorithm>
#include <deque>

#include "grammar/pattern_automaton.h"
#include "grammar/schema_converter.h"

namespace inferlab::schema {

// anyOf / oneOf: each option merged with the keywords beside it (a base schema), as allOf. An
// option false matches nothing, so it is never the one that matches.
std::string SchemaConverter::any_of(const json& schema, const char* key, const std::string& hint, int depth) {
  const json& given = schema[key];
  if (!given.is_array() || given.empty()) unsupported(key, fmt::format("'{}' must be a non-empty array", key));
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

// unevaluatedProperties / unevaluatedItems where what the schema evaluates does not depend on the
// value: its properties, patternProperties and prefixItems, with those of its allOf parts and
// $ref targets (read in place). Then unevaluatedProperties is additionalProperties over all of
// them (nothing, when some part has additionalProperties, which evaluates every property), and
// unevaluatedItems is items (nothing, when some part has items). anyOf, oneOf, if, not,
// dependentSchemas and contains make it depend on the value: refused.
json SchemaConverter::without_unevaluated(const json& schema) const {
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

// allOf (and $ref beside other keywords, which draft 2020-12 reads the same way) as one schema:
// the parts' keywords together where each is constrained by one part, or by several in a way
// that combines exactly: types intersect, required names unite, a property in two parts takes
// both schemas, items both schemas, bounds the tighter one, equal values stay. $ref and nested
// allOf parts are read through. Anything else is refused: a grammar enforcing one part only would
// accept values another part forbids.
json SchemaConverter::merged_all_of(const json& parts) const {
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

}  // namespace inferlab::schema
