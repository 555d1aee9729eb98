// Regular expressions as GBNF: for the `regex` request field (the whole output must match) and
// for a JSON Schema "pattern" (the string's characters, written as JSON escapes). Supported:
// literals, . [classes] (ranges, negation, \d \w \s), groups (capturing, (?:...), (?<name>...)),
// |, the quantifiers * + ? {m} {m,} {m,n} (lazy forms read as greedy), ^ at the start and $ at the
// end. Back-references, look-around, word boundaries and inline flags are refused (GrammarError).
#pragma once
#include <string>
#include <string_view>

#include "inferlab/grammar/grammar.h"

namespace inferlab {

// A GBNF expression matching the pattern (anchored at both ends). json_string: the characters as
// they appear inside a JSON string (" and \ escaped, control characters left out).
std::string regex_to_gbnf_expression(std::string_view pattern, bool json_string, const GrammarLimits& limits = {});

// A whole grammar: root ::= the pattern.
std::string regex_to_gbnf(std::string_view pattern, const GrammarLimits& limits = {});

}  // namespace inferlab
