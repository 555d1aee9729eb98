// The JSON Schema -> GBNF converter behind json_schema.h, split along its seams: the keyword tables
// and the reading of schemas without writing rules (schema_keywords.cpp), the dispatch and $ref
// (json_schema.cpp), allOf / anyOf / oneOf / if and unevaluated* (schema_combinators.cpp), objects
// (schema_objects.cpp), arrays (schema_arrays.cpp) and strings and numbers (schema_scalars.cpp).
// Internal to the grammar folder.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "inferlab/grammar/grammar.h"
#include "grammar/rule_sink.h"

namespace inferlab::schema {

// Ordered: properties are written in the order the schema lists them.
using json = nlohmann::ordered_json;

// Keywords that assert nothing (annotations), those that constrain one type of value, and every
// keyword the converter enforces.
extern const std::set<std::string> kAnnotations;
extern const std::map<std::string, std::set<std::string>> kKeywordsOfType;
extern const std::set<std::string> kEnforced;
extern const char* const kAllTypes[6];

// Refuses the schema by the keyword it cannot enforce (UnsupportedSchemaError).
[[noreturn]] void unsupported(const std::string& keyword, const std::string& why);

// The schema with only the keywords that apply to values of `type` (an integer is a number).
json keywords_for(const json& schema, const std::string& type);
// The JSON types a schema's values may have ("integer" counted as "number"); all six when it
// does not say.
std::set<std::string> value_types(const json& schema);
// The values a const / enum schema allows, or none when it does not fix them.
std::optional<std::vector<json>> fixed_values(const json& schema);
bool share_a_value(const std::vector<json>& a, const std::vector<json>& b);
// Whether no value can match both schemas, as far as can be told without solving them.
bool disjoint(const json& a, const json& b);
// Whether every object the grammar writes for `a` breaks `b` (b requires a name `a` never writes).
bool writes_none_required_by(const json& a, const json& b);
// A const / enum value as the grammar writes it (2.0 as 2).
json canonical(const json& value);
// A GBNF repetition suffix: *, {n}, {n,}, {n,m}.
std::string repeat(int min, int max);
bool known_dialect(const json& uri);
// Whether a known value meets one keyword (lengths, counts, bounds, required; a keyword of another
// type holds); none for a keyword not checked this way.
std::optional<bool> value_satisfies(const json& value, const std::string& keyword, const json& limit);
bool only_annotations(const json& schema);
// `not` where it reduces to a plain schema; none otherwise.
std::optional<json> negation(const json& negated);
bool matches_nothing(const json& schema);
// The schema with `not` and `if` / `then` / `else` read as plain keywords where they reduce.
std::optional<json> simplified(const json& schema);
// The least common multiple of two multipleOf steps; none past 15 digits.
std::optional<json> common_multiple(const json& a, const json& b);
// The values a const / enum schema lists that its other keywords allow (json_schema.cpp); refused by
// name beside a keyword not checked value by value.
std::vector<json> listed_values(const json& schema);
// The values a schema allows when they are few and known (const, enum, boolean, null).
std::optional<std::vector<json>> finite_values(const json& schema);

class SchemaConverter {
 public:
  SchemaConverter(const json& root, const GrammarLimits& limits);
  std::string convert(const std::string& name, bool primitives);

 private:
  // The rule table (json_schema.cpp).
  std::string rule(const std::string& hint, const std::string& body);
  std::string reserve(const std::string& hint);
  RuleSink sink();
  std::string literal(const json& value);
  int bound(const json& schema, const char* key, int fallback);

  // Dispatch and $ref (json_schema.cpp).
  std::string visit(const json& schema, const std::string& hint, int depth);
  const json* pointer_target(const std::string& pointer) const;
  const json& ref_target(const json& ref) const;
  std::string reference(const json& ref, int depth);

  // Combinators (schema_combinators.cpp).
  std::string any_of(const json& schema, const char* key, const std::string& hint, int depth);
  std::string one_of_by_type(const std::vector<json>& options, const std::string& hint, int depth);
  const json& through_refs(const json& option) const;
  json without_unevaluated(const json& schema) const;
  std::vector<json> evaluated_parts(const json& schema, const char* keyword) const;
  json merged_all_of(const json& parts) const;

  // Values of one type (schema_scalars.cpp, schema_arrays.cpp, schema_objects.cpp).
  std::string string(const json& schema, const std::string& hint);
  std::string number(const json& schema, bool integer);
  std::string multiples(const json& schema, bool integer);
  std::string unique_array(const json& schema, const std::string& hint);
  std::string containing(const json& schema, const std::string& hint, int depth, int need);
  std::string counted_containing(const json& schema, const std::string& hint, int depth, int min, int max);
  std::string other_values(const std::vector<json>& values, const std::string& hint);
  std::string array(const json& schema, const std::string& hint, int depth);
  std::string object(const json& schema, const std::string& hint, int depth);

  const json root_;  // with every $ref a pointer from the root (schema_references.h)
  const GrammarLimits& limits_;
  std::map<std::string, std::string> rules_;
  std::set<std::string> reserved_;
  std::map<std::string, std::string> refs_;
  std::string prefix_;
  mutable int unevaluated_depth_ = 0;  // without_unevaluated within itself (through applicators)
  mutable int unevaluated_reads_ = 0;  // without_unevaluated calls in this conversion
};

}  // namespace inferlab::schema
