#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "inferlab/grammar/grammar_matcher.h"
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
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"number","minimum":3.5,"maximum":3.25})")), "minimum");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"number","exclusiveMinimum":1,"exclusiveMaximum":1})")), "exclusiveMinimum");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"number","minimum":1e16})")), "minimum");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"integer","minimum":5,"maximum":4})")), "minimum");
  EXPECT_EQ(refused_keyword(json::parse(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})")), "oneOf");
  EXPECT_EQ(refused_keyword(json::parse(R"({"$ref":"#","maxItems":2})")), "$ref");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"number","maximum":-1e16})")), "maximum");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"number","multipleOf":0.5,"maximum":9})")), "multipleOf");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})")), "uniqueItems");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"object","properties":{"a":{"type":"string","format":"phone"}}})")), "format");
  EXPECT_EQ(refused_keyword(json::parse(R"({"not":{"type":"integer"}})")), "not");
  EXPECT_EQ(refused_keyword(json::parse(R"({"$ref":"https://example.com/schema.json"})")), "$ref");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"object","patternProperties":{"(?<=a)b":{}}})")), "patternProperties");
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
                           R"({"definitions":{"a":{"type":"integer"}},"type":"array","items":{"$ref":"#/definitions/a"},"minItems":1,"maxItems":3})",
                           R"({"allOf":[{"type":"string"},{"maxLength":3}]})"}) {
    EXPECT_NO_THROW({
      std::string g = json_schema_to_gbnf(json::parse(text));
      parse_gbnf(g);
    }) << text;
  }
}

// An integer's bounds are enforced digit by digit: every integer near and inside each range is
// accepted exactly when the schema allows it (zod's int().min(0).max(9) among them).
TEST(JsonSchema, IntegerRangesAcceptExactlyTheirIntegers) {
  std::vector<std::string> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  auto vocabulary = std::make_shared<const TokenVocabulary>(std::move(bytes));
  struct Range {
    const char* schema;
    int64_t lo, hi;  // inclusive
  };
  const Range ranges[] = {
      {R"({"type":"integer","minimum":0,"maximum":9})", 0, 9},
      {R"({"type":"integer","minimum":-17,"maximum":305})", -17, 305},
      {R"({"type":"integer","minimum":10,"maximum":99})", 10, 99},
      {R"({"type":"integer","minimum":-1200,"maximum":-35})", -1200, -35},
      {R"({"type":"integer","exclusiveMinimum":7,"exclusiveMaximum":1001})", 8, 1000},
      {R"({"type":"integer","minimum":1.5,"maximum":20.5})", 2, 20},
      {R"({"type":"integer","minimum":99,"maximum":99})", 99, 99},
      {R"({"type":"integer","minimum":190,"maximum":2009})", 190, 2009},
      {R"({"type":"integer","maximum":-3})", -999999999999999, -3},
      {R"({"type":"integer","minimum":42})", 42, 999999999999999},
  };
  for (const Range& r : ranges) {
    auto grammar = std::make_shared<CompiledGrammar>(parse_gbnf(json_schema_to_gbnf(json::parse(r.schema))), vocabulary);
    auto accepts = [&](int64_t n) {
      GrammarMatcher m(grammar);
      return m.accept_bytes(std::to_string(n)) && m.can_finish();
    };
    std::vector<int64_t> probes;
    for (int64_t n = -2100; n <= 2100; ++n) probes.push_back(n);
    for (int64_t edge : {r.lo, r.hi})
      for (int64_t d = -3; d <= 3; ++d) probes.push_back(edge + d);
    for (int64_t n : {int64_t{99999}, int64_t{-99999}, int64_t{123456789012345}, int64_t{-123456789012345}}) probes.push_back(n);
    for (int64_t n : probes) {
      if (n < -999999999999999 || n > 999999999999999) continue;
      EXPECT_EQ(accepts(n), n >= r.lo && n <= r.hi) << r.schema << " and " << n;
    }
    GrammarMatcher leading_zero(grammar);
    EXPECT_FALSE(leading_zero.accept_bytes("007") && leading_zero.can_finish()) << r.schema;
  }
}

// A number's bounds are enforced digit by digit on both sides of the point: every number from -3
// to 3 in steps of 0.001, written with as few fraction digits as it needs, with three, and with a
// trailing zero more, is accepted exactly when it lies within the bounds (z.number().min(0.5).max(1)).
TEST(JsonSchema, DecimalRangesAcceptExactlyTheirNumbers) {
  std::vector<std::string> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  auto vocabulary = std::make_shared<const TokenVocabulary>(std::move(bytes));
  struct Range {
    const char* schema;
    bool (*holds)(int64_t thousandths);
  };
  const Range ranges[] = {
      {R"({"type":"number","minimum":0.5,"maximum":1})", [](int64_t v) { return v >= 500 && v <= 1000; }},
      {R"({"type":"number","exclusiveMinimum":-1.25,"exclusiveMaximum":2.5})", [](int64_t v) { return v > -1250 && v < 2500; }},
      {R"({"type":"number","minimum":-2.05})", [](int64_t v) { return v >= -2050; }},
      {R"({"type":"number","exclusiveMaximum":-0.001})", [](int64_t v) { return v < -1; }},
      {R"({"type":"number","minimum":0.1,"maximum":0.1})", [](int64_t v) { return v == 100; }},
      {R"({"type":"number","exclusiveMinimum":0})", [](int64_t v) { return v > 0; }},
      {R"({"type":"number","minimum":1.999,"exclusiveMaximum":2.001})", [](int64_t v) { return v >= 1999 && v < 2001; }},
      {R"({"type":"number","minimum":-1,"exclusiveMinimum":-1,"maximum":1e-3})", [](int64_t v) { return v > -1000 && v <= 1; }},
      {R"({"type":"number","maximum":1e20,"minimum":-2.5e0})", [](int64_t v) { return v >= -2500; }},
  };
  for (const Range& r : ranges) {
    auto grammar = std::make_shared<CompiledGrammar>(parse_gbnf(json_schema_to_gbnf(json::parse(r.schema))), vocabulary);
    auto accepts = [&](const std::string& text) {
      GrammarMatcher m(grammar);
      return m.accept_bytes(text) && m.can_finish();
    };
    for (int64_t v = -3000; v <= 3000; ++v) {
      const int64_t magnitude = v < 0 ? -v : v;
      const std::string sign = v < 0 ? "-" : "", integer = std::to_string(magnitude / 1000);
      std::string three = std::to_string(magnitude % 1000);
      three = std::string(3 - three.size(), '0') + three;
      std::string shortest = three;
      shortest.erase(shortest.find_last_not_of('0') + 1);
      std::vector<std::string> texts = {sign + integer + "." + three, sign + integer + "." + three + "0"};
      texts.push_back(shortest.empty() ? sign + integer : sign + integer + "." + shortest);
      for (const std::string& text : texts) {
        if (text == "-0" || text.rfind("-0.000", 0) == 0) continue;  // -0: the grammar writes 0 without the sign
        EXPECT_EQ(accepts(text), r.holds(v)) << r.schema << " and " << text;
      }
    }
    EXPECT_FALSE(accepts("01.5")) << r.schema;
    EXPECT_FALSE(accepts("1e0")) << r.schema;  // bounded numbers are written without an exponent
  }
}

// allOf parts (and $ref beside other keywords) merge into one schema where they combine exactly;
// $ref takes any JSON pointer into the schema (~1, ~0, %XX) or an #anchor.
TEST(JsonSchema, AllOfMergesAndRefsResolve) {
  std::vector<std::string> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  auto vocabulary = std::make_shared<const TokenVocabulary>(std::move(bytes));
  auto accepts = [&](const char* schema, const std::string& text) {
    auto grammar = std::make_shared<CompiledGrammar>(parse_gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(schema))), vocabulary);
    GrammarMatcher m(grammar);
    return m.accept_bytes(text) && m.can_finish();
  };
  const char* inherited = R"({"$defs":{"Base":{"type":"object","properties":{"id":{"type":"integer","minimum":1}},"required":["id"]}},
    "allOf":[{"$ref":"#/$defs/Base"},{"properties":{"name":{"type":"string","maxLength":3}},"required":["name"]}]})";
  EXPECT_TRUE(accepts(inherited, R"({"id":1,"name":"abc"})"));
  EXPECT_FALSE(accepts(inherited, R"({"id":0,"name":"abc"})"));
  EXPECT_FALSE(accepts(inherited, R"({"id":1,"name":"abcd"})"));
  EXPECT_FALSE(accepts(inherited, R"({"id":1})"));
  EXPECT_FALSE(accepts(inherited, R"({"name":"abc","id":1})"));  // written in the parts' order
  const char* sibling = R"({"$defs":{"n":{"type":"integer","minimum":0}},"$ref":"#/$defs/n","maximum":9})";
  EXPECT_TRUE(accepts(sibling, "9"));
  EXPECT_FALSE(accepts(sibling, "10"));
  EXPECT_FALSE(accepts(sibling, "-1"));
  const char* both = R"({"properties":{"a":{"type":"integer","minimum":2}},"allOf":[{"properties":{"a":{"maximum":4}}}],"required":["a"]})";
  EXPECT_TRUE(accepts(both, R"({"a":3})"));
  EXPECT_FALSE(accepts(both, R"({"a":5})"));
  EXPECT_FALSE(accepts(both, R"({"a":1})"));
  EXPECT_TRUE(accepts(R"({"allOf":[{"type":["integer","string"]},{"type":"number"}]})", "7"));
  EXPECT_FALSE(accepts(R"({"allOf":[{"type":["integer","string"]},{"type":"number"}]})", "7.5"));
  EXPECT_TRUE(accepts(R"({"$defs":{"a/b~c":{"type":"integer"}},"$ref":"#/$defs/a~1b~0c"})", "5"));
  EXPECT_TRUE(accepts(R"({"$defs":{"a%b":{"type":"integer"}},"$ref":"#/$defs/a%25b"})", "5"));
  EXPECT_FALSE(accepts(R"({"$defs":{"A":{"$anchor":"num","type":"integer"}},"$ref":"#num"})", R"("x")"));
  EXPECT_TRUE(accepts(R"({"$defs":{"A":{"$anchor":"num","type":"integer"}},"$ref":"#num"})", "12"));
  EXPECT_TRUE(accepts(R"({"$defs":{"list":[{"type":"string"},{"type":"integer"}]},"$ref":"#/$defs/list/1"})", "3"));

  EXPECT_EQ(refused_keyword(json::parse(R"({"allOf":[{"type":"string","pattern":"a"},{"pattern":"b"}]})")), "allOf");
  EXPECT_EQ(refused_keyword(json::parse(R"({"allOf":[{"type":"string"},{"type":"integer"}]})")), "allOf");
  // A name one part's additionalProperties false forbids is never written: refused where it is required.
  EXPECT_EQ(refused_keyword(json::parse(
                R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},{"properties":{"b":{}},"required":["b"]}]})")),
            "required");
  const char* closed = R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},{"properties":{"b":{}}}]})";
  EXPECT_TRUE(accepts(closed, R"({"a":1})"));
  EXPECT_FALSE(accepts(closed, R"({"a":1,"b":2})"));
  EXPECT_EQ(refused_keyword(json::parse(R"({"allOf":[{"prefixItems":[{"minimum":3}]}],"items":{"minimum":5}})")), "allOf");
  EXPECT_EQ(refused_keyword(json::parse(R"({"$defs":{"r":{"allOf":[{"$ref":"#/$defs/r"}],"type":"object"}},"$ref":"#/$defs/r"})")), "$ref");
  EXPECT_EQ(refused_keyword(json::parse(R"({"$ref":"#/$defs/missing"})")), "$ref");
  EXPECT_EQ(refused_keyword(json::parse(R"({"$ref":"other.json#/a"})")), "$ref");
}

// minProperties / maxProperties: a map's pairs are counted (at most maxProperties; at least one
// under minProperties 1); listed properties are counted as they are written, exactly; a map minimum
// above 1 is refused by name (keys may repeat).
TEST(JsonSchema, PropertyCountBounds) {
  std::vector<std::string> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  auto vocabulary = std::make_shared<const TokenVocabulary>(std::move(bytes));
  struct Case {
    const char* schema;
    const char* document;
    bool accepted;
  };
  const Case cases[] = {
      {R"({"type":"object","maxProperties":2})", "{}", true},
      {R"({"type":"object","maxProperties":2})", R"({"a":1,"b":[2]})", true},
      {R"({"type":"object","maxProperties":2})", R"({"a":1,"b":2,"c":3})", false},
      {R"({"type":"object","maxProperties":1})", R"({"a":1})", true},
      {R"({"type":"object","maxProperties":1})", R"({"a":1,"b":2})", false},
      {R"({"type":"object","maxProperties":0})", "{}", true},
      {R"({"type":"object","maxProperties":0})", R"({"a":1})", false},
      {R"({"type":"object","minProperties":1})", "{}", false},
      {R"({"type":"object","minProperties":1})", R"({"a":null})", true},
      {R"({"type":"object","minProperties":1,"maxProperties":3,"additionalProperties":{"type":"integer"}})", R"({"a":1,"b":2,"c":3})", true},
      {R"({"type":"object","minProperties":1,"maxProperties":3,"additionalProperties":{"type":"integer"}})", R"({"a":1,"b":2,"c":3,"d":4})", false},
      {R"({"type":"object","minProperties":1,"maxProperties":3,"additionalProperties":{"type":"integer"}})", R"({"a":"x"})", false},
      {R"({"maxProperties":1})", "12", true},  // no type: a number ignores it
      {R"({"maxProperties":1})", R"({"a":1,"b":2})", false},
      {R"({"type":"object","properties":{"a":{},"b":{}},"required":["a"],"minProperties":1,"maxProperties":2})", R"({"a":1,"b":2})", true},
      {R"({"type":"object","properties":{"a":{},"b":{}},"required":["a"],"minProperties":1,"maxProperties":2})", R"({"b":2})", false},
      {R"({"type":"object","properties":{"a":{},"b":{}},"minProperties":1})", "{}", false},
      {R"({"type":"object","properties":{"a":{},"b":{}},"minProperties":1})", R"({"b":2})", true},
      {R"({"type":"object","properties":{"a":{},"b":{}},"maxProperties":1})", R"({"a":1,"b":2})", false},
      {R"({"type":"object","properties":{"a":{},"b":{}},"maxProperties":1})", R"({"a":1})", true},
  };
  for (const Case& c : cases) {
    auto grammar = std::make_shared<CompiledGrammar>(parse_gbnf(json_schema_to_gbnf(json::parse(c.schema))), vocabulary);
    GrammarMatcher m(grammar);
    EXPECT_EQ(m.accept_bytes(c.document) && m.can_finish(), c.accepted) << c.schema << " and " << c.document;
  }
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"object","minProperties":2})")), "minProperties");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"object","minProperties":1,"additionalProperties":false})")), "minProperties");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"object","minProperties":3,"maxProperties":2})")), "maxProperties");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"object","properties":{"a":{},"b":{}},"minProperties":3})")), "minProperties");
  EXPECT_EQ(refused_keyword(json::parse(R"({"type":"object","maxProperties":1.5})")), "maxProperties");
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
