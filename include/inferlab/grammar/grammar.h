// A context-free grammar over bytes, the form every constraint compiles to: GBNF text (llama.cpp's
// grammar format) is parsed here, and JSON Schema and regular expressions are first written as
// GBNF (json_schema.h, regex.h). Character classes over Unicode code points are lowered to UTF-8
// byte sequences, so the automaton (grammar_matcher.h) steps one byte at a time, as tokens split
// characters anywhere.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "inferlab/util/error.h"

namespace inferlab {

// A grammar, regex or schema that cannot be compiled (the message names what and where).
class GrammarError : public Error {
 public:
  using Error::Error;
};

// A JSON Schema keyword (or value of one) that constrained decoding does not enforce: refused
// rather than silently ignored. keyword() is the keyword's name, e.g. "minimum".
class UnsupportedSchemaError : public GrammarError {
 public:
  UnsupportedSchemaError(std::string keyword, const std::string& message)
      : GrammarError(message), keyword_(std::move(keyword)) {}
  const std::string& keyword() const { return keyword_; }

 private:
  std::string keyword_;
};

// Bounds on what a request may make the server compile (inferlab serve --max-grammar-bytes, ...).
struct GrammarLimits {
  std::size_t max_grammar_bytes = 64 * 1024;  // GBNF text, given or generated from a schema / regex
  std::size_t max_regex_bytes = 4 * 1024;     // a regex field or a schema "pattern"
  int max_schema_depth = 32;                  // nested schemas (objects, arrays, combinators)
  std::size_t max_elements = 200000;          // byte-level elements after lowering (repetitions expand)
  int max_repetition = 1000;                  // the largest bound of {m,n}, minItems, maxLength, ...
  // Parentheses nested in a grammar / groups nested in a regex: the parsers recurse once per level,
  // so a bound keeps a 64 KiB grammar of '(' from overflowing the thread's stack. A regex group is
  // one grammar level, so any regex within its bound makes a grammar within the grammar's.
  int max_grammar_nesting = 128;
  int max_regex_nesting = 64;
};

struct Grammar {
  // token: one whole token of the vocabulary by its id, for a token that has no bytes a literal
  // could spell (a special token of a chat format, such as harmony's <|channel|>).
  enum Kind : uint8_t { end, bytes, ref, token };
  struct Element {
    Kind kind;
    uint32_t value;  // bytes: index into sets; ref: rule id; end: rule id of the alternative ending here; token: its id
  };
  using ByteSet = std::array<uint64_t, 4>;

  // Every rule's alternatives, flattened: an alternative is a run of elements ending with `end`.
  std::vector<Element> elements;
  std::vector<std::vector<uint32_t>> alternatives;  // per rule: where each alternative starts
  std::vector<std::string> rule_names;
  std::vector<ByteSet> sets;
  uint32_t root = 0;

  static bool has(const ByteSet& set, uint8_t byte) { return (set[byte >> 6] >> (byte & 63)) & 1; }
  bool matches(uint32_t position, uint8_t byte) const {
    return elements[position].kind == bytes && has(sets[elements[position].value], byte);
  }
};

// Parses GBNF: `name ::= alternatives` rules with "literals", [classes] (ranges, ^ negation,
// escapes), `.`, (groups), the quantifiers * + ? {m} {m,} {m,n}, tokens by id `<[123]>` (llama.cpp's
// syntax; only tokens with no bytes of their own, checked when the grammar meets its vocabulary) and
// # comments. The start rule is `root`. GrammarError on syntax errors, undefined rules, left
// recursion or a limit exceeded.
Grammar parse_gbnf(std::string_view text, const GrammarLimits& limits = {});

// A GBNF string literal for these bytes (quotes and escapes added).
std::string gbnf_literal(std::string_view bytes);

}  // namespace inferlab
