// The JSON Schema keywords the compiler enforces through automata: multipleOf (digits modulo the
// step), patternProperties and additionalProperties beside properties (property names grouped by a
// DFA of the patterns), dependentRequired / dependentSchemas and minProperties / maxProperties over
// listed properties (a state machine over which were written), and $ref by $id / $anchor URIs.
// Each through the compiled grammar on bytes: valid documents accepted, invalid ones rejected.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <tuple>

#include <fmt/format.h>

#include "grammar/pattern_automaton.h"
#include "grammar/schema_references.h"
#include "inferlab/grammar/grammar_matcher.h"
#include "inferlab/grammar/json_schema.h"

namespace inferlab {
namespace {

using nlohmann::ordered_json;

bool accepts(const char* schema, const std::string& text) {
  static const auto vocabulary = [] {
    std::vector<std::string> bytes(256);
    for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
    return std::make_shared<const TokenVocabulary>(std::move(bytes));
  }();
  auto grammar = std::make_shared<CompiledGrammar>(parse_gbnf(json_schema_to_gbnf(ordered_json::parse(schema))), vocabulary);
  GrammarMatcher m(grammar);
  return m.accept_bytes(text) && m.can_finish();
}

std::string refused_keyword(const char* schema) {
  try {
    json_schema_to_gbnf(ordered_json::parse(schema));
  } catch (const UnsupportedSchemaError& e) {
    EXPECT_NE(std::string(e.what()).find(e.keyword()), std::string::npos) << e.what();
    return e.keyword();
  }
  return "";
}

TEST(JsonSchemaKeywords, MultipleOfIntegersExactly) {
  for (const auto& [schema, step] : {std::pair{R"({"type":"integer","multipleOf":3})", 3}, std::pair{R"({"type":"integer","multipleOf":7})", 7},
                                     std::pair{R"({"type":"integer","multipleOf":2.5})", 5}, std::pair{R"({"type":"number","multipleOf":4})", 4},
                                     std::pair{R"({"type":"integer","multipleOf":20})", 20}})
    for (int n = -130; n <= 130; ++n) EXPECT_EQ(accepts(schema, std::to_string(n)), n % step == 0) << schema << " and " << n;
  EXPECT_TRUE(accepts(R"({"type":"integer","multipleOf":3})", "123456789012345"));  // 15 digits, as integers are written
  EXPECT_FALSE(accepts(R"({"type":"integer","multipleOf":3})", "123456789012344"));
  EXPECT_FALSE(accepts(R"({"type":"integer","multipleOf":3})", "123456789012345678"));
  // A step too large to count digits for: its multiples' digits are not bounded.
  EXPECT_TRUE(accepts(R"({"type":"integer","multipleOf":37})", "37000000000000000000"));
  EXPECT_FALSE(accepts(R"({"type":"integer","multipleOf":37})", "37000000000000000001"));
  EXPECT_TRUE(accepts(R"({"type":"integer","multipleOf":37})", "-74"));
  EXPECT_FALSE(accepts(R"({"type":"integer","multipleOf":3})", "03"));
  EXPECT_FALSE(accepts(R"({"type":"integer","multipleOf":3})", "-0"));
  EXPECT_FALSE(accepts(R"({"type":"number","multipleOf":4})", "4.0"));  // written as an integer
  // Every integer is a multiple of 1e-8.
  EXPECT_TRUE(accepts(R"({"type":"integer","multipleOf":1e-8})", "12391239123"));
}

TEST(JsonSchemaKeywords, MultipleOfDecimals) {
  const char* half = R"({"type":"number","multipleOf":1.5})";
  for (const char* ok : {"0", "1.5", "3", "4.5", "-1.5", "-3", "30", "7.5", "0.0"}) EXPECT_TRUE(accepts(half, ok)) << ok;
  for (const char* bad : {"1", "35", "1.4", "0.5", "4.55", "1e1", "-0.75"}) EXPECT_FALSE(accepts(half, bad)) << bad;
  const char* cents = R"({"type":"number","multipleOf":0.01})";
  for (const char* ok : {"0", "1.25", "-19.99", "0.1", "100"}) EXPECT_TRUE(accepts(cents, ok)) << ok;
  for (const char* bad : {"1.255", "0.001", "1e-2"}) EXPECT_FALSE(accepts(cents, bad)) << bad;
  const char* small = R"({"type":"number","multipleOf":0.0001})";
  EXPECT_TRUE(accepts(small, "0.0075"));
  EXPECT_FALSE(accepts(small, "0.00751"));
}

TEST(JsonSchemaKeywords, MultipleOfWithSignBounds) {
  const char* natural = R"({"type":"integer","multipleOf":2,"minimum":0})";
  EXPECT_TRUE(accepts(natural, "0"));
  EXPECT_TRUE(accepts(natural, "14"));
  EXPECT_FALSE(accepts(natural, "-2"));
  const char* positive = R"({"type":"integer","multipleOf":5,"exclusiveMinimum":0})";
  EXPECT_FALSE(accepts(positive, "0"));
  EXPECT_TRUE(accepts(positive, "5"));
  EXPECT_FALSE(accepts(positive, "-5"));
  const char* negative = R"({"type":"number","multipleOf":0.5,"maximum":0})";
  EXPECT_TRUE(accepts(negative, "-0.5"));
  EXPECT_TRUE(accepts(negative, "0"));
  EXPECT_FALSE(accepts(negative, "0.5"));
  // allOf: a multiple of both steps is one of their least common multiple.
  const char* both = R"({"type":"integer","allOf":[{"multipleOf":4},{"multipleOf":6}]})";
  EXPECT_TRUE(accepts(both, "24"));
  EXPECT_TRUE(accepts(both, "-12"));
  EXPECT_FALSE(accepts(both, "8"));

  // Other bounds on integers: the range digit by digit together with the remainder.
  for (const auto& [schema, lo, hi, step] : {std::tuple{R"({"type":"integer","multipleOf":5,"minimum":0,"maximum":100})", 0, 100, 5},
                                             std::tuple{R"({"type":"integer","multipleOf":3,"minimum":-47,"maximum":61})", -47, 61, 3},
                                             std::tuple{R"({"type":"integer","multipleOf":7,"exclusiveMinimum":13})", 14, 999, 7},
                                             std::tuple{R"({"type":"number","multipleOf":4,"maximum":-9})", -999, -9, 4}})
    for (int n = -150; n <= 150; ++n)
      EXPECT_EQ(accepts(schema, std::to_string(n)), n >= lo && n <= hi && n % step == 0) << schema << " and " << n;
  EXPECT_FALSE(accepts(R"({"type":"integer","multipleOf":5,"minimum":0,"maximum":100})", "105"));
  EXPECT_FALSE(accepts(R"({"type":"integer","multipleOf":5,"minimum":0,"maximum":100})", "1000"));
  EXPECT_EQ(refused_keyword(R"({"type":"integer","multipleOf":997,"minimum":1})"), "multipleOf");
  EXPECT_EQ(refused_keyword(R"({"type":"integer","multipleOf":10,"minimum":1,"maximum":9})"), "multipleOf");
  EXPECT_EQ(refused_keyword(R"({"type":"number","multipleOf":0.5,"minimum":1})"), "multipleOf");
  EXPECT_EQ(refused_keyword(R"({"type":"integer","multipleOf":1000003})"), "multipleOf");
  EXPECT_EQ(refused_keyword(R"({"type":"integer","multipleOf":0.123456789})"), "multipleOf");
  EXPECT_EQ(refused_keyword(R"({"type":"number","multipleOf":0})"), "multipleOf");
  EXPECT_EQ(refused_keyword(R"({"type":"number","multipleOf":-2})"), "multipleOf");
  EXPECT_EQ(refused_keyword(R"({"type":"number","multipleOf":0.5,"exclusiveMinimum":0})"), "multipleOf");
}

TEST(JsonSchemaKeywords, PatternDfaSearchesWithEcmaScriptClasses) {
  const GrammarLimits limits;
  EXPECT_TRUE(PatternDfa::compile("f.*o", limits).matches("xxfoo"));
  EXPECT_FALSE(PatternDfa::compile("f.*o", limits).matches("fxx"));
  EXPECT_TRUE(PatternDfa::compile("^a+$", limits).matches("aaa"));
  EXPECT_FALSE(PatternDfa::compile("^a+$", limits).matches("aab"));
  EXPECT_FALSE(PatternDfa::compile("^a.c$", limits).matches("a\nc"));  // . stops at line terminators
  EXPECT_FALSE(PatternDfa::compile("^a.c$", limits).matches("a\u2028c"));
  EXPECT_TRUE(PatternDfa::compile("^a.c$", limits).matches("a\u00e9c"));  // one code point
  EXPECT_TRUE(PatternDfa::compile("^\\s$", limits).matches("\u00a0"));
  EXPECT_TRUE(PatternDfa::compile("^x|y$", limits).matches("xz"));  // ^ binds to x only
  EXPECT_TRUE(PatternDfa::compile("^x|y$", limits).matches("zy"));
  EXPECT_FALSE(PatternDfa::compile("^x|y$", limits).matches("zyz"));
  EXPECT_TRUE(PatternDfa::compile("[0-9]{2,}", limits).matches("a12"));
  EXPECT_FALSE(PatternDfa::compile("[0-9]{2,}", limits).matches("a1b2"));
  EXPECT_THROW(PatternDfa::compile("(?=a)", limits), GrammarError);
  EXPECT_THROW(PatternDfa::compile("\\p{Letter}", limits), GrammarError);
  EXPECT_THROW(PatternDfa::compile("(a)\\1", limits), GrammarError);
}

TEST(JsonSchemaKeywords, PatternProperties) {
  const char* closed = R"({"type":"object","patternProperties":{"^x-":{"type":"integer"}},"additionalProperties":false})";
  EXPECT_TRUE(accepts(closed, "{}"));
  EXPECT_TRUE(accepts(closed, R"({"x-a":1,"x-b":2})"));
  EXPECT_FALSE(accepts(closed, R"({"x-a":"s"})"));
  EXPECT_FALSE(accepts(closed, R"({"y":1})"));
  const char* open = R"({"type":"object","patternProperties":{"^x-":{"type":"integer"}}})";
  EXPECT_TRUE(accepts(open, R"({"y":"s","x-a":1})"));
  EXPECT_FALSE(accepts(open, R"({"x-a":"s"})"));
  EXPECT_FALSE(accepts(open, R"({"x\u002da":"s"})"));  // an escaped '-' cannot smuggle x-a past its pattern
  EXPECT_TRUE(accepts(open, R"({"a\nb":null})"));
  // Beside listed properties: those first, in order; the pattern's names after them.
  const char* mixed = R"({"type":"object","properties":{"id":{"type":"integer"}},"patternProperties":{"^x-":{"type":"string"}},
                          "additionalProperties":false})";
  EXPECT_TRUE(accepts(mixed, R"({"id":1,"x-n":"a"})"));
  EXPECT_FALSE(accepts(mixed, R"({"id":1,"other":2})"));
  EXPECT_FALSE(accepts(mixed, R"({"id":1,"id":2})"));
  // A listed name the pattern matches takes both schemas.
  const char* both = R"({"type":"object","properties":{"x-id":{"maxLength":2}},"patternProperties":{"^x-":{"type":"string"}}})";
  EXPECT_TRUE(accepts(both, R"({"x-id":"ab"})"));
  EXPECT_FALSE(accepts(both, R"({"x-id":5})"));
  EXPECT_FALSE(accepts(both, R"({"x-id":"abc"})"));
  // A name matching a pattern whose schema is false may not appear.
  const char* banned = R"({"type":"object","patternProperties":{"f.*":true,"b.*":false}})";
  EXPECT_TRUE(accepts(banned, R"({"foo":1})"));
  EXPECT_FALSE(accepts(banned, R"({"bar":1})"));
  EXPECT_FALSE(accepts(banned, R"({"foobar":1})"));

  EXPECT_EQ(refused_keyword(R"x({"type":"object","patternProperties":{"(?=a)":{}}})x"), "patternProperties");
  EXPECT_EQ(refused_keyword(R"({"type":"object","patternProperties":{"^\\p{Letter}+$":{}}})"), "patternProperties");
  EXPECT_EQ(refused_keyword(R"({"type":"object","patternProperties":{"^a":{}},"propertyNames":{"maxLength":3}})"), "propertyNames");
}

TEST(JsonSchemaKeywords, AdditionalPropertiesBesideProperties) {
  const char* schema = R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})";
  EXPECT_TRUE(accepts(schema, R"({"a":1,"b":true,"c":false})"));
  EXPECT_TRUE(accepts(schema, R"({"b":true})"));
  EXPECT_FALSE(accepts(schema, R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(schema, R"({"a":1,"a":true})"));  // a listed name is not an additional one
  // additionalProperties true stated beside properties: other names too; beside so many listed
  // names that their automaton would outgrow the grammar, those are left out (strict mode).
  EXPECT_TRUE(accepts(R"({"type":"object","properties":{"a":{}},"additionalProperties":true})", R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(R"({"type":"object","properties":{"a":{}}})", R"({"a":1,"b":2})"));
  nlohmann::ordered_json many = {{"type", "object"}, {"additionalProperties", true}, {"properties", nlohmann::ordered_json::object()}};
  for (int i = 0; i < 40; ++i) many["properties"][fmt::format("p{}_with_a_long_name", i)] = {{"type", "integer"}};
  const std::string many_text = many.dump();
  EXPECT_TRUE(accepts(many_text.c_str(), R"({"p3_with_a_long_name":1})"));
  EXPECT_FALSE(accepts(many_text.c_str(), R"({"other":1})"));
  const char* falsy = R"({"type":"object","properties":{"foo":true,"bar":false}})";
  EXPECT_TRUE(accepts(falsy, R"({"foo":1})"));
  EXPECT_FALSE(accepts(falsy, R"({"bar":1})"));
}

TEST(JsonSchemaKeywords, DependentRequired) {
  const char* card = R"({"type":"object","properties":{"card":{"type":"string"},"billing":{"type":"string"}},
                         "dependentRequired":{"card":["billing"]}})";
  EXPECT_TRUE(accepts(card, "{}"));
  EXPECT_TRUE(accepts(card, R"({"billing":"b"})"));
  EXPECT_TRUE(accepts(card, R"({"card":"c","billing":"b"})"));
  EXPECT_FALSE(accepts(card, R"({"card":"c"})"));
  const char* earlier = R"({"type":"object","properties":{"billing":{},"card":{}},"dependentRequired":{"card":["billing"]}})";
  EXPECT_TRUE(accepts(earlier, R"({"billing":1,"card":2})"));
  EXPECT_FALSE(accepts(earlier, R"({"card":2})"));
  // On a map: the names it mentions first, in its order, then any others.
  const char* map = R"({"type":"object","dependentRequired":{"bar":["foo"]}})";
  EXPECT_TRUE(accepts(map, R"({"bar":1,"foo":2})"));
  EXPECT_TRUE(accepts(map, R"({"bar":1,"foo":2,"baz":3})"));
  EXPECT_TRUE(accepts(map, R"({"baz":1})"));
  EXPECT_FALSE(accepts(map, R"({"bar":1})"));
  EXPECT_FALSE(accepts(map, R"({"bar":1,"baz":3})"));
  const char* schemas = R"({"type":"object","properties":{"a":{},"b":{}},"dependentSchemas":{"a":{"required":["b"]},"c":false}})";
  EXPECT_TRUE(accepts(schemas, R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(schemas, R"({"a":1})"));
  EXPECT_EQ(refused_keyword(R"({"type":"object","dependentSchemas":{"a":{"properties":{"b":{"type":"integer"}}}}})"),
            "dependentSchemas");
  EXPECT_EQ(refused_keyword(R"({"type":"object","required":["a"],"dependentRequired":{"a":["b"]},"properties":{"b":false}})"),
            "dependentRequired");
}

TEST(JsonSchemaKeywords, PropertyCountsOverListedProperties) {
  const char* two = R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"minProperties":2,"maxProperties":2})";
  EXPECT_TRUE(accepts(two, R"({"a":1,"b":2})"));
  EXPECT_TRUE(accepts(two, R"({"b":1,"c":2})"));
  EXPECT_FALSE(accepts(two, R"({"a":1})"));
  EXPECT_FALSE(accepts(two, R"({"a":1,"b":2,"c":3})"));
  // With additional names: one of them may make up the minimum (its name cannot repeat a listed one);
  // two could repeat each other, so a minimum that needs two is refused.
  const char* more = R"({"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":{"type":"integer"},"minProperties":2})";
  EXPECT_TRUE(accepts(more, R"({"a":1,"x":2})"));
  EXPECT_FALSE(accepts(more, R"({"a":1})"));
  EXPECT_EQ(refused_keyword(R"({"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":{"type":"integer"},"minProperties":3})"),
            "minProperties");
  EXPECT_TRUE(accepts(R"({"type":"object","maxProperties":2.0})", R"({"a":1,"b":2})"));  // counts may be written 2.0
  EXPECT_FALSE(accepts(R"({"type":"object","maxProperties":2.0})", R"({"a":1,"b":2,"c":3})"));
}

TEST(JsonSchemaKeywords, ReferencesByIdAndAnchor) {
  EXPECT_EQ(resolve_uri("http://a/b/c/d;p?q", "g"), "http://a/b/c/g");
  EXPECT_EQ(resolve_uri("http://a/b/c/d;p?q", "./g"), "http://a/b/c/g");
  EXPECT_EQ(resolve_uri("http://a/b/c/d;p?q", "../g"), "http://a/b/g");
  EXPECT_EQ(resolve_uri("http://a/b/c/d;p?q", "../../g"), "http://a/g");
  EXPECT_EQ(resolve_uri("http://a/b/c/d;p?q", "/g"), "http://a/g");
  EXPECT_EQ(resolve_uri("http://a/b/c/d;p?q", "//g"), "http://g");
  EXPECT_EQ(resolve_uri("http://a/b/c/d;p?q", "?y"), "http://a/b/c/d;p?y");
  EXPECT_EQ(resolve_uri("http://a/b/c/d;p?q", "#s"), "http://a/b/c/d;p?q#s");
  EXPECT_EQ(resolve_uri("http://a/b/c/d;p?q", "g/"), "http://a/b/c/g/");
  EXPECT_EQ(resolve_uri("urn:example:root", "#/a"), "urn:example:root#/a");

  const char* items = R"({"$id":"http://example.com/root.json","$defs":{"A":{"$id":"item.json","type":"integer"}},
                          "type":"array","items":{"$ref":"item.json"}})";
  EXPECT_TRUE(accepts(items, "[1,2]"));
  EXPECT_FALSE(accepts(items, R"(["a"])"));
  // A pointer fragment is read from the schema its URI names, not from the root.
  const char* nested = R"({"$id":"http://example.com/a/","type":"object","properties":{"x":{"$ref":"b/c.json#/$defs/n"}},
                           "$defs":{"c":{"$id":"b/c.json","$defs":{"n":{"type":"string"}}}}})";
  EXPECT_TRUE(accepts(nested, R"({"x":"s"})"));
  EXPECT_FALSE(accepts(nested, R"({"x":1})"));
  const char* anchor = R"({"$id":"urn:example:root","$ref":"urn:example:root#num","$defs":{"N":{"$anchor":"num","type":"integer"}}})";
  EXPECT_TRUE(accepts(anchor, "12"));
  EXPECT_FALSE(accepts(anchor, R"("x")"));
  // Within a subschema with its own $id, "#/..." is that subschema's.
  const char* scoped = R"({"$id":"http://example.com/r.json","type":"object","properties":{"p":{"$id":"p.json",
                           "$defs":{"inner":{"type":"boolean"}},"$ref":"#/$defs/inner"}}})";
  EXPECT_TRUE(accepts(scoped, R"({"p":true})"));
  EXPECT_FALSE(accepts(scoped, R"({"p":1})"));

  EXPECT_EQ(refused_keyword(R"({"$id":"http://example.com/root.json","$ref":"other.json"})"), "$ref");
  EXPECT_EQ(refused_keyword(R"({"$ref":"https://json-schema.org/draft/2020-12/schema"})"), "$ref");
}

TEST(JsonSchemaKeywords, BooleanOptionsAndBaseSchemas) {
  EXPECT_TRUE(accepts(R"({"anyOf":[true,false]})", R"("x")"));
  EXPECT_EQ(refused_keyword(R"({"anyOf":[false,false]})"), "anyOf");
  EXPECT_TRUE(accepts(R"({"oneOf":[true,false,false]})", "1"));
  EXPECT_EQ(refused_keyword(R"({"oneOf":[true,true]})"), "oneOf");
  // Keywords beside anyOf apply to every option.
  const char* base = R"({"type":"string","anyOf":[{"maxLength":2},{"minLength":4}]})";
  EXPECT_TRUE(accepts(base, R"("ab")"));
  EXPECT_TRUE(accepts(base, R"("abcd")"));
  EXPECT_FALSE(accepts(base, R"("abc")"));
  EXPECT_FALSE(accepts(base, "1"));
  // oneOf of objects that each require a name the other never writes.
  const char* pay = R"({"oneOf":[{"type":"object","properties":{"card":{"type":"string"}},"required":["card"]},
                                  {"type":"object","properties":{"iban":{"type":"string"}},"required":["iban"]}]})";
  EXPECT_TRUE(accepts(pay, R"({"card":"x"})"));
  EXPECT_TRUE(accepts(pay, R"({"iban":"y"})"));
  EXPECT_FALSE(accepts(pay, R"({"card":"x","iban":"y"})"));
  EXPECT_EQ(refused_keyword(R"({"oneOf":[{"type":"object","properties":{"a":{},"b":{}},"required":["a"]},
                                         {"type":"object","properties":{"b":{}},"required":["b"]}]})"), "oneOf");
  // prefixItems false: no item there, so the array ends before it.
  EXPECT_TRUE(accepts(R"({"prefixItems":[true,false]})", "[1]"));
  EXPECT_FALSE(accepts(R"({"prefixItems":[true,false]})", "[1,2]"));
}

// not and if / then / else where they reduce to plain keywords; refused by name otherwise.
TEST(JsonSchemaKeywords, NotAndIfWhereTheyReduce) {
  const char* other = R"({"not":{"type":["string","null"]}})";
  EXPECT_TRUE(accepts(other, "1.5"));
  EXPECT_TRUE(accepts(other, "[]"));
  EXPECT_FALSE(accepts(other, R"("s")"));
  EXPECT_FALSE(accepts(other, "null"));
  EXPECT_TRUE(accepts(R"({"not":false})", R"({"a":1})"));
  EXPECT_TRUE(accepts(R"({"not":{"not":{}}})", "3"));
  const char* forbidden = R"({"type":"object","properties":{"foo":{"not":{}},"bar":{}}})";
  EXPECT_TRUE(accepts(forbidden, R"({"bar":1})"));
  EXPECT_FALSE(accepts(forbidden, R"({"foo":1})"));
  EXPECT_TRUE(accepts(R"({"if":{"const":0}})", R"("x")"));  // if alone applies nothing
  EXPECT_TRUE(accepts(R"({"then":{"const":0}})", R"("x")"));
  EXPECT_TRUE(accepts(R"({"if":true,"then":{"const":"then"},"else":{"const":"else"}})", R"("then")"));
  EXPECT_FALSE(accepts(R"({"if":true,"then":{"const":"then"},"else":{"const":"else"}})", R"("else")"));
  EXPECT_TRUE(accepts(R"({"if":false,"then":{"const":"then"},"else":{"const":"else"}})", R"("else")"));
  EXPECT_EQ(refused_keyword(R"({"not":{"type":"integer"}})"), "not");
  EXPECT_EQ(refused_keyword(R"({"not":{"multipleOf":3}})"), "not");
  EXPECT_EQ(refused_keyword(R"({"not":{}})"), "not");
  EXPECT_EQ(refused_keyword(R"({"if":{"const":1},"then":false})"), "if");
}

TEST(JsonSchemaKeywords, MoreFormats) {
  const char* ip = R"({"type":"string","format":"ipv4"})";
  for (const char* ok : {R"("192.168.0.1")", R"("0.0.0.0")", R"("255.255.255.255")"}) EXPECT_TRUE(accepts(ip, ok)) << ok;
  for (const char* bad : {R"("256.1.1.1")", R"("087.10.0.1")", R"("1.2.3")", R"("1.2.3.4.5")"}) EXPECT_FALSE(accepts(ip, bad)) << bad;
  const char* pointer = R"({"type":"string","format":"json-pointer"})";
  for (const char* ok : {R"("")", R"("/foo/0")", R"("/a~1b/m~0n")", R"("/")"}) EXPECT_TRUE(accepts(pointer, ok)) << ok;
  for (const char* bad : {R"("foo")", R"("/a~2")", R"("/a~")"}) EXPECT_FALSE(accepts(pointer, bad)) << bad;
  const char* ip6 = R"({"type":"string","format":"ipv6"})";
  for (const char* ok : {R"("::1")", R"("::")", R"("fe80::1:2")", R"("1:2:3:4:5:6:7:8")", R"("::ffff:192.168.0.1")", R"("1::8")"})
    EXPECT_TRUE(accepts(ip6, ok)) << ok;
  for (const char* bad : {R"("1:2:3:4:5:6:7:8:9")", R"("1::2::3")", R"("12345::")", R"(":1")", R"("g::")"}) EXPECT_FALSE(accepts(ip6, bad)) << bad;
  const char* duration = R"({"type":"string","format":"duration"})";
  for (const char* ok : {R"("P4DT12H30M5S")", R"("P1Y2M")", R"("PT36H")", R"("P2W")", R"("P1D")"}) EXPECT_TRUE(accepts(duration, ok)) << ok;
  for (const char* bad : {R"("P")", R"("PT")", R"("P1Y2W")", R"("P1H")", R"("PT1D")", R"("P1S")"}) EXPECT_FALSE(accepts(duration, bad)) << bad;
}

// unevaluated* where what is evaluated does not depend on the value: additionalProperties / items
// over everything the schema and its allOf parts and $ref targets list.
TEST(JsonSchemaKeywords, UnevaluatedWhereStatic) {
  const char* nested = R"({"type":"object","properties":{"foo":{"type":"string"}},"allOf":[{"properties":{"bar":{"type":"string"}}}],
                           "unevaluatedProperties":false})";
  EXPECT_TRUE(accepts(nested, R"({"foo":"a","bar":"b"})"));
  EXPECT_FALSE(accepts(nested, R"({"foo":"a","bar":"b","baz":"c"})"));
  const char* values = R"({"type":"object","unevaluatedProperties":{"type":"string","minLength":3}})";
  EXPECT_TRUE(accepts(values, R"({"a":"abc"})"));
  EXPECT_FALSE(accepts(values, R"({"a":"ab"})"));
  const char* tuple = R"({"type":"array","prefixItems":[{"type":"string"}],"unevaluatedItems":false})";
  EXPECT_TRUE(accepts(tuple, R"(["a"])"));
  EXPECT_FALSE(accepts(tuple, R"(["a","b"])"));
  EXPECT_TRUE(accepts(R"({"items":{"type":"number"},"unevaluatedItems":{"type":"string"}})", "[1,2]"));
  EXPECT_EQ(refused_keyword(R"({"properties":{"a":{}},"not":{"required":["b"]},"unevaluatedProperties":false})"),
            "unevaluatedProperties");
  EXPECT_EQ(refused_keyword(R"({"if":{"patternProperties":{"foo":{"type":"string"}}},"unevaluatedProperties":false})"),
            "unevaluatedProperties");
}

// contains / minContains: at least that many items match, every item matches items.
TEST(JsonSchemaKeywords, Contains) {
  const char* five = R"({"type":"array","contains":{"type":"integer","minimum":5}})";
  EXPECT_TRUE(accepts(five, "[3,4,5]"));
  EXPECT_TRUE(accepts(five, "[7]"));
  EXPECT_FALSE(accepts(five, "[2,3,4]"));
  EXPECT_FALSE(accepts(five, "[]"));
  const char* both = R"({"type":"array","items":{"type":"integer","multipleOf":2},"contains":{"multipleOf":3}})";
  EXPECT_TRUE(accepts(both, "[2,6,8]"));
  EXPECT_FALSE(accepts(both, "[2,4,8]"));
  EXPECT_FALSE(accepts(both, "[3,6]"));
  const char* two = R"({"type":"array","contains":{"const":1},"minContains":2})";
  EXPECT_TRUE(accepts(two, "[1,2,1]"));
  EXPECT_FALSE(accepts(two, "[1,2,3]"));
  EXPECT_TRUE(accepts(R"({"type":"array","contains":{"const":1},"minContains":0})", "[]"));
  EXPECT_TRUE(accepts(R"({"type":"array","maxContains":1})", "[1,1]"));  // without contains: nothing
  EXPECT_EQ(refused_keyword(R"({"type":"array","contains":{"const":"a"},"maxContains":1})"), "maxContains");
  EXPECT_EQ(refused_keyword(R"({"type":"array","contains":{"const":1},"maxContains":1,"minContains":2})"), "maxContains");
  EXPECT_EQ(refused_keyword(R"({"type":"array","contains":false})"), "contains");
  EXPECT_EQ(refused_keyword(R"({"type":"array","contains":{"const":1},"maxItems":3})"), "contains");
}

// uniqueItems over a few known values: which were written is tracked, so none repeats.
TEST(JsonSchemaKeywords, UniqueItemsAmongKnownValues) {
  const char* tags = R"({"type":"array","items":{"enum":["a","b","c"]},"uniqueItems":true})";
  EXPECT_TRUE(accepts(tags, "[]"));
  EXPECT_TRUE(accepts(tags, R"(["a","c"])"));
  EXPECT_TRUE(accepts(tags, R"(["c","b","a"])"));
  EXPECT_FALSE(accepts(tags, R"(["a","a"])"));
  EXPECT_FALSE(accepts(tags, R"(["a","b","c","a"])"));
  const char* pair = R"({"prefixItems":[{"type":"boolean"},{"type":"boolean"}],"items":false,"uniqueItems":true})";
  EXPECT_TRUE(accepts(pair, "[false,true]"));
  EXPECT_TRUE(accepts(pair, "[true]"));
  EXPECT_FALSE(accepts(pair, "[true,true]"));
  EXPECT_TRUE(accepts(R"({"type":"array","items":{"enum":[1,1.0,2]},"uniqueItems":true,"minItems":2})", "[2,1]"));
  EXPECT_FALSE(accepts(R"({"type":"array","items":{"enum":[1,1.0,2]},"uniqueItems":true,"minItems":2})", "[1,1]"));
  EXPECT_EQ(refused_keyword(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})"), "uniqueItems");
  EXPECT_EQ(refused_keyword(R"({"type":"array","uniqueItems":true})"), "uniqueItems");
  EXPECT_EQ(refused_keyword(R"({"type":"array","items":{"enum":[1,2]},"uniqueItems":true,"minItems":3})"), "minItems");
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// maxContains: between minContains and maxContains items match, the others match the complement of
// contains (a type, one bound, or the values other than a few integers, booleans or null).
TEST(JsonSchemaKeywords, MaxContains) {
  const char* one = R"({"type":"array","contains":{"const":1},"maxContains":1})";
  for (const char* ok : {"[1]", "[1,2]", "[0,1,-1]", "[1,1.5]", "[2,1,true]", R"(["x",1])"}) EXPECT_TRUE(accepts(one, ok)) << ok;
  for (const char* bad : {"[]", "[1,1]", "[1,2,1]", "[2]", "[1,1.0]"}) EXPECT_FALSE(accepts(one, bad)) << bad;
  const char* range = R"({"type":"array","contains":{"const":1},"minContains":0,"maxContains":2})";
  for (const char* ok : {"[]", "[3]", "[1,1]", "[1,3,1]"}) EXPECT_TRUE(accepts(range, ok)) << ok;
  EXPECT_FALSE(accepts(range, "[1,1,1]"));
  const char* big = R"({"type":"array","contains":{"minimum":5},"maxContains":1})";
  EXPECT_TRUE(accepts(big, R"([1,7,"x"])"));
  EXPECT_FALSE(accepts(big, "[5,6]"));
  const char* nulls = R"({"type":"array","contains":{"type":"null"},"minContains":2,"maxContains":2})";
  EXPECT_TRUE(accepts(nulls, "[null,1,null]"));
  EXPECT_FALSE(accepts(nulls, "[null]"));
  EXPECT_FALSE(accepts(nulls, "[null,null,null]"));
}

// const / enum beside lengths, counts, bounds and required: the listed values that meet them.
TEST(JsonSchemaKeywords, ValuesFilteredByTheirKeywords) {
  const char* lengths = R"({"enum":["a","abcd","ab",3],"maxLength":2})";
  EXPECT_TRUE(accepts(lengths, R"("a")"));
  EXPECT_TRUE(accepts(lengths, R"("ab")"));
  EXPECT_TRUE(accepts(lengths, "3"));  // maxLength says nothing of a number
  EXPECT_FALSE(accepts(lengths, R"("abcd")"));
  const char* bounded = R"({"enum":[1,5,10],"minimum":2,"exclusiveMaximum":10})";
  EXPECT_TRUE(accepts(bounded, "5"));
  EXPECT_FALSE(accepts(bounded, "1"));
  EXPECT_FALSE(accepts(bounded, "10"));
  const char* branch = R"({"then":{"const":"yes"},"else":{"const":"other"},"if":{"maxLength":4}})";
  EXPECT_TRUE(accepts(branch, R"("yes")"));
  EXPECT_TRUE(accepts(branch, R"("other")"));
  EXPECT_FALSE(accepts(branch, R"("no")"));
  EXPECT_EQ(refused_keyword(R"({"const":"x","pattern":"^x$"})"), "pattern");
  EXPECT_EQ(refused_keyword(R"({"enum":["abc"],"maxLength":2})"), "enum");
}

// $dynamicRef where no other schema of the document has the $dynamicAnchor it names: a $ref.
TEST(JsonSchemaKeywords, DynamicRefWhereStatic) {
  const char* single = R"({"$id":"https://example.com/root","type":"array","items":{"$dynamicRef":"#items"},
                           "$defs":{"foo":{"$dynamicAnchor":"items","type":"string"}}})";
  EXPECT_TRUE(accepts(single, R"(["a","b"])"));
  EXPECT_FALSE(accepts(single, "[1]"));
  EXPECT_TRUE(accepts(R"({"type":"array","items":{"$ref":"#items"},"$defs":{"foo":{"$dynamicAnchor":"items","type":"string"}}})",
                      R"(["a"])"));
  const char* pointer = R"({"$id":"https://example.com/root","$ref":"list","$defs":{"foo":{"$dynamicAnchor":"items","type":"string"},
      "list":{"$id":"list","type":"array","items":{"$dynamicRef":"#/$defs/items"},
              "$defs":{"items":{"$dynamicAnchor":"items","type":"number"}}}}})";
  EXPECT_TRUE(accepts(pointer, "[1,2]"));
  EXPECT_FALSE(accepts(pointer, R"(["a"])"));
  // Two schemas with the anchor: which one applies depends on the dynamic scope.
  EXPECT_EQ(refused_keyword(R"({"$id":"https://example.com/root","$ref":"list","$defs":{"foo":{"$dynamicAnchor":"items","type":"string"},
      "list":{"$id":"list","type":"array","items":{"$dynamicRef":"#items"},"$defs":{"items":{"$dynamicAnchor":"items"}}}}})"),
            "$dynamicRef");
}

TEST(JsonSchemaKeywords, UriHostnameAndOtherFormats) {
  const char* host = R"({"type":"string","format":"hostname"})";
  for (const char* ok : {R"("example.com")", R"("a")", R"("my-host.example.org")", R"("x1.y2.z3")"}) EXPECT_TRUE(accepts(host, ok)) << ok;
  for (const char* bad : {R"("-a.com")", R"("a-.com")", R"("a..b")", R"("xn--a.com")", R"("a_b")", R"("")", R"(".a")"})
    EXPECT_FALSE(accepts(host, bad)) << bad;
  EXPECT_TRUE(accepts(R"({"type":"string","format":"idn-hostname"})", R"("example.com")"));
  const char* uri = R"({"type":"string","format":"uri"})";
  for (const char* ok : {R"("https://example.com/a/b?x=1&y=2#top")", R"("urn:isbn:0451450523")", R"("mailto:a@b.c")",
                         R"("http://h:8080")", R"("file:/etc/hosts")", R"("a:")", R"("https://example.com/%20x")"})
    EXPECT_TRUE(accepts(uri, ok)) << ok;
  for (const char* bad : {R"("/relative/path")", R"("example.com")", R"("1http://x")", R"("http://a b")", R"("http://x:y/")",
                          R"("http://%zz")", R"("")"})
    EXPECT_FALSE(accepts(uri, bad)) << bad;
  const char* reference = R"({"type":"string","format":"uri-reference"})";
  for (const char* ok : {R"("/relative/path")", R"("../up?q")", R"("#frag")", R"("")", R"("//host/x")", R"("https://e.com")"})
    EXPECT_TRUE(accepts(reference, ok)) << ok;
  for (const char* bad : {R"("a b")", R"("\\\\x")", R"("%g0")"}) EXPECT_FALSE(accepts(reference, bad)) << bad;
  EXPECT_TRUE(accepts(R"({"type":"string","format":"iri"})", R"("https://example.com")"));
  const char* tpl = R"({"type":"string","format":"uri-template"})";
  for (const char* ok : {R"("http://e.com/{id}")", R"("/search{?q,lang}")", R"("{+path:10}/x")", R"("/a/{b*}")", R"("plain")"})
    EXPECT_TRUE(accepts(tpl, ok)) << ok;
  for (const char* bad : {R"("http://e.com/{id")", R"("{}")", R"("a b")", R"("{a,}")"}) EXPECT_FALSE(accepts(tpl, bad)) << bad;
  const char* regex = R"({"type":"string","format":"regex"})";
  for (const char* ok : {R"("^[a-z]+$")", R"("(ab|cd)*e?")", R"("\\d+\\.")", R"("[^0-9 ]")", R"("")"}) EXPECT_TRUE(accepts(regex, ok)) << ok;
  for (const char* bad : {R"("(a")", R"("a**")", R"("[a")", R"("a{2}")", R"("\\1")"}) EXPECT_FALSE(accepts(regex, bad)) << bad;
  const char* relative = R"({"type":"string","format":"relative-json-pointer"})";
  for (const char* ok : {R"("0")", R"("1/foo/0")", R"("2#")", R"("0/")"}) EXPECT_TRUE(accepts(relative, ok)) << ok;
  for (const char* bad : {R"("/foo")", R"("01/a")", R"("-1")", R"("1#/")", R"("")"}) EXPECT_FALSE(accepts(relative, bad)) << bad;
  EXPECT_TRUE(accepts(R"({"type":"string","format":"idn-email"})", R"("joe@example.com")"));
  EXPECT_EQ(refused_keyword(R"({"type":"string","format":"phone"})"), "format");
}

// oneOf whose options overlap as wholes, read type by type: two options that allow every value of a
// type leave none of it valid; the rest must exclude each other within the type.
TEST(JsonSchemaKeywords, OneOfTypeByType) {
  const char* tagged = R"({"oneOf":[{"properties":{"bar":{"type":"integer"}},"required":["bar"]},
                                    {"properties":{"foo":{"type":"string"}},"required":["foo"]}]})";
  EXPECT_TRUE(accepts(tagged, R"({"bar":2})"));
  EXPECT_TRUE(accepts(tagged, R"({"foo":"x"})"));
  EXPECT_FALSE(accepts(tagged, R"({"foo":"x","bar":2})"));
  EXPECT_FALSE(accepts(tagged, R"("both match a string")"));
  EXPECT_FALSE(accepts(tagged, "1"));
  const char* empty = R"({"oneOf":[{"type":"number"},{}]})";
  EXPECT_TRUE(accepts(empty, R"("foo")"));
  EXPECT_TRUE(accepts(empty, "null"));
  EXPECT_FALSE(accepts(empty, "123"));
  EXPECT_FALSE(accepts(empty, "1.5"));
  // A discriminated union of $ref'd models (pydantic): the targets' tags tell the options apart.
  const char* pets = R"({"$defs":{"Cat":{"type":"object","properties":{"kind":{"const":"cat"},"meows":{"type":"boolean"}},"required":["kind"]},
                                   "Dog":{"type":"object","properties":{"kind":{"const":"dog"},"barks":{"type":"boolean"}},"required":["kind"]}},
                         "oneOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"}]})";
  EXPECT_TRUE(accepts(pets, R"({"kind":"cat","meows":true})"));
  EXPECT_TRUE(accepts(pets, R"({"kind":"dog"})"));
  EXPECT_FALSE(accepts(pets, R"({"kind":"bird"})"));
  EXPECT_EQ(refused_keyword(R"({"oneOf":[{"type":"integer"},{"minimum":2}]})"), "oneOf");
  EXPECT_EQ(refused_keyword(R"({"type":"string","oneOf":[{"minLength":2},{"maxLength":4}]})"), "oneOf");
  EXPECT_EQ(refused_keyword(R"({"oneOf":[true,true,false]})"), "oneOf");
}

// not and if / then / else over one bound: its complement is the other types and the values beyond it.
TEST(JsonSchemaKeywords, IfAndNotOverOneBound) {
  const char* branch = R"({"if":{"exclusiveMaximum":0},"then":{"minimum":-10},"else":{"multipleOf":2}})";
  for (const char* ok : {"-1", "-10", "0", "4", R"("x")", "null"}) EXPECT_TRUE(accepts(branch, ok)) << ok;
  for (const char* bad : {"-100", "3", "-10.5"}) EXPECT_FALSE(accepts(branch, bad)) << bad;
  const char* no_else = R"({"if":{"exclusiveMaximum":0},"then":{"minimum":-10}})";
  EXPECT_TRUE(accepts(no_else, "3"));
  EXPECT_TRUE(accepts(no_else, "-3"));
  EXPECT_FALSE(accepts(no_else, "-11"));
  const char* not_long = R"({"not":{"type":"string","minLength":3}})";
  EXPECT_TRUE(accepts(not_long, R"("ab")"));
  EXPECT_TRUE(accepts(not_long, "12345"));
  EXPECT_FALSE(accepts(not_long, R"("abc")"));
  EXPECT_TRUE(accepts(R"({"not":{"minimum":3}})", "2.5"));
  EXPECT_FALSE(accepts(R"({"not":{"minimum":3}})", "3"));
  EXPECT_EQ(refused_keyword(R"({"not":{"type":"integer","minimum":3}})"), "not");
}

// unevaluatedProperties / unevaluatedItems beside anyOf, oneOf and if: each outcome an alternative
// with what it evaluates; an allOf part's own unevaluated* read within the part.
TEST(JsonSchemaKeywords, UnevaluatedBesideApplicators) {
  const char* any = R"({"type":"object","properties":{"foo":{"type":"string"}},
                        "anyOf":[{"properties":{"bar":{"const":"bar"}},"required":["bar"]},
                                 {"properties":{"baz":{"const":"baz"}},"required":["baz"]}],"unevaluatedProperties":false})";
  EXPECT_TRUE(accepts(any, R"({"foo":"f","bar":"bar"})"));
  EXPECT_TRUE(accepts(any, R"({"baz":"baz"})"));
  EXPECT_FALSE(accepts(any, R"({"foo":"f","bar":"bar","quux":1})"));
  EXPECT_FALSE(accepts(any, R"({"foo":"f"})"));
  const char* one = R"({"properties":{"foo":{"type":"string"}},
                        "oneOf":[{"properties":{"bar":{"const":"bar"}},"required":["bar"]},
                                 {"properties":{"baz":{"const":"baz"}},"required":["baz"]}],"unevaluatedProperties":false})";
  EXPECT_TRUE(accepts(one, R"({"foo":"f","bar":"bar"})"));
  EXPECT_FALSE(accepts(one, R"({"foo":"f","bar":"bar","baz":"baz"})"));
  EXPECT_FALSE(accepts(one, R"({"foo":"f","bar":"bar","quux":"q"})"));
  EXPECT_FALSE(accepts(one, R"("a string matches both options")"));
  const char* branch = R"({"if":{"properties":{"foo":{"const":"then"}},"required":["foo"]},
                           "then":{"properties":{"bar":{"type":"string"}},"required":["bar"]},
                           "else":{"properties":{"baz":{"type":"string"}},"required":["baz"]},"unevaluatedProperties":false})";
  EXPECT_TRUE(accepts(branch, R"({"foo":"then","bar":"b"})"));
  EXPECT_TRUE(accepts(branch, R"({"baz":"z"})"));
  EXPECT_FALSE(accepts(branch, R"({"foo":"then","bar":"b","baz":"z"})"));
  EXPECT_FALSE(accepts(branch, R"({"foo":"else","baz":"z"})"));
  EXPECT_TRUE(accepts(branch, "3"));  // the condition holds for a number; then applies nothing to it
  // The else branch may write the name the condition requires: which branch applies depends on its value.
  EXPECT_EQ(refused_keyword(R"({"properties":{"foo":{}},"if":{"properties":{"foo":{"const":1}},"required":["foo"]},
                                "else":{"required":["bar"]},"unevaluatedProperties":false})"), "if");
  const char* items = R"({"prefixItems":[{"const":"foo"}],"anyOf":[{"prefixItems":[true,{"const":"bar"}]},
                                                                   {"prefixItems":[true,true,{"const":"baz"}]}],
                          "unevaluatedItems":false})";
  EXPECT_TRUE(accepts(items, R"(["foo","bar"])"));
  EXPECT_TRUE(accepts(items, R"(["foo","x","baz"])"));
  EXPECT_FALSE(accepts(items, R"(["foo","bar",42])"));
  EXPECT_FALSE(accepts(items, R"(["x","bar"])"));
  // Cousins: a part's unevaluatedProperties sees only its own part.
  const char* cousins = R"({"allOf":[{"properties":{"foo":true}},{"unevaluatedProperties":false}]})";
  EXPECT_TRUE(accepts(cousins, "{}"));
  EXPECT_FALSE(accepts(cousins, R"({"foo":1})"));
  const char* inner = R"({"allOf":[{"properties":{"foo":{"type":"string"}},"unevaluatedProperties":false}],
                          "unevaluatedProperties":true})";
  EXPECT_TRUE(accepts(inner, R"({"foo":"f"})"));
  EXPECT_FALSE(accepts(inner, R"({"foo":"f","bar":"b"})"));
  const char* siblings = R"({"allOf":[{"properties":{"foo":true},"unevaluatedProperties":false}],"anyOf":[{"properties":{"bar":true}}]})";
  EXPECT_TRUE(accepts(siblings, R"({"foo":1})"));
  EXPECT_FALSE(accepts(siblings, R"({"foo":1,"bar":1})"));
}

}  // namespace
}  // namespace inferlab
