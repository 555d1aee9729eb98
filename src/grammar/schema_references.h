// $id, $anchor and $ref within one JSON Schema document (draft 2020-12): every $ref is resolved
// against the base URI its place in the document has ($id scopes, RFC 3986 resolution), and
// rewritten as a JSON pointer from the document's root, so the converter follows pointers only.
// Nothing is ever fetched: a $ref naming a schema outside the document is kept, marked, for the
// converter to refuse by name. A $dynamicRef whose target the dynamic scope cannot change (no other
// schema in the document has the $dynamicAnchor it names) becomes a $ref; any other stays, refused.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace inferlab {

// Marks a $ref that names no schema in the document (the original text follows it).
inline constexpr char kUnresolvedRef = '!';

// The document with each $ref (in schema positions) as "#/json/pointer" from the root, or
// kUnresolvedRef + the original text; $dynamicRef read statically where that is exact.
nlohmann::ordered_json resolve_references(const nlohmann::ordered_json& root);

// RFC 3986 reference resolution (section 5.2), for the tests.
std::string resolve_uri(const std::string& base, const std::string& reference);

}  // namespace inferlab
