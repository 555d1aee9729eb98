#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "inferlab/grammar/json_schema.h"

namespace inferlab {
namespace {

using nlohmann::json;

std::string refused_keyword(const json& schema) {
  try {
    json_schema_to_gbnf(schema);
  } catch (const UnsupportedSchemaError& e) {
    EXPECT_NE(std::string(e.what()).find(e.keyword()), std::string::npos) << e.what();
    return e.keyword();
  }
  return "";
}

TEST(JsonSchema, UnsupportedKeywordsAreRefusedByName) {
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"integer","minimum":3})")), "minimum");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"number","maximum":10})")), "maximum");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"integer","multipleOf":2})")), "multipleOf");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})")), "uniqueItems");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"object","properties":{"a":{"type":"string","format":"hostname"}}})")), "format");
  EXPECT_EQ(refused_keyword(json::parse(R"({"not":{"type":"string"}})")), "not");
  EXPECT_EQ(refused_keyword(json::parse(R"({"$ref":"https://example.com/schema.json"})")), "$ref");
  EXPECT_EQ(refused_keyword(json::parse(R"({"allOf":[{"type":"string"},{"maxLength":3}]})")), "allOf");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"object","patternProperties":{"^a":{}}})")), "patternProperties");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"string","pattern":"(a)\\1"})")), "pattern");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"string","minimum":1})")), "minimum");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"string","maxItems":1})")), "maxItems");
}

TEST(JsonSchema, SupportedSchemasCompile) {
  for (const char* text : {R"({})", R"(true)", R"({"type":"string"})", R"({"type":["string","null"]})",
                           R"({"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991})",
                           R"({"type":"integer","minimum":0})", R"({"type":"number","minimum":0})", R"({"type":"integer","exclusiveMinimum":0})",
                           R"({"enum":[1,"a",null,{"b":[true]}]})", R"({"const":{"x":1}})",
                           R"({"type":"object","properties":{"a":{"type":"string","description":"d","title":"t"}},"required":["a"],"additionalProperties":false})",
                           R"({"$defs":{"n":{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}}}},"$ref":"#/$defs/n"})",
                           R"({"definitions":{"a":{"type":"integer"}},"type":"array","items":{"$ref":"#/definitions/a"},"minItems":1,"maxItems":3})"}) {
    EXPECT_NO_THROW({
      std::string g = json_schema_to_gbnf(json::parse(text));
      parse_gbnf(g);
    }) << text;
  }
}

TEST(JsonSchema, DepthAndSizeLimits) {
  json deep = {{"type", "string"}};
  for (int i = 0; i < 50; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_THROW(json_schema_to_gbnf(deep), GrammarError);
  GrammarLimits small;
  small.max_grammar_bytes = 200;
  EXPECT_THROW(json_schema_to_gbnf(json::parse(R"({"type":"string"})"), small), GrammarError);
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"array","maxItems":100000})")), "maxItems");
}

}  // namespace
}  // namespace inferlab
