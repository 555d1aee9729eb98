// Multiples of a JSON Schema multipleOf as GBNF: an automaton over the digits that keeps the value
// modulo the step's mantissa, so the grammar is exact and finite. Integers for any step (an integer
// is a multiple of 0.5 when it is of 1); decimals (no exponent, at most as many fraction digits as the
// step has) for a decimal step. Used by the JSON Schema converter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "grammar/rule_sink.h"

namespace inferlab {

// multipleOf as an exact decimal: mantissa / 10^decimals (1.5: 15 and 1; 1e-08: 1 and 8; 20: 2 and -1
// becomes 20 and 0).
struct DecimalStep {
  uint64_t mantissa = 1;
  int decimals = 0;
};

// The step JSON wrote (its text, e.g. "1.5e-3"), or nullopt when it is not a positive number or its
// mantissa exceeds 15 digits.
std::optional<DecimalStep> parse_decimal_step(std::string_view json_text);

// The modulus an integer's digits are kept under: the smallest integer multiple of the step.
uint64_t integer_modulus(const DecimalStep& step);

// How many rules multiples_expression writes (the caller refuses a step that needs too many).
uint64_t multiples_rule_count(const DecimalStep& step, bool integer);

// Which signs the multiples may have (a bound the caller reduced to signs: e.g. minimum 0).
struct Signs {
  bool negative = true, zero = true, positive = true;
};

// The multiples with these signs, as a GBNF expression over rules written to `sink`. integer: only
// integers (digits without a point). The digits are not bounded in number.
std::string multiples_expression(const DecimalStep& step, bool integer, const Signs& signs, const RuleSink& sink,
                                 const std::string& hint);

// The integers in [lo, hi] (each within 15 digits) that are multiples of `modulus`, digit by digit
// (the range's bounds and the remainder tracked together), as a GBNF expression; nullopt when none
// is, or when its rules would take more than max_bytes of grammar (then none are written).
std::optional<std::string> multiples_in_range(int64_t lo, int64_t hi, uint64_t modulus, const RuleSink& sink,
                                              const std::string& hint, std::size_t max_bytes);

}  // namespace inferlab
