// Objects as GBNF: listed properties as a state machine over which were written, and the names
// none lists grouped by the patterns they match (schema_converter.h).
#include <algorithm>
#include <functional>
#include <tuple>

#include "grammar/pattern_automaton.h"
#include "grammar/schema_converter.h"

namespace inferlab::schema {

// The names an object may have and what each takes: 'properties' as listed, then required names
// they do not list, then the names of dependentRequired (each trigger, then the names it
// requires), written in that order, each optional unless required; then, in any order, the
// names none of those lists: those a patternProperties regex matches, and the rest under
// additionalProperties (for a map, a schema without properties or required, always; beside
// listed properties, only when additionalProperties is a schema: xgrammar's strict mode).
// A listed name that a pattern matches takes both schemas. The listed names are a state machine
// over which were written, so dependentRequired and minProperties / maxProperties hold exactly.
std::string SchemaConverter::object(const json& schema, const std::string& hint, int depth) {
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

}  // namespace inferlab::schema
