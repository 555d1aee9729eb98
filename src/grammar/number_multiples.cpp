// Multiples of a decimal step as GBNF (number_multiples.h).
#include "grammar/number_multiples.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <string>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace inferlab {
namespace {

// The digits [0-9] (or [1-9]) from remainder r, grouped by the remainder each leads to.
std::map<uint64_t, std::string> digits_by_target(uint64_t r, uint64_t modulus, char first) {
  std::map<uint64_t, std::string> out;
  for (char d = first; d <= '9'; ++d) out[(r * 10 + static_cast<uint64_t>(d - '0')) % modulus] += d;
  return out;
}

std::string digit_class(const std::string& digits) { return digits.size() == 1 ? fmt::format("\"{}\"", digits) : "[" + digits + "]"; }

uint64_t pow10_mod(int exponent, uint64_t modulus) {
  uint64_t v = 1 % modulus;
  for (int i = 0; i < exponent; ++i) v = v * 10 % modulus;
  return v;
}

}  // namespace

std::optional<DecimalStep> parse_decimal_step(std::string_view text) {
  std::size_t i = 0;
  if (i < text.size() && text[i] == '-') return std::nullopt;
  std::string digits;
  int decimals = 0;
  bool point = false;
  for (; i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'); ++i) {
    if (text[i] == '.') {
      point = true;
      continue;
    }
    digits += text[i];
    if (point) ++decimals;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool negative = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    int exponent = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      exponent = exponent * 10 + (text[i] - '0');
      if (exponent > 400) return std::nullopt;
    }
    decimals += negative ? exponent : -exponent;
  }
  if (i != text.size() || digits.empty()) return std::nullopt;
  const std::size_t nonzero = digits.find_first_not_of('0');
  if (nonzero == std::string::npos) return std::nullopt;  // zero
  digits = digits.substr(nonzero);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back(), --decimals;
  for (; decimals < 0; ++decimals) digits += '0';
  if (digits.size() > 15) return std::nullopt;
  return DecimalStep{std::stoull(digits), decimals};
}

uint64_t integer_modulus(const DecimalStep& step) {
  // k * 10^-d * m is an integer iff 10^d divides k * m: k must supply what m lacks of 2^d and 5^d.
  uint64_t m = step.mantissa;
  for (int i = 0; i < step.decimals && m % 2 == 0; ++i) m /= 2;
  for (int i = 0; i < step.decimals && m % 5 == 0; ++i) m /= 5;
  return m;
}

uint64_t multiples_rule_count(const DecimalStep& step, bool integer) {
  if (integer || step.decimals == 0) return integer_modulus(step);
  return step.mantissa * static_cast<uint64_t>(step.decimals + 1);
}

std::string multiples_expression(const DecimalStep& step, bool integer, const Signs& signs, const RuleSink& sink,
                                 const std::string& hint) {
  const bool fraction = !integer && step.decimals > 0;
  const uint64_t modulus = fraction ? step.mantissa : integer_modulus(step);
  const int d = fraction ? step.decimals : 0;
  // A value ends well when value * 10^d = 0 (mod modulus); with i fraction digits read and
  // r = value * 10^i (mod modulus), when r * 10^(d - i) = 0.
  auto ends_well = [&](uint64_t r, int i) { return r * pow10_mod(d - i, modulus) % modulus == 0; };
  // part[i][r] (i = 1..d fraction digits read): live when a multiple can still end from there.
  std::vector<std::vector<bool>> live(d + 2, std::vector<bool>(modulus, false));
  for (int i = d; i >= 1; --i)
    for (uint64_t r = 0; r < modulus; ++r) {
      bool ok = ends_well(r, i);
      for (int digit = 0; !ok && i < d && digit <= 9; ++digit) ok = live[i + 1][(r * 10 + digit) % modulus];
      live[i][r] = ok;
    }
  std::vector<std::vector<std::string>> part(d + 1, std::vector<std::string>(modulus));
  for (int i = 1; i <= d; ++i)
    for (uint64_t r = 0; r < modulus; ++r)
      if (live[i][r]) part[i][r] = sink.reserve(hint + "-frac");
  // Digits from r into fraction position i (live targets only).
  auto fraction_digits = [&](uint64_t r, int i) {
    std::map<uint64_t, std::string> by_target;
    for (char c = '0'; c <= '9'; ++c) {
      const uint64_t t = (r * 10 + static_cast<uint64_t>(c - '0')) % modulus;
      if (live[i][t]) by_target[t] += c;
    }
    std::string out;
    for (const auto& [t, digits] : by_target) out += (out.empty() ? "" : " | ") + digit_class(digits) + " " + part[i][t];
    return out;
  };
  for (int i = 1; i <= d; ++i)
    for (uint64_t r = 0; r < modulus; ++r) {
      if (!live[i][r]) continue;
      std::string body = ends_well(r, i) ? "\"\"" : "";
      if (i < d) {
        const std::string more = fraction_digits(r, i + 1);
        if (!more.empty()) body += (body.empty() ? "" : " | ") + more;
      }
      sink.define(part[i][r], body);
    }
  // After the integer digits with remainder r: the end when r is a multiple, and / or a point and
  // fraction digits ("" when neither can follow).
  auto after_integer = [&](uint64_t r) {
    std::string out = ends_well(r, 0) ? "\"\"" : "";
    if (fraction) {
      const std::string digits = fraction_digits(r, 1);
      if (!digits.empty()) out += (out.empty() ? "" : " | ") + std::string("\".\" ( ") + digits + " )";
    }
    return out;
  };
  // whole[r]: integer digits read, value = r (mod modulus); a multiple can always still follow.
  std::vector<std::string> whole(modulus);
  for (uint64_t r = 0; r < modulus; ++r) whole[r] = sink.reserve(hint + "-int");
  for (uint64_t r = 0; r < modulus; ++r) {
    std::string body;
    for (const auto& [target, digits] : digits_by_target(r, modulus, '0'))
      body += (body.empty() ? "" : " | ") + digit_class(digits) + " " + whole[target];
    const std::string end = after_integer(r);
    sink.define(whole[r], end.empty() ? body : body + " | " + end);
  }
  std::string nonzero_start;  // a nonzero first digit: a value of at least 1
  for (const auto& [target, digits] : digits_by_target(0, modulus, '1'))
    nonzero_start += (nonzero_start.empty() ? "" : " | ") + digit_class(digits) + " " + whole[target];
  nonzero_start = "( " + nonzero_start + " )";
  // "0" then, for a decimal step, an optional fraction: zero, or a value below 1 (the caller
  // refuses signs that would need to tell those apart: zero excluded with a step below 1).
  const std::string after_zero = after_integer(0);
  const std::string zero_start = after_zero == "\"\"" || after_zero.empty() ? "\"0\"" : "\"0\" ( " + after_zero + " )";
  std::vector<std::string> options;
  if (signs.negative) options.push_back("\"-\" " + (signs.zero ? "( " + nonzero_start + " | " + zero_start + " )" : nonzero_start));
  if (signs.zero) options.push_back(signs.positive ? zero_start : "\"0\"");
  if (signs.positive) options.push_back(nonzero_start);
  std::string out;
  for (const std::string& o : options) out += (out.empty() ? "" : " | ") + o;
  return "( " + out + " )";
}

namespace {

// Naturals in [a, b] (0 <= a <= b) divisible by n, length by length, each as a digit automaton:
// while the digits so far equal the bound's they are "tight" to it; once off both bounds, the rest
// is any k digits that end on a multiple (shared by every length and position).
class RangeMultiples {
 public:
  RangeMultiples(uint64_t n, const RuleSink& sink, std::string hint, std::size_t max_bytes)
      : n_(n), sink_(sink), hint_(std::move(hint)), max_bytes_(max_bytes) {}

  // The rules, defined only once the whole range fits the limit (a refused attempt leaves none).
  void define_all() {
    for (const auto& [name, body] : written_) sink_.define(name, body);
  }

  std::optional<std::string> naturals(uint64_t a, uint64_t b) {
    std::vector<std::string> options;
    const std::string sa = std::to_string(a), sb = std::to_string(b);
    for (std::size_t length = sa.size(); length <= sb.size(); ++length) {
      uint64_t low = length == 1 ? 0 : pow10(length - 1), high = pow10(length) - 1;
      low = std::max(low, a), high = std::min(high, b);
      if (low > high) continue;
      lo_ = std::to_string(low), hi_ = std::to_string(high);
      tight_.clear();
      if (auto e = tight(0, true, true, 0)) options.push_back(*e);
    }
    if (options.empty()) return std::nullopt;
    std::string out;
    for (const std::string& o : options) out += (out.empty() ? "" : " | ") + o;
    return "( " + out + " )";
  }

 private:
  static uint64_t pow10(std::size_t k) {
    uint64_t v = 1;
    for (std::size_t i = 0; i < k; ++i) v *= 10;
    return v;
  }

  void count_rule(const std::string& body) {
    bytes_ += body.size() + 2 * hint_.size() + 16;  // the body and the rule's name, defined and used
    if (bytes_ > max_bytes_) throw std::length_error("too many rules");
  }

  // Any k more digits after remainder r, ending on a multiple.
  std::optional<std::string> free(std::size_t k, uint64_t r) {
    if (k == 0) return r == 0 ? std::optional<std::string>("\"\"") : std::nullopt;
    auto key = std::make_pair(k, r);
    if (auto it = free_.find(key); it != free_.end()) return it->second;
    std::map<uint64_t, std::string> by_target;
    for (char c = '0'; c <= '9'; ++c) by_target[(r * 10 + static_cast<uint64_t>(c - '0')) % n_] += c;
    std::string body;
    for (const auto& [t, digits] : by_target)
      if (auto rest = free(k - 1, t)) body += (body.empty() ? "" : " | ") + digit_class(digits) + (*rest == "\"\"" ? "" : " " + *rest);
    std::optional<std::string> out;
    if (!body.empty()) {
      count_rule(body);
      out = sink_.reserve(hint_ + "-any");
      written_.push_back({*out, body});
    }
    free_[key] = out;
    return out;
  }

  // Position i of the current length, tight to the low and / or high bound, remainder r.
  std::optional<std::string> tight(std::size_t i, bool to_low, bool to_high, uint64_t r) {
    const std::size_t length = lo_.size();
    // A bound whose remaining digits are all 0 (low) or all 9 (high) no longer constrains.
    to_low = to_low && lo_.find_first_not_of('0', i) != std::string::npos;
    to_high = to_high && hi_.find_first_not_of('9', i) != std::string::npos;
    if (!to_low && !to_high) return free(length - i, r);
    if (i == length) return r == 0 ? std::optional<std::string>("\"\"") : std::nullopt;
    auto key = std::make_tuple(i, to_low, to_high);  // r follows from the bound's digits
    if (auto it = tight_.find(key); it != tight_.end()) return it->second;
    const char first = to_low ? lo_[i] : '0', last = to_high ? hi_[i] : '9';
    std::string body;
    for (char c = first; c <= last; ++c) {
      auto rest = tight(i + 1, to_low && c == lo_[i], to_high && c == hi_[i], (r * 10 + static_cast<uint64_t>(c - '0')) % n_);
      if (rest) body += (body.empty() ? "" : " | ") + fmt::format("\"{}\"", c) + (*rest == "\"\"" ? "" : " " + *rest);
    }
    std::optional<std::string> out;
    if (!body.empty()) {
      count_rule(body);
      out = sink_.reserve(hint_ + "-digits");
      written_.push_back({*out, body});
    }
    tight_[key] = out;
    return out;
  }

  uint64_t n_;
  const RuleSink& sink_;
  std::string hint_;
  std::size_t max_bytes_, bytes_ = 0;
  std::string lo_, hi_;
  std::map<std::pair<std::size_t, uint64_t>, std::optional<std::string>> free_;
  std::map<std::tuple<std::size_t, bool, bool>, std::optional<std::string>> tight_;
  std::vector<std::pair<std::string, std::string>> written_;
};

}  // namespace

std::optional<std::string> multiples_in_range(int64_t lo, int64_t hi, uint64_t modulus, const RuleSink& sink,
                                              const std::string& hint, std::size_t max_bytes) {
  RangeMultiples m(modulus, sink, hint, max_bytes);
  std::vector<std::string> options;
  try {
    if (lo < 0) {  // negatives: "-" and a natural in [max(1, -hi), -lo]; divisibility ignores the sign
      const uint64_t a = hi < 0 ? static_cast<uint64_t>(-hi) : 1, b = static_cast<uint64_t>(-lo);
      if (a <= b)
        if (auto e = m.naturals(a, b)) options.push_back("\"-\" " + *e);
    }
    if (hi >= 0)
      if (auto e = m.naturals(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), static_cast<uint64_t>(hi))) options.push_back(*e);
  } catch (const std::length_error&) {
    return std::nullopt;
  }
  if (options.empty()) return std::nullopt;
  m.define_all();
  std::string out;
  for (const std::string& o : options) out += (out.empty() ? "" : " | ") + o;
  return "( " + out + " )";
}

}  // namespace inferlab
