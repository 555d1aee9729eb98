// Regular expression -> GBNF expression (regex.h), by recursive descent over the pattern.
#include "inferlab/grammar/regex.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "grammar/codepoint_ranges.h"
#include "inferlab/util/utf8_encode.h"

namespace inferlab {
namespace {

using code_point_sets::complement;
using code_point_sets::kMaxCodepoint;
using code_point_sets::normalize;
using code_point_sets::Range;

std::vector<Range> subtract(const std::vector<Range>& ranges, const std::vector<Range>& removed) {
  std::vector<Range> keep = complement(removed), out;
  for (Range a : normalize(ranges))
    for (Range b : keep) {
      uint32_t lo = std::max(a.lo, b.lo), hi = std::min(a.hi, b.hi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  return out;
}

std::string utf8(uint32_t cp) {
  std::string out;
  append_utf8(out, cp);
  return out;
}

using code_point_sets::kDigit;
using code_point_sets::kWord;
const std::vector<Range> kSpace{{'\t', '\r'}, {' ', ' '}};
// A schema pattern is ECMAScript's: \s is its white space and line terminators, and `.` stops at
// any line terminator.
const std::vector<Range> kEcmaSpace{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                                    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
// Inside a JSON string these need escapes: generated only through their escaped forms.
const std::vector<Range> kJsonUnsafe{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};

class RegexParser {
 public:
  RegexParser(std::string_view pattern, bool json_string, const GrammarLimits& limits)
      : p_(pattern), json_(json_string), limits_(limits) {}

  std::string parse() {
    if (!p_.empty() && p_.front() == '^') ++pos_;
    std::vector<std::string> parts = alternation();
    if (pos_ < p_.size()) error("an operator (unbalanced ')')");
    // The expression may be embedded in a sequence (a schema pattern between quotes).
    return parts.size() == 1 ? parts[0] : fmt::format("({})", fmt::join(parts, " | "));
  }

 private:
  [[noreturn]] void error(const std::string& what) {
    throw GrammarError(fmt::format("regex: {} at offset {} of '{}'", what, pos_, std::string(p_)));
  }
  bool at_end_anchor() const { return pos_ + 1 == p_.size() && p_[pos_] == '$'; }

  // Each regex group becomes exactly one grammar group (GrammarLimits: max_regex_nesting <=
  // max_grammar_nesting), so neither alternation nor quantifiers add parentheses of their own.
  std::vector<std::string> alternation() {
    std::vector<std::string> parts{concatenation()};
    while (pos_ < p_.size() && p_[pos_] == '|') {
      ++pos_;
      parts.push_back(concatenation());
    }
    return parts;
  }

  std::string concatenation() {
    std::string out;
    while (pos_ < p_.size() && p_[pos_] != '|' && p_[pos_] != ')') {
      if (at_end_anchor()) {
        ++pos_;
        break;
      }
      std::string item = quantified();
      out += (out.empty() ? "" : " ") + item;
    }
    return out.empty() ? "\"\"" : out;
  }

  std::string quantified() {
    std::string atom_text = atom();
    if (pos_ >= p_.size()) return atom_text;
    char c = p_[pos_];
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      q = c;
      ++pos_;
    } else if (c == '{' && pos_ + 1 < p_.size() && std::isdigit(static_cast<unsigned char>(p_[pos_ + 1]))) {
      std::size_t close = p_.find('}', pos_);
      if (close == std::string_view::npos) error("'}' closing a repetition");
      q = std::string(p_.substr(pos_, close - pos_ + 1));
      for (char d : q)
        if (!std::isdigit(static_cast<unsigned char>(d)) && d != ',' && d != '{' && d != '}') error("a repetition {m,n}");
      pos_ = close + 1;
    } else {
      return atom_text;
    }
    if (pos_ < p_.size() && (p_[pos_] == '?' || p_[pos_] == '+')) ++pos_;  // lazy / possessive: same language
    return atom_text + q;  // every atom is one grammar item: a literal, a class or a group
  }

  std::string literal(uint32_t cp) {
    if (!json_) return gbnf_literal(utf8(cp));
    if (cp == '"') return gbnf_literal("\\\"");
    if (cp == '\\') return gbnf_literal("\\\\");
    if (cp == '\n') return gbnf_literal("\\n");
    if (cp == '\t') return gbnf_literal("\\t");
    if (cp == '\r') return gbnf_literal("\\r");
    if (cp == '\b') return gbnf_literal("\\b");
    if (cp == '\f') return gbnf_literal("\\f");
    if (cp < 0x20) return gbnf_literal(fmt::format("\\u{:04x}", cp));
    return gbnf_literal(utf8(cp));
  }

  std::string char_class(std::vector<Range> ranges) {
    if (json_) ranges = subtract(ranges, kJsonUnsafe);
    ranges = normalize(ranges);
    if (ranges.empty()) error("a character class that leaves no character usable");
    std::string out = "[";
    for (Range r : ranges) {
      out += fmt::format("\\U{:08X}", r.lo);
      if (r.hi > r.lo) out += fmt::format("-\\U{:08X}", r.hi);
    }
    return out + "]";
  }

  // \s inside a JSON string: the space and the other white space as is, tab / newline / vertical
  // tab / form feed / CR as their escapes.
  std::string space_class() {
    if (!json_) return char_class(kSpace);
    return "(\" \" | \"\\\\t\" | \"\\\\n\" | \"\\\\u000b\" | \"\\\\f\" | \"\\\\r\" | " +
           char_class({{0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
                       {0x3000, 0x3000}, {0xFEFF, 0xFEFF}}) + ")";
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= p_.size() || !std::isxdigit(static_cast<unsigned char>(p_[pos_]))) error("a hex digit");
      char c = p_[pos_++];
      v = v * 16 + (std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10);
    }
    return v;
  }

  uint32_t next_codepoint() {
    unsigned char c = static_cast<unsigned char>(p_[pos_]);
    int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len == 0 || pos_ + len > p_.size()) error("valid UTF-8");
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (int i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<unsigned char>(p_[pos_ + i]) & 0x3F);
    pos_ += len;
    return cp;
  }

  // After '\': a class (\d \w \s and negations) into `ranges`, or one code point.
  bool escape(std::vector<Range>& ranges, uint32_t& cp) {
    if (++pos_ >= p_.size()) error("an escape after '\\'");
    char c = p_[pos_++];
    switch (c) {
      case 'd': ranges = kDigit; return true;
      case 'D': ranges = complement(kDigit); return true;
      case 'w': ranges = kWord; return true;
      case 'W': ranges = complement(kWord); return true;
      case 's': ranges = json_ ? kEcmaSpace : kSpace; return true;
      case 'S': ranges = complement(json_ ? kEcmaSpace : kSpace); return true;
      case 'n': cp = '\n'; return false;
      case 't': cp = '\t'; return false;
      case 'r': cp = '\r'; return false;
      case 'f': cp = '\f'; return false;
      case 'v': cp = '\v'; return false;
      case '0': cp = 0; return false;
      case 'x': cp = hex(2); return false;
      case 'u': cp = hex(4); return false;
      case 'b': case 'B': --pos_; error("word boundaries (\\b, \\B) are not supported");
      default:
        if (std::isdigit(static_cast<unsigned char>(c))) {
          --pos_;
          error("back-references are not supported");
        }
        if (std::isalpha(static_cast<unsigned char>(c))) {
          --pos_;
          error(fmt::format("the escape \\{} is not supported", c));
        }
        cp = static_cast<unsigned char>(c);
        return false;
    }
  }

  std::string atom() {
    char c = p_[pos_];
    if (c == '(') {
      ++pos_;
      if (p_.substr(pos_, 2) == "?:") {
        pos_ += 2;
      } else if (p_.substr(pos_, 2) == "?<" && pos_ + 2 < p_.size() && p_[pos_ + 2] != '=' && p_[pos_ + 2] != '!') {
        std::size_t close = p_.find('>', pos_);
        if (close == std::string_view::npos) error("'>' closing a group name");
        pos_ = close + 1;
      } else if (pos_ < p_.size() && p_[pos_] == '?') {
        error("look-around and inline flags are not supported");
      }
      // Checked before recursing: a 4 KiB pattern of '(' would otherwise overflow the stack.
      if (++nesting_ > limits_.max_regex_nesting) error(fmt::format("groups nested deeper than {} levels", limits_.max_regex_nesting));
      std::vector<std::string> inner = alternation();
      --nesting_;
      if (pos_ >= p_.size() || p_[pos_] != ')') error("')'");
      ++pos_;
      return fmt::format("({})", fmt::join(inner, " | "));
    }
    if (c == '[') return bracket();
    if (c == '.') {
      ++pos_;
      if (json_) return char_class({{0, '\n' - 1}, {'\n' + 1, '\r' - 1}, {'\r' + 1, 0x2027}, {0x202A, kMaxCodepoint}});
      return char_class({{0, '\n' - 1}, {'\n' + 1, kMaxCodepoint}});
    }
    if (c == '^') error("'^' is supported only at the start");
    if (c == '$') error("'$' is supported only at the end");
    if (c == '*' || c == '+' || c == '?' || c == '{') error("something to repeat before a quantifier");
    if (c == '\\') {
      std::vector<Range> ranges;
      uint32_t cp = 0;
      if (escape(ranges, cp)) {
        if (json_ && ranges == kEcmaSpace) return space_class();
        return char_class(ranges);
      }
      return literal(cp);
    }
    return literal(next_codepoint());
  }

  std::string bracket() {
    ++pos_;
    bool negated = pos_ < p_.size() && p_[pos_] == '^';
    if (negated) ++pos_;
    std::vector<Range> ranges;
    bool first = true;
    while (pos_ < p_.size() && (p_[pos_] != ']' || first)) {
      first = false;
      uint32_t lo = 0;
      if (p_[pos_] == '\\') {
        std::vector<Range> cls;
        if (escape(cls, lo)) {
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
          if (escape(cls, hi)) error("a class escape as a range end");
        } else {
          hi = next_codepoint();
        }
        if (hi < lo) error("a range whose end is not below its start");
      }
      ranges.push_back({lo, hi});
    }
    if (pos_ >= p_.size()) error("']' closing a character class");
    ++pos_;
    return char_class(negated ? complement(ranges) : ranges);
  }

  std::string_view p_;
  bool json_;
  const GrammarLimits& limits_;
  std::size_t pos_ = 0;
  int nesting_ = 0;  // groups open at pos_
};

}  // namespace

std::string regex_to_gbnf_expression(std::string_view pattern, bool json_string, const GrammarLimits& limits) {
  if (pattern.size() > limits.max_regex_bytes)
    throw GrammarError(fmt::format("the regex is {} bytes; at most {} are accepted (--max-regex-bytes)", pattern.size(),
                                   limits.max_regex_bytes));
  return RegexParser(pattern, json_string, limits).parse();
}

std::string regex_to_gbnf(std::string_view pattern, const GrammarLimits& limits) {
  return "root ::= " + regex_to_gbnf_expression(pattern, false, limits) + "\n";
}

}  // namespace inferlab
