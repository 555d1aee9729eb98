// Numbers within bounds as GBNF expressions: integers digit by digit, and decimals (no exponent)
// digit by digit on both sides of the point. Used by the JSON Schema converter for minimum /
// maximum / exclusiveMinimum / exclusiveMaximum.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace inferlab {

// Naturals (no leading zeros) in [lo, hi], both within 15 digits.
std::string natural_range(int64_t lo, int64_t hi);

// A bound of a JSON number: its value as JSON wrote it (e.g. "-1.5e-07") and whether it is exclusive.
struct DecimalBound {
  std::string text;
  bool exclusive = false;
};

// JSON numbers without exponent, at most `max_digits` digits on each side of the point, within the
// bounds (nullopt: unbounded on that side), as a GBNF expression; nullopt when no such number lies
// within them. A bound whose integer part is longer than max_digits holds already on the far side
// and admits nothing on the near side.
std::optional<std::string> decimal_range(const std::optional<DecimalBound>& lower, const std::optional<DecimalBound>& upper,
                                         int max_digits = 15);

}  // namespace inferlab
