#include <gtest/gtest.h>

#include <memory>

#include "inferlab/grammar/grammar.h"
#include "inferlab/grammar/grammar_matcher.h"

namespace inferlab {
namespace {

// A one-byte-per-token vocabulary: the matcher then checks a text byte by byte.
std::shared_ptr<const TokenVocabulary> byte_vocabulary() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  return std::make_shared<TokenVocabulary>(bytes);
}

bool matches(const std::string& gbnf, const std::string& text) {
  auto compiled = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), byte_vocabulary());
  GrammarMatcher m(compiled);
  return m.accept_bytes(text) && m.can_finish();
}

TEST(Gbnf, LiteralsClassesAndQuantifiers) {
  EXPECT_TRUE(matches(R"(root ::= "ab" [0-9]+ "c"?)", "ab12"));
  EXPECT_TRUE(matches(R"(root ::= "ab" [0-9]+ "c"?)", "ab1c"));
  EXPECT_FALSE(matches(R"(root ::= "ab" [0-9]+ "c"?)", "ab"));
  EXPECT_FALSE(matches(R"(root ::= "ab" [0-9]+ "c"?)", "abc"));
  EXPECT_TRUE(matches(R"(root ::= [a-c]{2,3})", "abc"));
  EXPECT_FALSE(matches(R"(root ::= [a-c]{2,3})", "abca"));
  EXPECT_FALSE(matches(R"(root ::= [a-c]{2,3})", "a"));
  EXPECT_TRUE(matches(R"(root ::= [^x]*)", "héllo wörld"));
  EXPECT_FALSE(matches(R"(root ::= [^x]*)", "x"));
}

TEST(Gbnf, RulesGroupsAlternativesAndComments) {
  const std::string g = R"(# a list of words
root ::= word ( "," word )*   # trailing comment
word ::= ( "cat" | "dog" )
  | "bird"
)";
  EXPECT_TRUE(matches(g, "cat,bird,dog"));
  EXPECT_FALSE(matches(g, "cat,"));
  EXPECT_FALSE(matches(g, "cow"));
}

TEST(Gbnf, Utf8ClassesStepByteByByte) {
  // é is two bytes: a token may end between them, so the class is a byte automaton.
  auto compiled = std::make_shared<CompiledGrammar>(parse_gbnf(R"(root ::= [à-ÿ]+)"), byte_vocabulary());
  GrammarMatcher m(compiled);
  EXPECT_TRUE(m.accept_bytes("\xC3"));
  EXPECT_FALSE(m.can_finish());
  EXPECT_TRUE(m.accept_bytes("\xA9"));
  EXPECT_TRUE(m.can_finish());
  EXPECT_FALSE(m.accept_bytes("a"));
}

TEST(Gbnf, ErrorsNameTheProblem) {
  auto message = [](const std::string& g) {
    try {
      parse_gbnf(g);
    } catch (const GrammarError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("root ::= foo").find("'foo' is used but never defined"), std::string::npos);
  EXPECT_NE(message("start ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(message("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(message("root ::= \"a").find("closing '\"'"), std::string::npos);
  EXPECT_NE(message("root ::= [a-").find("']'"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"{5000}").find("repetition bound"), std::string::npos);
  GrammarLimits small;
  small.max_grammar_bytes = 10;
  EXPECT_THROW(parse_gbnf("root ::= \"aaaaaaaaaaaa\"", small), GrammarError);
}

// Special tokens by id (<[id]>): the byte vocabulary plus two tokens with no bytes (ids 256, 257),
// as a chat format's markers are. The mask offers such a token only where the grammar names it, and
// its bytes never spell it.
TEST(Gbnf, SpecialTokensByIdAreOfferedOnlyWhereNamed) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.push_back("");  // 256: a special token, e.g. <|channel|>
  bytes.push_back("");  // 257: another, e.g. <|call|>
  auto vocabulary = std::make_shared<TokenVocabulary>(bytes);
  auto compiled = std::make_shared<CompiledGrammar>(parse_gbnf(R"(root ::= <[256]> "to=" [a-z]+ <[257]>)"), vocabulary);
  GrammarMatcher m(compiled);
  TokenMask mask;
  m.fill_mask(mask);
  EXPECT_EQ(mask.count(), 1);
  EXPECT_TRUE(mask.test(256));
  EXPECT_FALSE(GrammarMatcher(m).accept_token(257));
  EXPECT_FALSE(GrammarMatcher(m).accept_bytes("<"));
  ASSERT_TRUE(m.accept_token(256));
  ASSERT_TRUE(m.accept_bytes("to=f"));
  m.fill_mask(mask);
  EXPECT_TRUE(mask.test(257));
  EXPECT_TRUE(mask.test('g'));
  EXPECT_FALSE(mask.test(256));
  EXPECT_FALSE(m.can_finish());
  ASSERT_TRUE(m.accept_token(257));
  EXPECT_TRUE(m.can_finish());
  EXPECT_TRUE(m.terminated());

  // A token id that has bytes (an ordinary token), or none of the vocabulary, is refused by name.
  for (const char* g : {R"(root ::= <[97]>)", R"(root ::= <[9999]>)"}) {
    try {
      CompiledGrammar(parse_gbnf(g), vocabulary);
      ADD_FAILURE() << g << " compiled";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find("is not a special token"), std::string::npos) << e.what();
    }
  }
  for (const char* g : {"root ::= <[]>", "root ::= <[12", "root ::= <12>", "root ::= <[99999999999]>"})
    EXPECT_THROW(parse_gbnf(g), GrammarError) << g;
}

std::string nested(int levels, const std::string& inner) { return std::string(levels, '(') + inner + std::string(levels, ')'); }

// The parser recurses per parenthesis: 30,000 of them (60 KB, under the size limit) overflowed a
// server thread's stack before the depth was bounded.
TEST(Gbnf, NestingIsBoundedBeforeTheParserRecurses) {
  const GrammarLimits limits;
  EXPECT_TRUE(matches("root ::= " + nested(limits.max_grammar_nesting, "\"a\""), "a"));
  try {
    parse_gbnf("root ::= " + nested(30000, "\"a\""));
    FAIL() << "no error";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 128"), std::string::npos) << e.what();
  }
}

// Long chains of rules and nested optional repetitions: the left-recursion check and the
// expansion are worklists, and expansion visits each stack node once (both recursed per rule,
// and expansion walked every path: the nested repetitions below took gigabytes before).
TEST(Gbnf, LongRuleChainsAndNestedRepetitionsStayBounded) {
  GrammarLimits big;
  big.max_grammar_bytes = 1 << 20;
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 50000; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  chain += "r50000 ::= \"a\"\n";
  auto compiled = std::make_shared<CompiledGrammar>(parse_gbnf(chain, big), byte_vocabulary());
  GrammarMatcher chained(compiled);
  EXPECT_TRUE(chained.accept_bytes("a") && chained.can_finish());

  EXPECT_TRUE(matches(R"(root ::= (("a"{0,20}){0,20}) "b")", std::string(30, 'a') + "b"));
  // 40 x 40 x 40 ways to split a run of a's: a clear error rather than memory and minutes.
  GrammarMatcher ambiguous(std::make_shared<CompiledGrammar>(parse_gbnf(R"(root ::= ((("a"{0,40}){0,40}){0,40}))"), byte_vocabulary()));
  try {
    ambiguous.accept_bytes(std::string(100, 'a'));
    FAIL() << "no error";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace inferlab
