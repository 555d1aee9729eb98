// Jinja parser: tokens to statements, by recursive descent with Jinja's operator precedence.
#pragma once
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace inferlab::jinja {

// Throws Error naming the construct and line for what is malformed or not supported. Nesting
// (brackets, statements, and each link of an operator, filter or attribute chain) is bounded at
// 256 levels, so hostile input cannot exhaust the stack while parsing, rendering or freeing.
Body parse(std::vector<Token> tokens);

}  // namespace inferlab::jinja
