#include "inferlab/lab/schema_check.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"

namespace inferlab::lab {
namespace {

using json = nlohmann::json;

const json kBook = json::parse(R"({
  "type": "object",
  "properties": {
    "title": {"type": "string", "minLength": 1, "maxLength": 5},
    "year": {"type": "integer", "minimum": 1900, "exclusiveMaximum": 2100},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
    "note": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/short"}]}
  },
  "required": ["title", "year"],
  "additionalProperties": false,
  "$defs": {"short": {"type": "string", "maxLength": 3}}
})");

TEST(SchemaCheck, AConformingValueHasNoViolations) {
  EXPECT_TRUE(schema_violations(kBook, json::parse(R"({"title": "Émile", "year": 1999, "tags": ["a"], "note": null})")).empty());
  EXPECT_TRUE(schema_violations(kBook, json::parse(R"({"year": 2000.0, "title": "x", "note": "abc"})")).empty());
}

TEST(SchemaCheck, EachViolationIsNamedWithItsPointer) {
  auto v = schema_violations(kBook, json::parse(R"({"title": "too long", "year": 2100, "tags": ["a", "c", "b"], "x": 1})"));
  ASSERT_EQ(v.size(), 5u) << json(v).dump();
  EXPECT_EQ(v[0], "/tags: 3 items, maxItems 2");
  EXPECT_EQ(v[1], "/tags/1: \"c\" is not one of [\"a\",\"b\"]");
  EXPECT_EQ(v[2], "/title: 8 characters, maxLength 5");
  EXPECT_EQ(v[3], "/x: not allowed by a false schema");
  EXPECT_EQ(v[4], "/year: 2100, exclusiveMaximum 2100");
  EXPECT_EQ(schema_violations(kBook, json::parse(R"({"title": "t"})")),
            std::vector<std::string>{"/: required property 'year' is missing"});
  EXPECT_EQ(schema_violations(kBook, json::parse(R"({"title": "t", "year": 1950.5})")),
            std::vector<std::string>{"/year: type number, schema wants \"integer\""});
  EXPECT_EQ(schema_violations(kBook, json::parse(R"({"title": "t", "year": 1950, "note": "long"})")),
            std::vector<std::string>{"/note: matches none of anyOf"});
  EXPECT_EQ(schema_violations(kBook, json::array()), std::vector<std::string>{"/: type array, schema wants \"object\""});
}

TEST(SchemaCheck, OneOfWantsExactlyOneAndConstIsCompared) {
  json schema = json::parse(R"({"oneOf": [{"type": "integer"}, {"type": "number"}], "not_checked_here": 1})");
  EXPECT_THROW(schema_violations(schema, 1), Error);  // an unknown keyword is refused, not ignored
  schema.erase("not_checked_here");
  EXPECT_EQ(schema_violations(schema, 1), std::vector<std::string>{"/: matches 2 of oneOf (exactly one wanted)"});
  EXPECT_TRUE(schema_violations(schema, 1.5).empty());
  EXPECT_TRUE(schema_violations(json{{"const", json{{"k", 1}}}}, json{{"k", 1}}).empty());
  EXPECT_EQ(schema_violations(json{{"const", "x"}}, "y"), std::vector<std::string>{"/: \"y\" is not \"x\""});
  EXPECT_THROW(schema_violations(json{{"type", "string"}, {"pattern", "a+"}}, "a"), Error);
  EXPECT_THROW(schema_violations(json{{"$ref", "#/$defs/none"}}, 1), Error);
}

}  // namespace
}  // namespace inferlab::lab
