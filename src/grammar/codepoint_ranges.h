// Sets of Unicode code points as sorted ranges, shared by the two pattern readers: regex.cpp (a
// pattern to GBNF) and pattern_automaton.cpp (a pattern to a DFA over property names).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace inferlab::code_point_sets {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

struct Range {
  uint32_t lo, hi;
  bool operator==(const Range&) const = default;
};

// Sorted, with overlapping and touching ranges merged.
inline std::vector<Range> normalize(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](Range a, Range b) { return a.lo < b.lo; });
  std::vector<Range> out;
  for (Range r : ranges) {
    if (!out.empty() && r.lo <= out.back().hi + 1) out.back().hi = std::max(out.back().hi, r.hi);
    else out.push_back(r);
  }
  return out;
}

// Every code point (0 to kMaxCodepoint) not in the ranges.
inline std::vector<Range> complement(const std::vector<Range>& ranges) {
  std::vector<Range> out;
  uint32_t next = 0;
  for (Range r : normalize(ranges)) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return out;
}

// ECMAScript's ASCII classes \d and \w.
inline const std::vector<Range> kDigit{{'0', '9'}};
inline const std::vector<Range> kWord{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};

}  // namespace inferlab::code_point_sets
