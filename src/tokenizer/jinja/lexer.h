// Jinja lexer: template text and the tokens inside {% %}, {{ }} and {# #} tags, with
// @huggingface/jinja's preprocessing applied (trim_blocks, lstrip_blocks, {%- -%} whitespace
// control, the template's final newline dropped).
#pragma once
#include <string>
#include <vector>

namespace inferlab::jinja {

enum class Tok {
  Text, Number, String, Name, OpenStmt, CloseStmt, OpenExpr, CloseExpr, LParen, RParen, LBracket,
  RBracket, LBrace, RBrace, Comma, Dot, Colon, Pipe, Op, Assign, Comment, End,
};

struct Token {
  Tok type;
  std::string text;  // Text: the text; String: the decoded literal; Number, Name, Op...: as written
  int line;          // 1-based
};

// Throws Error naming the line for an unclosed tag, comment or string literal, a bad escape, or an
// unexpected character. The last token is always End.
std::vector<Token> lex(const std::string& source);

}  // namespace inferlab::jinja
