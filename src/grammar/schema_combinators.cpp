// allOf merged into one schema, anyOf / oneOf as alternatives (oneOf where its options provably
// exclude each other), and unevaluatedProperties / unevaluatedItems read as additionalProperties /
// items over what the schema evaluates (schema_converter.h).
#include <algorithm>
#include <deque>
#include <functional>

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
  for (const json& option : given) {
    if (option == json(false)) continue;
    json merged = siblings ? merged_all_of(json::array({base, option})) : option;
    // An option whose listed values its other keywords all rule out matches nothing.
    if (merged.is_object() && (merged.contains("const") || merged.contains("enum")) && !merged.contains("anyOf") &&
        !merged.contains("oneOf") && listed_values(merged).empty())
      continue;
    options.push_back(std::move(merged));
  }
  if (options.empty()) unsupported(key, fmt::format("every '{}' option is false, so nothing matches", key));
  // oneOf allows a value that matches exactly one option: read as anyOf, the grammar would also
  // take a value matching two. Only options no value can match together are taken, type by type
  // where they do not exclude each other as wholes.
  auto overlapping = [](const std::vector<json>& list) -> std::optional<std::pair<std::size_t, std::size_t>> {
    for (std::size_t i = 0; i < list.size(); ++i)
      for (std::size_t j = i + 1; j < list.size(); ++j)
        if (!disjoint(list[i], list[j]) && !(writes_none_required_by(list[i], list[j]) && writes_none_required_by(list[j], list[i])))
          return std::pair{i, j};
    return std::nullopt;
  };
  if (std::string(key) == "oneOf") {
    const std::vector<json> all(options.begin(), options.end());
    std::vector<json> read;  // what each option says, through a $ref that is all it is (pydantic's unions of models)
    for (const json& option : all) read.push_back(through_refs(option));
    if (overlapping(read)) return one_of_by_type(all, hint, depth);
  }
  std::string body;
  for (std::size_t i = 0; i < options.size(); ++i)
    body += (i ? " | " : "") + visit(options[i], fmt::format("{}-{}", hint, i), depth + 1);
  return rule(hint, body);
}

namespace {

// The option for values of one type (its keywords of that type; an integer stays an integer).
json restricted(const json& option, const std::string& type) {
  if (!option.is_object()) return json{{"type", type}};
  json out = keywords_for(option, type);
  if (type == "number" && option.contains("type")) {
    const json& t = option["type"];
    const json list = t.is_array() ? t : json::array({t});
    const bool integer = std::find(list.begin(), list.end(), json("integer")) != list.end();
    if (integer && std::find(list.begin(), list.end(), json("number")) == list.end()) out["type"] = "integer";
  }
  return out;
}

// Whether every value of `type` matches the option: true, or only keywords of other types and a
// 'type' that names it.
bool allows_every(const json& option, const std::string& type) {
  if (option == json(true)) return true;
  if (!option.is_object()) return false;
  for (const auto& [key, value] : option.items()) {
    if (kAnnotations.count(key)) continue;
    if (key == "type") {
      const json list = value.is_array() ? value : json::array({value});
      if (std::find(list.begin(), list.end(), json(type)) == list.end()) return false;
      continue;
    }
    bool other_type = false;
    for (const auto& [owner, keys] : kKeywordsOfType) other_type = other_type || (owner != type && keys.count(key));
    if (!other_type) return false;
  }
  return true;
}

}  // namespace

// The schema an option says, through $refs that are all it is.
const json& SchemaConverter::through_refs(const json& option) const {
  const json* read = &option;
  for (int hops = 0; hops < 8 && read->is_object() && read->size() == 1 && read->contains("$ref"); ++hops) read = &ref_target((*read)["$ref"]);
  return *read;
}

// oneOf type by type: of the options allowing a type, two that allow every value of it leave no
// value of that type valid; one that does beside others that constrain it is refused (the rest would
// be a complement); otherwise the options must exclude each other within the type.
std::string SchemaConverter::one_of_by_type(const std::vector<json>& options, const std::string& hint, int depth) {
  std::string body;
  for (const char* type : kAllTypes) {
    std::vector<json> universal, partial;
    std::vector<std::size_t> universal_index, partial_index;
    for (std::size_t i = 0; i < options.size(); ++i) {
      const json& read = through_refs(options[i]);
      if (!value_types(read).count(type)) continue;
      const bool every = allows_every(read, type);
      (every ? universal : partial).push_back(restricted(read, type));
      (every ? universal_index : partial_index).push_back(i);
    }
    if (universal.size() >= 2) continue;  // every value of this type matches two options
    if (universal.size() == 1 && !partial.empty())
      unsupported("oneOf", fmt::format("'oneOf' option {} allows every {} and option {} some of them (the values valid "
                                       "under exactly one would be a complement the grammar cannot write)",
                                       universal_index[0], type, partial_index[0]));
    const std::vector<json>& here = universal.empty() ? partial : universal;
    const std::vector<std::size_t>& index = universal.empty() ? partial_index : universal_index;
    for (std::size_t i = 0; i < here.size(); ++i)
      for (std::size_t j = i + 1; j < here.size(); ++j)
        if (!disjoint(here[i], here[j]) && !(writes_none_required_by(here[i], here[j]) && writes_none_required_by(here[j], here[i])))
          unsupported("oneOf", fmt::format("'oneOf' options {} and {} may both match one value (the grammar cannot "
                                           "require exactly one; use anyOf, or options of different types or "
                                           "different const values)",
                                           index[i], index[j]));
    // Written as given (a $ref stays a reference to its rule), under this type only.
    for (std::size_t i = 0; i < here.size(); ++i) {
      const json& option = options[index[i]];
      const bool only_this_type = value_types(through_refs(option)) == std::set<std::string>{type};
      body += (body.empty() ? "" : " | ") +
              visit(only_this_type ? option : restricted(option, type), fmt::format("{}-{}-{}", hint, type, index[i]), depth + 1);
    }
  }
  if (body.empty()) unsupported("oneOf", "no value matches exactly one 'oneOf' option");
  return rule(hint, body);
}

// The parts a schema is the allOf of, for what unevaluated* sees: its own keywords, then what its
// $ref names, then its allOf parts, each read through the same way (as merged_all_of reads them).
// A part with an unevaluated* of its own is kept whole: what it sees is its own business (it is read
// within itself when merged), and it evaluates everything of that kind.
std::vector<json> SchemaConverter::evaluated_parts(const json& schema, const char* keyword) const {
  std::vector<json> out;
  int reads = 0;
  std::function<void(const json&, bool)> read = [&](const json& part, bool top) {
    if (++reads > 64) unsupported(keyword, fmt::format("'{}' over '$ref' / 'allOf' that refer to themselves", keyword));
    if (!part.is_object()) {
      out.push_back(part);
      return;
    }
    if (!top && (part.contains("unevaluatedProperties") || part.contains("unevaluatedItems"))) {
      out.push_back(part);
      return;
    }
    json own = part;
    own.erase("$ref");
    own.erase("allOf");
    out.push_back(own);
    if (part.contains("$ref")) read(ref_target(part["$ref"]), false);
    if (part.contains("allOf")) {
      if (!part["allOf"].is_array()) unsupported("allOf", "'allOf' must be a non-empty array");
      for (const json& p : part["allOf"]) read(p, false);
    }
  };
  read(schema, true);
  return out;
}

// unevaluatedProperties / unevaluatedItems where what the schema evaluates does not depend on the
// value, or depends on it only through anyOf / oneOf / if, which are read as alternatives that each
// know what they evaluate. What is evaluated: the properties, patternProperties and prefixItems of
// the schema, its allOf parts and $ref targets (read in place); everything, where some part has
// additionalProperties / items or an unevaluated* of its own. Then unevaluatedProperties is
// additionalProperties over all of them and unevaluatedItems is items. not, dependentSchemas and
// contains evaluate depending on the value in ways not read here: refused.
json SchemaConverter::without_unevaluated(const json& schema) const {
  const char* keyword = schema.contains("unevaluatedProperties") ? "unevaluatedProperties" : "unevaluatedItems";
  if (unevaluated_depth_ > 16) unsupported(keyword, fmt::format("'{}' nested through more than 16 '$ref' / applicators", keyword));
  // Alternatives multiply across applicators: a bound on the work, refused by name past it.
  if (++unevaluated_reads_ > 512)
    unsupported(keyword, fmt::format("'{}' beside applicators with more than 512 alternatives to read", keyword));
  struct Depth {
    int& d;
    explicit Depth(int& depth) : d(depth) { ++d; }
    ~Depth() { --d; }
  } depth(unevaluated_depth_);
  std::vector<std::string> kinds;
  for (const char* k : {"unevaluatedProperties", "unevaluatedItems"})
    if (schema.contains(k)) kinds.push_back(k);
  json rest = schema;
  rest.erase("unevaluatedProperties");
  rest.erase("unevaluatedItems");
  const std::vector<json> parts = evaluated_parts(rest, keyword);
  // The same schema as the allOf of `parts`, with the unevaluated* keywords.
  auto with_parts = [&](const std::vector<json>& p) {
    json out{{"allOf", p}};
    for (const std::string& k : kinds) out[k] = schema[k];
    return out;
  };

  // An applicator that evaluates depending on the value: each of its outcomes as an alternative,
  // with what that outcome evaluates. Sound for every alternative alone: the value matches the
  // schema with the properties that outcome evaluates, so none is left unevaluated.
  // (A part kept whole, with an unevaluated* of its own, reads its applicators itself when merged.)
  auto whole = [](const json& part) { return part.contains("unevaluatedProperties") || part.contains("unevaluatedItems"); };
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const json& part = parts[k];
    if (!part.is_object() || whole(part)) continue;
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!part.contains(key)) continue;
      if (!part[key].is_array() || part[key].empty()) unsupported(key, fmt::format("'{}' must be a non-empty array", key));
      json alternatives = json::array();
      for (const json& option : part[key]) {
        if (option == json(false)) continue;
        std::vector<json> p = parts;
        p[k].erase(key);
        p.push_back(option);
        alternatives.push_back(without_unevaluated(with_parts(p)));
      }
      if (alternatives.empty()) unsupported(key, fmt::format("every '{}' option is false, so nothing matches", key));
      // oneOf: the alternatives must still exclude each other (any_of checks it).
      return json{{key, alternatives}};
    }
    if (part.contains("if") && (part.contains("then") || part.contains("else"))) {
      const json condition = part["if"], then = part.value("then", json(true)), otherwise = part.value("else", json(true));
      std::vector<json> base = parts;
      base[k].erase("if"), base[k].erase("then"), base[k].erase("else");
      json alternatives = json::array();
      // Where the condition holds: its evaluations count, and 'then' applies.
      if (then != json(false) && !matches_nothing(condition)) {
        std::vector<json> p = base;
        p.push_back(condition);
        p.push_back(then);
        alternatives.push_back(without_unevaluated(with_parts(p)));
      }
      // Where it fails: 'else' applies, and the condition's evaluations do not count.
      if (otherwise != json(false)) {
        std::vector<json> p = base;
        p.push_back(otherwise);
        if (auto negated = negation(condition)) {
          if (!matches_nothing(*negated)) {
            p.push_back(*negated);
            alternatives.push_back(without_unevaluated(with_parts(p)));
          }
        } else {
          // A condition on objects only (it passes every other value), that every object this
          // alternative writes fails: it requires a name the alternative never writes.
          bool objects_only = condition.is_object() && !condition.contains("type");
          if (objects_only)
            for (const auto& [key, unused] : condition.items())
              objects_only = objects_only && (kAnnotations.count(key) || kKeywordsOfType.at("object").count(key));
          const json failing = without_unevaluated(with_parts(p));
          const json objects = keywords_for(failing, "object");
          if (!objects_only || !value_types(failing).count("object") || !writes_none_required_by(objects, condition))
            unsupported("if", fmt::format("'if' beside '{}' whose condition may hold or fail on one value written for "
                                          "'else' (only a negatable 'if', or one requiring a property that 'else' never "
                                          "writes, is read)", keyword));
          alternatives.push_back(objects);
        }
      }
      if (alternatives.empty()) unsupported("if", "'then' and 'else' both false: nothing matches");
      return alternatives.size() == 1 ? alternatives[0] : json{{"anyOf", alternatives}};
    }
  }

  bool all_properties = false, all_items = false;
  for (const json& part : parts) {
    if (!part.is_object()) continue;
    all_properties = all_properties || part.contains("unevaluatedProperties");
    all_items = all_items || part.contains("unevaluatedItems");
    if (whole(part)) continue;
    // (then / else without if apply nothing, and evaluate nothing; an if alone evaluates where it holds.)
    for (const char* k : {"if", "not", "dependentSchemas", "contains", "$dynamicRef"})
      if (part.contains(k))
        unsupported(keyword, fmt::format("'{}' beside '{}' (what it evaluates depends on the value)", keyword, k));
    all_properties = all_properties || part.contains("additionalProperties");
    all_items = all_items || part.contains("items");
  }
  json merged = merged_all_of(json::array({rest}));
  const std::set<std::string> types = value_types(merged);
  // The properties it lets through: every other one, where all are evaluated or it is true.
  if (schema.contains("unevaluatedProperties") && types.count("object") && !merged.contains("additionalProperties"))
    merged["additionalProperties"] = all_properties ? json(true) : schema["unevaluatedProperties"];
  // (items in the merged schema, from a part read within itself, evaluates every item past the prefix.)
  if (schema.contains("unevaluatedItems") && !all_items && !merged.contains("items") && schema["unevaluatedItems"] != json(true) &&
      types.count("array"))
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
    // A part's own unevaluated* sees only that part's evaluations: read within the part, as
    // additionalProperties / items over what the part evaluates.
    if (part.contains("unevaluatedProperties") || part.contains("unevaluatedItems")) {
      pending.push_front(without_unevaluated(part));
      continue;
    }
    // not / if read within their own part: an 'if' here and a 'then' in another part do not meet.
    if (auto reduced = simplified(part)) {
      if (*reduced == json(false)) unsupported(part.contains("not") ? "not" : "if", "'not' / 'if' leave a schema that no value matches");
      pending.push_front(*reduced);
      continue;
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
      // true allows every property name or value: the other part's schema is the whole constraint.
      if (key == "additionalProperties" || key == "propertyNames") {
        if (value == json(true)) continue;
        if (have == json(true)) {
          have = value;
          origin[key] = part_index;
          continue;
        }
      }
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
      } else if (key == "prefixItems" && have.is_array() && value.is_array()) {
        // Position by position both schemas; past the shorter list, the longer one's (no part has
        // items beside it: refused above).
        for (std::size_t i = 0; i < value.size(); ++i) {
          if (i >= have.size()) have.push_back(value[i]);
          else if (have[i] == json(true)) have[i] = value[i];
          else if (value[i] != json(true)) have[i] = json{{"allOf", json::array({have[i], value[i]})}};
        }
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
      json& props = out["properties"];
      if (c.additional == json(false)) {  // never written ('required' refuses it by name where it must be)
        props[name] = false;
        continue;
      }
      props[name] = props.contains(name) ? json{{"allOf", json::array({props[name], c.additional})}} : c.additional;
    }
  }
  // Beside const / enum, only the keywords a listed value is checked against (visit filters them).
  if (out.contains("const") || out.contains("enum"))
    for (const auto& [key, limit] : out.items())
      if (key != "const" && key != "enum" && key != "type" && key != "anyOf" && key != "oneOf" &&
          !value_satisfies(json(nullptr), key, limit))
        refuse(fmt::format("with 'const' / 'enum' in one part and '{}' in another", key));
  // additionalProperties covers the names its own part neither lists nor matches.
  if (out.contains("patternProperties") && out.contains("additionalProperties") && out["additionalProperties"] != json(true) &&
      origin["patternProperties"] != origin["additionalProperties"])
    refuse("with 'patternProperties' in one part and 'additionalProperties' in another");
  return out;
}

}  // namespace inferlab::schema
