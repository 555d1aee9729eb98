// JSON Schema patterns -> DFA over code points (pattern_automaton.h): the pattern is parsed to a
// tree, built into an NFA (Thompson), searched for anywhere in the name, and determinized; names are
// grouped on the product of the patterns' DFAs and a trie of the listed names.
#include "grammar/pattern_automaton.h"

#include "grammar/codepoint_ranges.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <deque>
#include <optional>
#include <set>

namespace inferlab {
namespace {

constexpr uint32_t kEnd = 0x110000;  // one past the last code point
constexpr std::size_t kMaxNfaStates = 20000;
constexpr std::size_t kMaxDfaStates = 2000;

using code_point_sets::Range;

// ECMAScript's classes (ASCII \d \w; \s is its WhiteSpace and LineTerminator code points).
using code_point_sets::kDigit;
using code_point_sets::kWord;
const std::vector<Range> kSpace{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
                                {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const std::vector<Range> kLineTerminators{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

struct Node {
  enum Kind { chars, sequence, choice, repeat, begin, end } kind = sequence;
  std::vector<Range> ranges;
  std::vector<Node> children;
  int min = 0, max = -1;  // repeat: max -1 unbounded
};

class PatternParser {
 public:
  PatternParser(std::string_view p, const GrammarLimits& limits) : p_(p), limits_(limits) {}

  Node parse() {
    Node n = alternation();
    if (pos_ < p_.size()) error("an operator (unbalanced ')')");
    return n;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    throw GrammarError(fmt::format("regex: {} at offset {} of '{}'", what, pos_, std::string(p_)));
  }

  Node alternation() {
    Node n{Node::choice};
    n.children.push_back(concatenation());
    while (pos_ < p_.size() && p_[pos_] == '|') {
      ++pos_;
      n.children.push_back(concatenation());
    }
    return n.children.size() == 1 ? std::move(n.children[0]) : n;
  }

  Node concatenation() {
    Node n{Node::sequence};
    while (pos_ < p_.size() && p_[pos_] != '|' && p_[pos_] != ')') n.children.push_back(quantified());
    return n;
  }

  int number() {
    int v = 0;
    if (pos_ >= p_.size() || !std::isdigit(static_cast<unsigned char>(p_[pos_]))) error("a number in a repetition {m,n}");
    while (pos_ < p_.size() && std::isdigit(static_cast<unsigned char>(p_[pos_]))) {
      v = v * 10 + (p_[pos_++] - '0');
      if (v > limits_.max_repetition) error(fmt::format("a repetition bound above {}", limits_.max_repetition));
    }
    return v;
  }

  Node quantified() {
    Node atom_node = atom();
    if (pos_ >= p_.size()) return atom_node;
    int min = 0, max = -1;
    const char c = p_[pos_];
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_, min = 1;
    } else if (c == '?') {
      ++pos_, max = 1;
    } else if (c == '{') {
      ++pos_;
      min = max = number();
      if (pos_ < p_.size() && p_[pos_] == ',') {
        ++pos_;
        max = pos_ < p_.size() && p_[pos_] == '}' ? -1 : number();
      }
      if (pos_ >= p_.size() || p_[pos_] != '}') error("'}' closing a repetition");
      ++pos_;
      if (max >= 0 && max < min) error("a repetition {m,n} with n below m");
    } else {
      return atom_node;
    }
    if (atom_node.kind == Node::begin || atom_node.kind == Node::end) error("a quantifier on an anchor");
    if (pos_ < p_.size() && p_[pos_] == '?') ++pos_;  // lazy: the same language
    Node n{Node::repeat};
    n.children.push_back(std::move(atom_node));
    n.min = min, n.max = max;
    return n;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= p_.size() || !std::isxdigit(static_cast<unsigned char>(p_[pos_]))) error("a hex digit");
      const char c = p_[pos_++];
      v = v * 16 + (std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10);
    }
    return v;
  }

  uint32_t next_codepoint() {
    const unsigned char c = static_cast<unsigned char>(p_[pos_]);
    const int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len == 0 || pos_ + len > p_.size()) error("valid UTF-8");
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (int i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<unsigned char>(p_[pos_ + i]) & 0x3F);
    pos_ += len;
    return cp;
  }

  // \uXXXX, and a surrogate pair of two as one code point (the "u" flag).
  uint32_t unicode_escape() {
    if (pos_ < p_.size() && p_[pos_] == '{') {
      ++pos_;
      uint32_t v = 0;
      int digits = 0;
      while (pos_ < p_.size() && p_[pos_] != '}' && digits < 7) v = v * 16 + hex(1), ++digits;
      if (pos_ >= p_.size() || p_[pos_] != '}' || digits == 0 || v >= kEnd) error("a code point \\u{...}");
      ++pos_;
      return v;
    }
    uint32_t v = hex(4);
    if (v >= 0xD800 && v <= 0xDBFF && p_.substr(pos_, 2) == "\\u") {
      const std::size_t save = pos_;
      pos_ += 2;
      const uint32_t low = hex(4);
      if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
      pos_ = save;
    }
    return v;
  }

  // After '\': a class into `ranges` (true), or one code point.
  bool escape(std::vector<Range>& ranges, uint32_t& cp, bool in_class) {
    if (++pos_ >= p_.size()) error("an escape after '\\'");
    const char c = p_[pos_++];
    switch (c) {
      case 'd': ranges = kDigit; return true;
      case 'D': ranges = code_point_sets::complement(kDigit); return true;
      case 'w': ranges = kWord; return true;
      case 'W': ranges = code_point_sets::complement(kWord); return true;
      case 's': ranges = kSpace; return true;
      case 'S': ranges = code_point_sets::complement(kSpace); return true;
      case 'n': cp = '\n'; return false;
      case 't': cp = '\t'; return false;
      case 'r': cp = '\r'; return false;
      case 'f': cp = '\f'; return false;
      case 'v': cp = '\v'; return false;
      case 'x': cp = hex(2); return false;
      case 'u': cp = unicode_escape(); return false;
      case '0':
        if (pos_ < p_.size() && std::isdigit(static_cast<unsigned char>(p_[pos_]))) error("octal escapes are not supported");
        cp = 0;
        return false;
      case 'b':
        if (in_class) {
          cp = '\b';
          return false;
        }
        [[fallthrough]];
      case 'B': --pos_; error("word boundaries (\\b, \\B) are not supported");
      case 'p': case 'P': --pos_; error("Unicode property escapes (\\p{...}) are not supported");
      default:
        if (std::isdigit(static_cast<unsigned char>(c)) || c == 'k') {
          --pos_;
          error("back-references are not supported");
        }
        if (std::isalpha(static_cast<unsigned char>(c))) {
          --pos_;
          error(fmt::format("the escape \\{} is not supported", c));
        }
        --pos_;
        cp = next_codepoint();
        return false;
    }
  }

  Node atom() {
    const char c = p_[pos_];
    Node n{Node::chars};
    if (c == '(') {
      ++pos_;
      if (p_.substr(pos_, 2) == "?:") {
        pos_ += 2;
      } else if (p_.substr(pos_, 2) == "?<" && pos_ + 2 < p_.size() && p_[pos_ + 2] != '=' && p_[pos_ + 2] != '!') {
        const std::size_t close = p_.find('>', pos_);
        if (close == std::string_view::npos) error("'>' closing a group name");
        pos_ = close + 1;
      } else if (pos_ < p_.size() && p_[pos_] == '?') {
        error("look-around and inline flags are not supported");
      }
      if (++nesting_ > limits_.max_regex_nesting) error(fmt::format("groups nested deeper than {} levels", limits_.max_regex_nesting));
      Node inner = alternation();
      --nesting_;
      if (pos_ >= p_.size() || p_[pos_] != ')') error("')'");
      ++pos_;
      return inner;
    }
    if (c == '[') return bracket();
    if (c == '.') {
      ++pos_;
      n.ranges = code_point_sets::complement(kLineTerminators);
      return n;
    }
    if (c == '^' || c == '$') {
      ++pos_;
      return Node{c == '^' ? Node::begin : Node::end};
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') error("something to repeat before a quantifier");
    if (c == '\\') {
      uint32_t cp = 0;
      if (!escape(n.ranges, cp, false)) n.ranges = {{cp, cp}};
      return n;
    }
    const uint32_t cp = next_codepoint();
    n.ranges = {{cp, cp}};
    return n;
  }

  Node bracket() {
    ++pos_;
    const bool negated = pos_ < p_.size() && p_[pos_] == '^';
    if (negated) ++pos_;
    std::vector<Range> ranges;
    while (pos_ < p_.size() && p_[pos_] != ']') {
      uint32_t lo = 0;
      if (p_[pos_] == '\\') {
        std::vector<Range> cls;
        if (escape(cls, lo, true)) {
          ranges.insert(ranges.end(), cls.begin(), cls.end());
          continue;
        }
      } else if (p_[pos_] == '[' && pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') {
        error("POSIX classes ([:alpha:]) are not supported");
      } else {
        lo = next_codepoint();
      }
      uint32_t hi = lo;
      if (pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        if (p_[pos_] == '\\') {
          std::vector<Range> cls;
          if (escape(cls, hi, true)) error("a class escape as a range end");
        } else {
          hi = next_codepoint();
        }
        if (hi < lo) error("a range whose end is below its start");
      }
      ranges.push_back({lo, hi});
    }
    if (pos_ >= p_.size()) error("']' closing a character class");
    ++pos_;
    Node n{Node::chars};
    n.ranges = negated ? code_point_sets::complement(ranges) : code_point_sets::normalize(ranges);
    return n;
  }

  std::string_view p_;
  const GrammarLimits& limits_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
};

// Thompson NFA: epsilon moves, and the anchors as moves taken only at the name's start (^) or end ($).
struct Nfa {
  struct State {
    std::vector<std::pair<Range, int>> moves;
    std::vector<int> epsilon, at_begin, at_end;
  };
  std::vector<State> states;

  int add() {
    if (states.size() >= kMaxNfaStates)
      throw GrammarError(fmt::format("regex: the pattern's automaton exceeds {} states (repetitions expand)", kMaxNfaStates));
    states.emplace_back();
    return static_cast<int>(states.size()) - 1;
  }

  // The fragment for `n`: its entry and exit states.
  std::pair<int, int> build(const Node& n) {
    const int in = add(), out = add();
    switch (n.kind) {
      case Node::chars:
        for (Range r : n.ranges) states[in].moves.push_back({r, out});
        break;
      case Node::begin: states[in].at_begin.push_back(out); break;
      case Node::end: states[in].at_end.push_back(out); break;
      case Node::sequence: {
        int at = in;
        for (const Node& child : n.children) {
          auto [ci, co] = build(child);
          states[at].epsilon.push_back(ci);
          at = co;
        }
        states[at].epsilon.push_back(out);
        break;
      }
      case Node::choice:
        for (const Node& child : n.children) {
          auto [ci, co] = build(child);
          states[in].epsilon.push_back(ci);
          states[co].epsilon.push_back(out);
        }
        break;
      case Node::repeat: {
        int at = in;
        for (int i = 0; i < n.min; ++i) {
          auto [ci, co] = build(n.children[0]);
          states[at].epsilon.push_back(ci);
          at = co;
        }
        if (n.max < 0) {
          auto [ci, co] = build(n.children[0]);
          states[at].epsilon.push_back(ci);
          states[co].epsilon.push_back(at);
          states[at].epsilon.push_back(out);
        } else {
          for (int i = n.min; i < n.max; ++i) {
            auto [ci, co] = build(n.children[0]);
            states[at].epsilon.push_back(ci);
            states[at].epsilon.push_back(out);
            at = co;
          }
          states[at].epsilon.push_back(out);
        }
        break;
      }
    }
    return {in, out};
  }

  std::vector<int> closure(std::vector<int> set, bool begin, bool end) const {
    std::vector<bool> seen(states.size());
    std::vector<int> todo = set, out;
    while (!todo.empty()) {
      const int s = todo.back();
      todo.pop_back();
      if (seen[s]) continue;
      seen[s] = true;
      out.push_back(s);
      for (int t : states[s].epsilon) todo.push_back(t);
      if (begin)
        for (int t : states[s].at_begin) todo.push_back(t);
      if (end)
        for (int t : states[s].at_end) todo.push_back(t);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

// Splits [0, kEnd) at every range bound given: the pieces on which all of them agree.
std::vector<uint32_t> cut_points(const std::vector<Range>& ranges) {
  std::vector<uint32_t> points{0, kEnd};
  for (Range r : ranges) points.push_back(r.lo), points.push_back(r.hi + 1);
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return points;
}

// The canonical JSON writing of these code points inside a string, as a GBNF expression ("" when
// none can be written: only surrogates).
std::string json_characters(const std::vector<Range>& ranges) {
  uint32_t controls = 0;  // bit c: code point c < 0x20
  bool quote = false, backslash = false;
  std::string cls;
  auto plain = [&](uint32_t lo, uint32_t hi) {  // no escapes, no surrogates within
    cls += fmt::format("\\U{:08X}", lo);
    if (hi > lo) cls += fmt::format("-\\U{:08X}", hi);
  };
  for (Range r : ranges) {
    for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 0x1F); ++c) controls |= 1u << c;
    quote = quote || (r.lo <= '"' && '"' <= r.hi);
    backslash = backslash || (r.lo <= '\\' && '\\' <= r.hi);
    // The plain stretches: r minus [0, 0x1F], '"', '\\' and the surrogates.
    const Range gaps[] = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0xD800, 0xDFFF}};
    uint32_t lo = r.lo;
    for (Range g : gaps) {
      if (lo > r.hi) break;
      if (g.hi < lo) continue;
      if (g.lo > lo) plain(lo, std::min(r.hi, g.lo - 1));
      lo = std::max(lo, g.hi + 1);
    }
    if (lo <= r.hi) plain(lo, r.hi);
  }
  std::vector<std::string> options;
  if (!cls.empty()) options.push_back("[" + cls + "]");
  if (quote) options.push_back(gbnf_literal("\\\""));
  if (backslash) options.push_back(gbnf_literal("\\\\"));
  static const char* const kShort[14] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                         "\\b", "\\t", "\\n", nullptr, "\\f", "\\r"};
  constexpr uint32_t kShortBits = (1u << 8) | (1u << 9) | (1u << 10) | (1u << 12) | (1u << 13);
  if (controls == 0xFFFFFFFFu) {
    options.push_back(R"("\\" [bfnrt])");
    // \u0008 ... would be a second writing of \b, \t, \n, \f, \r: only 00-07, 0b, 0e, 0f, 1x.
    options.push_back(R"("\\u00" ( "0" [0-7bef] | "1" [0-9a-f] ))");
  } else {
    for (uint32_t c = 0; c < 0x20; ++c)
      if (controls >> c & 1) options.push_back(gbnf_literal((kShortBits >> c & 1) ? kShort[c] : fmt::format("\\u{:04x}", c)));
  }
  if (options.empty()) return "";
  if (options.size() == 1) return options[0];
  std::string out = "(";
  for (std::size_t i = 0; i < options.size(); ++i) out += (i ? " | " : " ") + options[i];
  return out + " )";
}

std::vector<uint32_t> codepoints(std::string_view utf8) {
  std::vector<uint32_t> out;
  for (std::size_t i = 0; i < utf8.size();) {
    const unsigned char c = static_cast<unsigned char>(utf8[i]);
    const int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (int k = 1; k < len && i + k < utf8.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

}  // namespace

PatternDfa PatternDfa::compile(std::string_view pattern, const GrammarLimits& limits) {
  if (pattern.size() > limits.max_regex_bytes)
    throw GrammarError(fmt::format("the regex is {} bytes; at most {} are accepted (--max-regex-bytes)", pattern.size(),
                                   limits.max_regex_bytes));
  const Node tree = PatternParser(pattern, limits).parse();
  Nfa nfa;
  // Search: any code points, the pattern, any code points.
  const int start = nfa.add(), final_state = nfa.add();
  auto [in, out] = nfa.build(tree);
  nfa.states[start].moves.push_back({{0, kEnd - 1}, start});
  nfa.states[start].epsilon.push_back(in);
  nfa.states[out].epsilon.push_back(final_state);
  nfa.states[final_state].moves.push_back({{0, kEnd - 1}, final_state});

  PatternDfa dfa;
  std::map<std::pair<std::vector<int>, bool>, int> ids;
  std::deque<std::pair<std::vector<int>, bool>> todo;
  auto id_of = [&](std::vector<int> set, bool at_start) {
    auto key = std::make_pair(std::move(set), at_start);
    auto it = ids.find(key);
    if (it != ids.end()) return it->second;
    if (ids.size() >= kMaxDfaStates)
      throw GrammarError(fmt::format("regex: the pattern's automaton exceeds {} states", kMaxDfaStates));
    const int id = static_cast<int>(ids.size());
    ids.emplace(key, id);
    todo.push_back(key);
    dfa.edges.emplace_back();
    dfa.accepting.push_back(false);
    return id;
  };
  dfa.start = id_of(nfa.closure({start}, true, false), true);
  while (!todo.empty()) {
    auto [set, at_start] = todo.front();
    todo.pop_front();
    const int id = ids.at({set, at_start});
    const std::vector<int> ending = nfa.closure(set, at_start, true);
    dfa.accepting[id] = std::binary_search(ending.begin(), ending.end(), final_state);
    std::vector<Range> bounds;
    for (int s : set)
      for (const auto& [r, t] : nfa.states[s].moves) bounds.push_back(r);
    const std::vector<uint32_t> points = cut_points(bounds);
    std::vector<Edge> edges;
    for (std::size_t i = 0; i + 1 < points.size(); ++i) {
      const uint32_t lo = points[i], hi = points[i + 1] - 1;
      std::vector<int> next;
      for (int s : set)
        for (const auto& [r, t] : nfa.states[s].moves)
          if (r.lo <= lo && hi <= r.hi) next.push_back(t);
      const int target = id_of(nfa.closure(next, false, false), false);
      if (!edges.empty() && edges.back().target == target && edges.back().hi + 1 == lo) edges.back().hi = hi;
      else edges.push_back({lo, hi, target});
    }
    dfa.edges[id] = std::move(edges);
  }
  return dfa;
}

bool PatternDfa::matches(std::string_view utf8) const {
  int state = start;
  for (uint32_t cp : codepoints(utf8)) {
    const auto& e = edges[state];
    auto it = std::upper_bound(e.begin(), e.end(), cp, [](uint32_t v, const Edge& edge) { return v < edge.lo; });
    state = std::prev(it)->target;
  }
  return accepting[state];
}

std::map<std::vector<bool>, std::string> unlisted_name_groups(const std::vector<PatternDfa>& patterns,
                                                              const std::vector<std::string>& listed, const RuleSink& sink,
                                                              const std::string& hint, const GrammarLimits& limits) {
  // The listed names' trie over code points; node -1: off the trie (no listed name has this prefix).
  struct TrieNode {
    std::map<uint32_t, int> children;
    bool terminal = false;
  };
  std::vector<TrieNode> trie(1);
  for (const std::string& name : listed) {
    int at = 0;
    for (uint32_t cp : codepoints(name)) {
      auto it = trie[at].children.find(cp);
      if (it == trie[at].children.end()) {
        trie.emplace_back();
        it = trie[at].children.emplace(cp, static_cast<int>(trie.size()) - 1).first;
      }
      at = it->second;
    }
    trie[at].terminal = true;
  }

  // The product automaton: a state is each pattern's state and the trie node.
  using Tuple = std::vector<int>;
  const std::size_t n = patterns.size();
  std::map<Tuple, int> ids;
  std::vector<Tuple> tuples;
  std::vector<std::vector<PatternDfa::Edge>> edges;
  // Each state is a rule of some hundred bytes: a bound that keeps the grammar within its limit.
  const std::size_t state_limit = std::min<std::size_t>(kMaxDfaStates, limits.max_grammar_bytes / 256);
  auto id_of = [&](const Tuple& t) {
    auto it = ids.find(t);
    if (it != ids.end()) return it->second;
    if (ids.size() >= state_limit)
      throw GrammarError(fmt::format("the property-name automaton of the patterns exceeds {} states", state_limit));
    const int id = static_cast<int>(tuples.size());
    ids.emplace(t, id);
    tuples.push_back(t);
    edges.emplace_back();
    return id;
  };
  Tuple first(n + 1);
  for (std::size_t i = 0; i < n; ++i) first[i] = patterns[i].start;
  first[n] = 0;
  id_of(first);
  for (std::size_t s = 0; s < tuples.size(); ++s) {
    const Tuple t = tuples[s];
    std::vector<Range> bounds;
    for (std::size_t i = 0; i < n; ++i)
      for (const auto& e : patterns[i].edges[t[i]]) bounds.push_back({e.lo, e.hi});
    if (t[n] >= 0)
      for (const auto& [cp, child] : trie[t[n]].children) bounds.push_back({cp, cp});
    const std::vector<uint32_t> points = cut_points(bounds);
    std::vector<PatternDfa::Edge> out;
    for (std::size_t k = 0; k + 1 < points.size(); ++k) {
      const uint32_t lo = points[k], hi = points[k + 1] - 1;
      Tuple next(n + 1);
      for (std::size_t i = 0; i < n; ++i) {
        const auto& e = patterns[i].edges[t[i]];
        auto it = std::upper_bound(e.begin(), e.end(), lo, [](uint32_t v, const PatternDfa::Edge& edge) { return v < edge.lo; });
        next[i] = std::prev(it)->target;
      }
      next[n] = -1;
      if (t[n] >= 0 && lo == hi)
        if (auto it = trie[t[n]].children.find(lo); it != trie[t[n]].children.end()) next[n] = it->second;
      const int target = id_of(next);
      if (!out.empty() && out.back().target == target && out.back().hi + 1 == lo) out.back().hi = hi;
      else out.push_back({lo, hi, target});
    }
    edges[s] = std::move(out);
  }

  // A name ending in a state belongs to its group unless it is a listed name.
  const std::size_t count = tuples.size();
  std::vector<std::optional<std::vector<bool>>> group(count);
  for (std::size_t s = 0; s < count; ++s) {
    const Tuple& t = tuples[s];
    if (t[n] >= 0 && trie[t[n]].terminal) continue;
    std::vector<bool> g(n);
    for (std::size_t i = 0; i < n; ++i) g[i] = patterns[i].accepting[t[i]];
    group[s] = g;
  }
  // A name is written in UTF-8: a stretch of surrogates alone leads nowhere.
  auto writable = [](const PatternDfa::Edge& e) { return !(e.lo >= 0xD800 && e.hi <= 0xDFFF); };
  std::set<std::vector<bool>> groups;
  for (const auto& g : group)
    if (g) groups.insert(*g);

  std::map<std::vector<bool>, std::string> out;
  for (const std::vector<bool>& g : groups) {
    // The states from which a name of this group can still end, then one rule for each.
    std::vector<bool> live(count);
    for (std::size_t s = 0; s < count; ++s) live[s] = group[s] && *group[s] == g;
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t s = 0; s < count; ++s)
        if (!live[s])
          for (const auto& e : edges[s])
            if (live[e.target] && writable(e)) {
              live[s] = changed = true;
              break;
            }
    }
    std::vector<std::string> names(count);
    for (std::size_t s = 0; s < count; ++s)
      if (live[s]) names[s] = sink.reserve(hint);
    bool any = false;
    for (std::size_t s = 0; s < count; ++s) {
      if (!live[s]) continue;
      std::map<int, std::vector<Range>> by_target;
      for (const auto& e : edges[s])
        if (live[e.target] && writable(e)) by_target[e.target].push_back({e.lo, e.hi});
      std::string body = group[s] && *group[s] == g ? "\"\"" : "";
      for (const auto& [target, ranges] : by_target) {
        const std::string chars = json_characters(ranges);
        if (chars.empty()) continue;
        body += (body.empty() ? "" : " | ") + chars + " " + names[target];
      }
      if (body.empty()) throw GrammarError("the property-name automaton has a state with no way on");  // live: cannot be
      sink.define(names[s], body);
      any = true;
    }
    if (any && live[0]) out[g] = "\"\\\"\" " + names[0] + " \"\\\"\"";
  }
  return out;
}

}  // namespace inferlab
