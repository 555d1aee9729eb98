// GBNF text -> the byte-level Grammar (grammar.h): rules, literals, classes lowered to UTF-8 byte
// ranges, groups and quantifiers lowered to helper rules, then checked (undefined rules, left
// recursion, limits) and flattened.
#include <algorithm>
#include <map>

#include "inferlab/grammar/grammar.h"
#include "inferlab/util/utf8_encode.h"

namespace inferlab {
namespace {

using Element = Grammar::Element;
using ByteSet = Grammar::ByteSet;
using Sequence = std::vector<Element>;

struct Range {
  uint32_t lo, hi;
};

constexpr uint32_t kMaxCodepoint = 0x10FFFF;


// A code point range as UTF-8 byte-range sequences (each sequence: one byte range per position),
// split so that every byte string in the product of the ranges is a code point of the range.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // surrogates are not characters
    if (lo < 0xD800) utf8_sequences(lo, 0xD7FF, out);
    if (hi > 0xDFFF) utf8_sequences(0xE000, hi, out);
    return;
  }
  static constexpr uint32_t kLast[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t last : kLast)
    if (lo <= last && hi > last) {
      utf8_sequences(lo, last, out);
      utf8_sequences(last + 1, hi, out);
      return;
    }
  if (hi <= 0x7F) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (std::size_t i = 0; i < a.size(); ++i) seq.push_back({static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])});
  out.push_back(std::move(seq));
}

class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : text_(text), limits_(limits) {}

  Grammar parse() {
    if (text_.size() > limits_.max_grammar_bytes)
      throw GrammarError(fmt::format("the grammar is {} bytes; at most {} are accepted (--max-grammar-bytes)", text_.size(),
                                     limits_.max_grammar_bytes));
    skip_space(true);
    while (pos_ < text_.size()) {
      std::string name = identifier();
      if (name.empty()) error("a rule name");
      skip_space(false);
      if (text_.substr(pos_, 3) != "::=") error("'::=' after the rule name '" + name + "'");
      pos_ += 3;
      uint32_t id = rule(name);
      if (defined_[id]) throw GrammarError(fmt::format("grammar: rule '{}' is defined twice", name));
      defined_[id] = true;
      rules_[id] = alternatives(false);
      skip_space(true);
    }
    return finish();
  }

 private:
  [[noreturn]] void error(const std::string& expected) {
    std::size_t line = 1 + std::count(text_.begin(), text_.begin() + std::min(pos_, text_.size()), '\n');
    std::string near(text_.substr(pos_, 20));
    throw GrammarError(fmt::format("grammar: expected {} at line {} (near '{}')", expected, line, near));
  }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

  std::string identifier() {
    std::size_t start = pos_;
    while (pos_ < text_.size() && name_char(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // At a newline outside parentheses: does a new rule (or the end) follow?
  bool rule_ends_here() {
    std::size_t saved = pos_;
    skip_space(true);
    bool ends = pos_ >= text_.size();
    if (!ends) {
      std::string name = identifier();
      skip_space(false);
      ends = !name.empty() && text_.substr(pos_, 3) == "::=";
    }
    pos_ = saved;
    return ends;
  }

  std::vector<Sequence> alternatives(bool nested) {
    std::vector<Sequence> alts;
    alts.push_back(sequence(nested));
    while (pos_ < text_.size() && text_[pos_] == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(sequence(nested));
    }
    return alts;
  }

  Sequence sequence(bool nested) {
    Sequence seq;
    for (;;) {
      skip_space(nested);
      if (pos_ >= text_.size()) break;
      char c = text_[pos_];
      if (c == '\n') {
        if (rule_ends_here()) break;
        skip_space(true);
        continue;
      }
      if (c == '|' || c == ')') break;
      std::size_t item_start = seq.size();
      if (c == '"') {
        ++pos_;
        std::string bytes;
        while (pos_ < text_.size() && text_[pos_] != '"') {
          if (text_[pos_] == '\n') error("the closing '\"' of a literal");
          if (text_[pos_] == '\\') append_utf8(bytes, escape());
          else bytes += text_[pos_++];
        }
        if (pos_ >= text_.size()) error("the closing '\"' of a literal");
        ++pos_;
        for (unsigned char b : bytes) {
          ByteSet set{};
          set[b >> 6] |= uint64_t{1} << (b & 63);
          seq.push_back({Grammar::bytes, set_id(set)});
        }
      } else if (c == '[') {
        ++pos_;
        bool negated = pos_ < text_.size() && text_[pos_] == '^';
        if (negated) ++pos_;
        std::vector<Range> ranges;
        while (pos_ < text_.size() && text_[pos_] != ']') {
          uint32_t lo = class_char();
          uint32_t hi = lo;
          if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
            ++pos_;
            hi = class_char();
          }
          if (hi < lo) error("a character range whose end is not below its start");
          ranges.push_back({lo, hi});
        }
        if (pos_ >= text_.size()) error("the closing ']' of a character class");
        ++pos_;
        seq.push_back(char_class(std::move(ranges), negated));
      } else if (c == '.') {
        ++pos_;
        seq.push_back(char_class({{0, kMaxCodepoint}}, false));
      } else if (c == '(') {
        if (++nesting_ > limits_.max_grammar_nesting)
          throw GrammarError(fmt::format("grammar: parentheses nested deeper than {} levels at line {}", limits_.max_grammar_nesting,
                                         1 + std::count(text_.begin(), text_.begin() + pos_, '\n')));
        ++pos_;
        skip_space(true);
        uint32_t group = fresh("group");
        auto alts = alternatives(true);
        --nesting_;
        rules_[group] = std::move(alts);
        skip_space(true);
        if (pos_ >= text_.size() || text_[pos_] != ')') error("')'");
        ++pos_;
        seq.push_back({Grammar::ref, group});
      } else if (c == '<') {
        seq.push_back({Grammar::token, token_id()});
      } else if (name_char(c)) {
        std::string name = identifier();
        seq.push_back({Grammar::ref, rule(name)});
      } else {
        error("a literal, a class, a group, a token <[id]> or a rule name");
      }
      quantifier(seq, item_start);
      count_elements(seq.size());
    }
    elements_ += seq.size() + 1;
    return seq;
  }

  void count_elements(std::size_t n) {
    if (elements_ + n > limits_.max_elements)
      throw GrammarError(fmt::format("the grammar expands to more than {} elements; simplify it (repetition bounds count "
                                     "as copies)", limits_.max_elements));
  }

  // The last item of `seq` (from `start`) under * + ? {m,n}, as helper rules.
  void quantifier(Sequence& seq, std::size_t start) {
    if (pos_ >= text_.size()) return;
    char c = text_[pos_];
    int min = 0, max = -1;
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      min = 1;
    } else if (c == '?') {
      ++pos_;
      max = 1;
    } else if (c == '{') {
      ++pos_;
      skip_space(false);
      min = number();
      skip_space(false);
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        skip_space(false);
        max = pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])) ? number() : -1;
        skip_space(false);
      } else {
        max = min;
      }
      if (pos_ >= text_.size() || text_[pos_] != '}') error("'}' closing a repetition");
      ++pos_;
      if (max >= 0 && max < min) error("a repetition {m,n} with m <= n");
    } else {
      return;
    }
    Sequence item(seq.begin() + static_cast<std::ptrdiff_t>(start), seq.end());
    seq.resize(start);
    if (item.size() != 1) {
      uint32_t wrapped = fresh("item");
      rules_[wrapped] = {item};
      item = {{Grammar::ref, wrapped}};
    }
    const Element x = item[0];
    for (int i = 0; i < min; ++i) seq.push_back(x);
    elements_ += 3 * static_cast<std::size_t>(std::max(max - min, 1));
    count_elements(seq.size());
    if (max < 0) {
      uint32_t star = fresh("star");  // star ::= x star |
      rules_[star] = {{x, {Grammar::ref, star}}, {}};
      seq.push_back({Grammar::ref, star});
    } else if (max > min) {
      // x? (x (x)?)? ... : each optional copy nests the next, so "x" then stop is never ambiguous.
      uint32_t inner = 0;
      for (int i = 0; i < max - min; ++i) {
        uint32_t opt = fresh("opt");
        if (i == 0) rules_[opt] = {{x}, {}};
        else rules_[opt] = {{x, {Grammar::ref, inner}}, {}};
        inner = opt;
      }
      seq.push_back({Grammar::ref, inner});
    }
  }

  int number() {
    std::size_t start = pos_;
    long value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      value = value * 10 + (text_[pos_++] - '0');
      if (value > limits_.max_repetition)
        throw GrammarError(fmt::format("grammar: a repetition bound above {} (the limit)", limits_.max_repetition));
    }
    if (pos_ == start) error("a number");
    return static_cast<int>(value);
  }

  // <[123]>: a token by its id (whether the vocabulary has it is checked against the vocabulary).
  uint32_t token_id() {
    if (text_.substr(pos_, 2) != "<[") error("'<[' opening a token id such as <[200005]>");
    pos_ += 2;
    const std::size_t start = pos_;
    uint64_t id = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      id = id * 10 + static_cast<uint64_t>(text_[pos_++] - '0');
      if (id > static_cast<uint64_t>(INT32_MAX)) error("a token id below 2^31");
    }
    if (pos_ == start) error("a token id (digits) inside <[...]>");
    if (text_.substr(pos_, 2) != "]>") error("']>' closing a token id");
    pos_ += 2;
    return static_cast<uint32_t>(id);
  }

  uint32_t hex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= text_.size() || !std::isxdigit(static_cast<unsigned char>(text_[pos_]))) error("a hex digit");
      char c = text_[pos_++];
      value = value * 16 + (std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10));
    }
    if (value > kMaxCodepoint) error("a code point up to U+10FFFF");
    return value;
  }

  // After a backslash: the code point it stands for.
  uint32_t escape() {
    ++pos_;
    if (pos_ >= text_.size()) error("an escape");
    char c = text_[pos_++];
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '0': return 0;
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '.': return static_cast<unsigned char>(c);
      default: --pos_; error("a known escape (\\n \\r \\t \\0 \\xHH \\uHHHH \\UHHHHHHHH \\\\ \\\" \\[ \\] \\- \\^)");
    }
  }

  // One (possibly multi-byte) character of a class.
  uint32_t class_char() {
    if (text_[pos_] == '\\') return escape();
    unsigned char c = static_cast<unsigned char>(text_[pos_]);
    int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len == 0 || pos_ + len > text_.size()) error("valid UTF-8 in a character class");
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (int i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<unsigned char>(text_[pos_ + i]) & 0x3F);
    pos_ += len;
    return cp;
  }

  Element char_class(std::vector<Range> ranges, bool negated) {
    std::sort(ranges.begin(), ranges.end(), [](Range a, Range b) { return a.lo < b.lo; });
    std::vector<Range> merged;
    for (Range r : ranges) {
      if (!merged.empty() && r.lo <= merged.back().hi + 1) merged.back().hi = std::max(merged.back().hi, r.hi);
      else merged.push_back(r);
    }
    if (negated) {
      std::vector<Range> complement;
      uint32_t next = 0;
      for (Range r : merged) {
        if (r.lo > next) complement.push_back({next, r.lo - 1});
        next = r.hi + 1;
      }
      if (next <= kMaxCodepoint) complement.push_back({next, kMaxCodepoint});
      merged = std::move(complement);
    }
    ByteSet ascii{};
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> sequences;
    for (Range r : merged) {
      for (uint32_t cp = r.lo; cp <= std::min<uint32_t>(r.hi, 0x7F); ++cp) ascii[cp >> 6] |= uint64_t{1} << (cp & 63);
      if (r.hi >= 0x80) utf8_sequences(std::max<uint32_t>(r.lo, 0x80), r.hi, sequences);
    }
    if (sequences.empty()) {
      if (ascii == ByteSet{}) error("a character class that matches something");
      return {Grammar::bytes, set_id(ascii)};
    }
    std::string key;
    for (Range r : merged) key += fmt::format("{:x}-{:x},", r.lo, r.hi);
    if (auto it = class_rules_.find(key); it != class_rules_.end()) return {Grammar::ref, it->second};
    uint32_t id = fresh("char");
    std::vector<Sequence> alts;
    if (ascii != ByteSet{}) alts.push_back({{Grammar::bytes, set_id(ascii)}});
    for (const auto& seq : sequences) {
      Sequence s;
      for (auto [lo, hi] : seq) {
        ByteSet set{};
        for (int b = lo; b <= hi; ++b) set[b >> 6] |= uint64_t{1} << (b & 63);
        s.push_back({Grammar::bytes, set_id(set)});
      }
      alts.push_back(std::move(s));
    }
    rules_[id] = std::move(alts);
    class_rules_[key] = id;
    return {Grammar::ref, id};
  }

  uint32_t set_id(const ByteSet& set) {
    auto [it, inserted] = set_ids_.try_emplace(set, static_cast<uint32_t>(sets_.size()));
    if (inserted) sets_.push_back(set);
    return it->second;
  }

  uint32_t rule(const std::string& name) {
    auto [it, inserted] = by_name_.try_emplace(name, static_cast<uint32_t>(names_.size()));
    if (inserted) {
      names_.push_back(name);
      rules_.emplace_back();
      defined_.push_back(false);
    }
    return it->second;
  }

  uint32_t fresh(const std::string& hint) {
    uint32_t id = static_cast<uint32_t>(names_.size());
    names_.push_back(fmt::format("{}-{}", hint, id));
    rules_.emplace_back();
    defined_.push_back(true);
    return id;
  }

  Grammar finish() {
    auto root = by_name_.find("root");
    if (root == by_name_.end() || !defined_[root->second]) throw GrammarError("grammar: no 'root' rule (the start rule)");
    for (std::size_t r = 0; r < rules_.size(); ++r)
      if (!defined_[r]) throw GrammarError(fmt::format("grammar: rule '{}' is used but never defined", names_[r]));
    check_left_recursion();

    Grammar g;
    g.root = root->second;
    g.rule_names = names_;
    g.sets = sets_;
    g.alternatives.resize(rules_.size());
    for (std::size_t r = 0; r < rules_.size(); ++r) {
      for (const Sequence& alt : rules_[r]) {
        g.alternatives[r].push_back(static_cast<uint32_t>(g.elements.size()));
        g.elements.insert(g.elements.end(), alt.begin(), alt.end());
        g.elements.push_back({Grammar::end, static_cast<uint32_t>(r)});
      }
    }
    if (g.elements.size() > limits_.max_elements)
      throw GrammarError(fmt::format("the grammar expands to {} elements; at most {} are accepted", g.elements.size(),
                                     limits_.max_elements));
    return g;
  }

  // A rule that can reach itself without consuming a byte would expand forever.
  void check_left_recursion() {
    const std::size_t n = rules_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Sequence& alt : rules_[r]) {
          bool all = std::all_of(alt.begin(), alt.end(), [&](Element e) { return e.kind == Grammar::ref && nullable[e.value]; });
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> firsts(n);  // rules reachable at the start of r
    for (std::size_t r = 0; r < n; ++r)
      for (const Sequence& alt : rules_[r])
        for (Element e : alt) {
          if (e.kind != Grammar::ref) break;
          firsts[r].push_back(e.value);
          if (!nullable[e.value]) break;
        }
    // Depth-first with an explicit path: a chain of 50,000 rules would overflow a recursive one.
    std::vector<int> state(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, std::size_t>> path;  // rule, index of its next first
    for (uint32_t start = 0; start < n; ++start) {
      if (state[start] != 0) continue;
      state[start] = 1;
      path.push_back({start, 0});
      while (!path.empty()) {
        const uint32_t r = path.back().first;
        const std::size_t i = path.back().second++;
        if (i == firsts[r].size()) {
          state[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t next = firsts[r][i];
        if (state[next] == 1)
          throw GrammarError(fmt::format("grammar: rule '{}' is left-recursive (it can reach itself before any character; "
                                         "rewrite it right-recursively)", names_[next]));
        if (state[next] == 0) {
          state[next] = 1;
          path.push_back({next, 0});
        }
      }
    }
  }

  std::string_view text_;
  const GrammarLimits& limits_;
  std::size_t pos_ = 0;
  std::size_t elements_ = 0;
  int nesting_ = 0;  // parentheses open at pos_
  std::vector<std::vector<Sequence>> rules_;
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::map<std::string, uint32_t> by_name_;
  std::map<ByteSet, uint32_t> set_ids_;
  std::vector<ByteSet> sets_;
  std::map<std::string, uint32_t> class_rules_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, const GrammarLimits& limits) { return Parser(text, limits).parse(); }

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

}  // namespace inferlab
