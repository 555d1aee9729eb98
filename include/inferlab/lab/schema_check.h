// Checks a JSON value against a JSON Schema, written independently of the server's schema ->
// grammar compiler (src/grammar/json_schema.cpp) so that the measurement tools can tell when
// constrained decoding produced something the schema forbids. Draft 2020-12 semantics for the
// keywords structured outputs use: type (one or a list), enum, const, properties, required,
// additionalProperties (false or a schema), items, minItems, maxItems, minLength / maxLength
// (counted in code points), minimum, maximum, exclusiveMinimum, exclusiveMaximum, anyOf, oneOf
// (exactly one), allOf, $ref to "#", "#/$defs/..." or "#/definitions/...", and the annotations.
// A keyword it cannot check (pattern, format, ...) is an Error naming it: never a silent pass.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace inferlab::lab {

// Every way `value` breaks `schema`, each with the JSON pointer of the offending part
// ("/tags/2: 25 characters, maxLength 20"); empty when it conforms.
std::vector<std::string> schema_violations(const nlohmann::json& schema, const nlohmann::json& value);

}  // namespace inferlab::lab
