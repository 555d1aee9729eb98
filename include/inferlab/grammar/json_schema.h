// JSON Schema -> GBNF, for response_format json_schema and strict tools. Supported: type (one or
// a list, each type under the keywords that apply to it; no type: the union of all six, as a
// keyword constrains only values of its own type), properties / required (written in the order
// 'properties' lists them, as OpenAI, xgrammar and llguidance do; a schema read into a sorted
// nlohmann::json has lost that order and gets sorted keys; optional ones may be left out),
// additionalProperties false or a schema (for a map, and beside properties for the names they do
// not list; unlisted properties are never generated unless the schema states additionalProperties
// or a patternProperties regex matches them: xgrammar's strict mode), patternProperties (names grouped by a
// DFA of the regexes, src/grammar/pattern_automaton.h), propertyNames of a map, dependentRequired
// (and dependentSchemas that only require names), minProperties / maxProperties (listed properties
// counted exactly as written; a map's pairs too, a minimum of at most 1 left to them), enum, const
// (2.0 written as 2; beside lengths, counts, bounds and required, the values that meet them),
// items / prefixItems / minItems / maxItems, uniqueItems (false; true over a
// few known item values: enum, const, boolean, null), contains / minContains, maxContains (where the
// complement of contains is a grammar: a type, one bound, a few known scalars), minLength /
// maxLength, minimum / maximum / exclusive* (any, on integers and numbers; bounded numbers are
// written without an exponent), multipleOf (digits modulo the step, src/grammar/number_multiples.h),
// pattern (regex.h), format (date, time, date-time, uuid, email, idn-email, ipv4, ipv6, duration,
// json-pointer, relative-json-pointer, hostname, idn-hostname, uri, iri, uri-reference, iri-reference,
// uri-template, regex: each a subset of its RFC's strings, asserted, as every grammar engine does),
// anyOf, oneOf whose options no value can match together (different types, different const
// values, a required property with different const values, or objects each requiring a name the
// other never writes; type by type where options overlap as wholes), keywords beside anyOf / oneOf
// merged into each option, $ref to a JSON pointer, an #anchor or an $id-based URI within the
// document (src/grammar/schema_references.h; other documents are never fetched), allOf (and $ref
// beside other keywords) merged into one schema where the parts combine exactly, not and if / then /
// else where they reduce to plain keywords (not of true, false, {}, a not, a type or one bound; if
// true or false, without branches, or over a condition not reduces), unevaluatedProperties /
// unevaluatedItems (additionalProperties / items over all that is listed; beside anyOf / oneOf / if,
// each outcome an alternative with what it evaluates), and the
// annotations (title, description, default, examples, content*, ...). Any other keyword is refused
// with an UnsupportedSchemaError naming it: never a grammar that silently enforces less than the
// schema (the official test suite checks it: tests/grammar/json_schema_suite.cpp).
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "inferlab/grammar/grammar.h"

namespace inferlab {

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const GrammarLimits& limits = {});

// The rules of one schema inside a larger grammar: its top rule is `name`, its helper rules are
// prefixed with it, and it uses the shared primitives of json_primitives_gbnf() (add those once).
std::string json_schema_rules(const nlohmann::ordered_json& schema, const std::string& name, const GrammarLimits& limits = {});
std::string json_primitives_gbnf();

// Any JSON value whose top level is an object (response_format json_object).
std::string json_object_gbnf();

}  // namespace inferlab
