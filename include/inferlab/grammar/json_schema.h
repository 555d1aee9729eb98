// JSON Schema -> GBNF, for response_format json_schema and strict tools. Supported: type (one or
// a list), properties / required (emitted in the schema's order; optional ones may be left out),
// additionalProperties false (extra keys are never generated; an object with only
// additionalProperties is a map), enum, const, items / minItems / maxItems, minLength /
// maxLength, pattern (regex.h), format (date, time, date-time, uuid, email), anyOf / oneOf (oneOf
// read as anyOf), allOf of one schema, $ref to #, #/$defs/... and #/definitions/..., and the
// annotations (title, description, default, examples, ...). Any other keyword is refused with an
// UnsupportedSchemaError naming it: never a grammar that silently enforces less than the schema.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "inferlab/grammar/grammar.h"

namespace inferlab {

std::string json_schema_to_gbnf(const nlohmann::json& schema, const GrammarLimits& limits = {});

// The rules of one schema inside a larger grammar: its top rule is `name`, its helper rules are
// prefixed with it, and it uses the shared primitives of json_primitives_gbnf() (add those once).
std::string json_schema_rules(const nlohmann::json& schema, const std::string& name, const GrammarLimits& limits = {});
std::string json_primitives_gbnf();

// Any JSON value whose top level is an object (response_format json_object).
std::string json_object_gbnf();

}  // namespace inferlab
