// The Jinja lexer on its own: tokens, lines, @huggingface/jinja's whitespace handling
// (trim_blocks, lstrip_blocks, {%- -%}, the final newline dropped) and literal decoding.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "inferlab/util/error.h"
#include "tokenizer/jinja/lexer.h"

namespace inferlab::jinja {
namespace {

// "type:text@line" for each token but End, e.g. "Text:hi@1".
std::string describe(const std::vector<Token>& tokens) {
  static const char* names[] = {"Text", "Number", "String", "Name", "{%", "%}", "{{", "}}", "(", ")", "[",
                                "]", "{", "}", ",", ".", ":", "|", "Op", "=", "Comment", "End"};
  std::string out;
  for (const Token& t : tokens) {
    if (t.type == Tok::End) break;
    out += std::string(out.empty() ? "" : " ") + names[static_cast<int>(t.type)] + (t.text.empty() ? "" : ":" + t.text) + "@" +
           std::to_string(t.line);
  }
  return out;
}

std::string lexed(const std::string& source) { return describe(lex(source)); }

std::string error_of(const std::string& source) {
  try {
    lex(source);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JinjaLexer, TagsExpressionsAndLines) {
  EXPECT_EQ(lexed("hi {{ x.y[0] | f(1, k='v') }}\n{% if a != 2.5 %}"),
            "Text:hi @1 {{@1 Name:x@1 .:.@1 Name:y@1 [:[@1 Number:0@1 ]:]@1 |:|@1 Name:f@1 (:(@1 Number:1@1 ,:,@1 "
            "Name:k@1 =:=@1 String:v@1 ):)@1 }}@1 Text:\n@1 {%@2 Name:if@2 Name:a@2 Op:!=@2 Number:2.5@2 %}@2");
  // Two-character operators win over their one-character prefixes; `1.` is a number and a dot.
  EXPECT_EQ(lexed("{{ a**b//c<=d>=e==f 1. }}"),
            "{{@1 Name:a@1 Op:**@1 Name:b@1 Op://@1 Name:c@1 Op:<=@1 Name:d@1 Op:>=@1 Name:e@1 Op:==@1 Name:f@1 "
            "Number:1@1 .:.@1 }}@1");
  // The End token carries the last line.
  auto tokens = lex("a\nb\n\nc");
  ASSERT_FALSE(tokens.empty());
  EXPECT_EQ(tokens.back().type, Tok::End);
  EXPECT_EQ(tokens.back().line, 4);
}

TEST(JinjaLexer, WhitespaceControlAsHuggingFaceJinja) {
  EXPECT_EQ(lexed("a\n"), "Text:a@1");                                    // the final newline is dropped
  EXPECT_EQ(lexed("{% if x %}\nA{% endif %}"), "{%@1 Name:if@1 Name:x@1 %}@1 Text:A@2 {%@2 Name:endif@2 %}@2");  // trim_blocks
  EXPECT_EQ(lexed("{{ x }}\nA"), "{{@1 Name:x@1 }}@1 Text:\nA@1");         // but not after }}
  EXPECT_EQ(lexed("a\n  \t{% if x %}"), "Text:a\n@1 {%@2 Name:if@2 Name:x@2 %}@2");  // lstrip_blocks
  EXPECT_EQ(lexed("a  {% if x %}"), "Text:a  @1 {%@1 Name:if@1 Name:x@1 %}@1");     // only at a line start
  EXPECT_EQ(lexed("a  {{- x -}}  b"), "Text:a@1 {{@1 Name:x@1 }}@1 Text:b@1");       // - strips both ways
  EXPECT_EQ(lexed("a \n{#- c -#}\n b"), "Text:a@1 Comment@2 Text:b@3");
  EXPECT_EQ(lexed("x {# c #}\ny"), "Text:x @1 Comment@1 Text:y@2");  // a comment's newline goes too
}

TEST(JinjaLexer, StringLiteralsDecodeEscapes) {
  auto tokens = lex(R"({{ 'a\'b' "c\"d" '\n\t\\' '\x41\u00e9' }})");
  ASSERT_EQ(tokens.size(), 7u);
  EXPECT_EQ(tokens[1].text, "a'b");
  EXPECT_EQ(tokens[2].text, "c\"d");
  EXPECT_EQ(tokens[3].text, "\n\t\\");
  EXPECT_EQ(tokens[4].text, "A\xc3\xa9");
  EXPECT_EQ(tokens[1].type, Tok::String);
}

TEST(JinjaLexer, ErrorsNameTheProblemAndLine) {
  EXPECT_EQ(error_of("\n{{ 'open }}"), "chat template line 2: string literal is never closed");
  EXPECT_EQ(error_of("{{ 'a\\q' }}"), "chat template line 1: unknown escape \\q in a string literal");
  EXPECT_EQ(error_of("{{ '\\x4' }}"), "chat template line 1: invalid escape \\x4'");
  EXPECT_EQ(error_of("a\n\n{{ x "), "chat template line 3: tag opened here is never closed");
  EXPECT_EQ(error_of("{# never"), "chat template line 1: comment {# is never closed with #}");
  EXPECT_EQ(error_of("{{\n x ! y }}"), "chat template line 2: unexpected character \"!\"");
}

}  // namespace
}  // namespace inferlab::jinja
