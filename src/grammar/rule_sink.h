// Where a generator of GBNF rules (pattern_automaton.h, number_multiples.h) writes them: the JSON
// Schema converter's rule table, which keeps names unique. Rules may refer to each other in cycles,
// so a name is reserved first and its body defined later.
#pragma once

#include <functional>
#include <string>

namespace inferlab {

struct RuleSink {
  std::function<std::string(const std::string& hint)> reserve;  // a fresh rule name
  std::function<void(const std::string& name, const std::string& body)> define;
};

}  // namespace inferlab
