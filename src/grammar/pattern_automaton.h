// JSON Schema patterns as deterministic automata over code points, for property names
// (patternProperties, and the names left to additionalProperties): a name's class — which
// patterns it matches, whether it is one of the listed names — must be known exactly, and the
// names *not* matching a pattern need a complement, which only a DFA gives. Used by the JSON Schema
// converter; `pattern` on string values keeps regex.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/rule_sink.h"
#include "inferlab/grammar/grammar.h"

namespace inferlab {

// A complete DFA over the code points a JSON string may hold (surrogates excluded). ECMAScript
// semantics with the "u" flag: a match anywhere in the name unless ^ / $ anchor it, `.` any code
// point but line terminators, \s the ECMAScript white space. GrammarError for what it cannot read
// (back-references, look-around, \b, \p{...}, inline flags) or a pattern over the size limits.
class PatternDfa {
 public:
  struct Edge {
    uint32_t lo, hi;  // code points, inclusive
    int target;
  };
  static PatternDfa compile(std::string_view pattern, const GrammarLimits& limits);
  bool matches(std::string_view utf8) const;

  std::vector<std::vector<Edge>> edges;  // per state: disjoint, sorted, covering every code point
  std::vector<bool> accepting;
  int start = 0;
};

// The names that equal none of `listed`, grouped by which of `patterns` they match: for each
// group some name falls in, a GBNF expression of those names as JSON strings (quotes included),
// each written one way only (nlohmann's dump: \" \\ \b \f \n \r \t, \u00xx for other control
// characters, everything else as UTF-8), so that a name cannot slip into another group through an
// escape. GrammarError when the product automaton exceeds the limits.
std::map<std::vector<bool>, std::string> unlisted_name_groups(const std::vector<PatternDfa>& patterns,
                                                              const std::vector<std::string>& listed, const RuleSink& sink,
                                                              const std::string& hint, const GrammarLimits& limits);

}  // namespace inferlab
