#include <gtest/gtest.h>

#include "inferlab/grammar/grammar_matcher.h"
#include "inferlab/grammar/regex.h"

namespace inferlab {
namespace {

bool full_match(const std::string& pattern, const std::string& text) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  auto g = std::make_shared<CompiledGrammar>(parse_gbnf(regex_to_gbnf(pattern)), std::make_shared<TokenVocabulary>(bytes));
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_finish();
}

TEST(Regex, MatchesWholeOutput) {
  EXPECT_TRUE(full_match("^\\d{3}-\\d{4}$", "555-1234"));
  EXPECT_FALSE(full_match("^\\d{3}-\\d{4}$", "555-12345"));
  EXPECT_TRUE(full_match("(?:ab|cd)+x?", "abcdab"));
  EXPECT_TRUE(full_match("[A-Z][a-z]*( [A-Z][a-z]*)*", "New York"));
  EXPECT_FALSE(full_match("[A-Z][a-z]*( [A-Z][a-z]*)*", "new york"));
  EXPECT_TRUE(full_match("[^0-9]+", "héllo"));
  EXPECT_TRUE(full_match("a.c", "a中c"));
  EXPECT_FALSE(full_match("a.c", "a\nc"));
  EXPECT_TRUE(full_match("\\w+@\\w+\\.com", "me@host.com"));
  EXPECT_TRUE(full_match("colou?r", "color"));
  EXPECT_TRUE(full_match("(?<year>\\d{4})", "2024"));
}

TEST(Regex, JsonStringModeEscapes) {
  // Inside a JSON string a quote is written \" and control characters never appear raw.
  std::string e = regex_to_gbnf_expression("a\"b", true);
  EXPECT_NE(e.find("\\\\\\\""), std::string::npos) << e;
}

TEST(Regex, UnsupportedFeaturesAreRefused) {
  for (const char* bad : {"(a)\\1", "(?=a)", "\\bword", "a$b", "(?i)a", "[[:alpha:]]", "(", "a{2"})
    EXPECT_THROW(regex_to_gbnf(bad), GrammarError) << bad;
  GrammarLimits small;
  small.max_regex_bytes = 4;
  EXPECT_THROW(regex_to_gbnf("abcdef", small), GrammarError);
}

// The parser recurses per group: 2,000 nested groups (found by fuzz_openai_request) overflowed
// the stack under ASan. The bound is checked before recursing, and a regex at the bound makes a
// grammar within the grammar's own nesting bound (one grammar group per regex group).
TEST(Regex, NestingIsBoundedAndEachGroupIsOneGrammarGroup) {
  const GrammarLimits limits;
  const int at = limits.max_regex_nesting;
  const std::string deepest = std::string(at, '(') + "a|b" + std::string(at, ')') + "+";
  EXPECT_TRUE(full_match(deepest, "abba"));
  EXPECT_TRUE(full_match("((a|b)c)*|d", "acbc"));
  EXPECT_TRUE(full_match("((a|b)c)*|d", "d"));
  EXPECT_FALSE(full_match("((a|b)c)*|d", "acd"));
  try {
    regex_to_gbnf(std::string(2000, '(') + "a" + std::string(2000, ')'));
    FAIL() << "no error";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace inferlab
