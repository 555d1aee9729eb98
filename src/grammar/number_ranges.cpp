// Numbers within bounds as GBNF (number_ranges.h).
#include "grammar/number_ranges.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string_view>
#include <vector>

namespace inferlab {
namespace {

std::string any_digits(std::size_t n) { return n == 0 ? std::string() : fmt::format(" [0-9]{{{}}}", n); }
std::string digit_class(char a, char b) { return a == b ? fmt::format("\"{}\"", a) : fmt::format("[{}-{}]", a, b); }

std::string alternatives(const std::vector<std::string>& options) {
  std::string out;
  for (const std::string& o : options) out += (out.empty() ? "" : " | ") + o;
  return options.size() == 1 ? out : "( " + out + " )";
}

// Decimal naturals with digits [lo, hi] of the same length, as a GBNF sequence: the shared leading
// digit, then the ranges below it (llama.cpp's schema converter builds integer ranges the same way).
std::string same_length_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  const std::size_t rest = lo.size() - 1;

  if (lo[0] == hi[0]) {
    const std::string tail = same_length_range(lo.substr(1), hi.substr(1));
    return fmt::format("\"{}\"", lo[0]) + (tail.empty() ? "" : " " + tail);
  }
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  const bool lo_full = lo_rest.find_first_not_of('0') == std::string::npos;
  const bool hi_full = hi_rest.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> options;
  char first = lo[0], last = hi[0];
  if (!lo_full) {
    options.push_back(fmt::format("\"{}\" ( {} )", lo[0], same_length_range(lo_rest, std::string(rest, '9'))));
    ++first;
  }
  if (!hi_full) --last;
  if (first <= last) options.push_back(digit_class(first, last) + any_digits(rest));
  if (!hi_full) options.push_back(fmt::format("\"{}\" ( {} )", hi[0], same_length_range(std::string(rest, '0'), hi_rest)));
  std::string out;
  for (const std::string& o : options) out += (out.empty() ? "" : " | ") + o;
  return options.size() == 1 ? out : "( " + out + " )";
}

// A decimal's magnitude as digits: the integer part without leading zeros ("0" below one), the
// fraction without trailing zeros.
struct Decimal {
  bool negative = false;
  std::string integer = "0";
  std::string fraction;
};

// A JSON number's text (sign, digits, fraction, exponent) as a Decimal, exactly.
Decimal parse_decimal(const std::string& text) {
  std::size_t i = 0;
  Decimal d;
  if (i < text.size() && text[i] == '-') d.negative = true, ++i;
  std::string digits;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) digits += text[i++];
  long point = static_cast<long>(digits.size());
  if (i < text.size() && text[i] == '.')
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));) digits += text[i++];
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    const long exponent = std::stol(text.substr(i + 1));  // doubles' exponents stay within +-400
    if (exponent > 400 || exponent < -400) throw std::invalid_argument("exponent out of range: " + text);
    point += exponent;
    i = text.size();
  }
  if (digits.empty() || i != text.size()) throw std::invalid_argument("not a JSON number: " + text);
  const long size = static_cast<long>(digits.size());
  if (point <= 0) {
    d.fraction = std::string(static_cast<std::size_t>(-point), '0') + digits;
  } else if (point >= size) {
    d.integer = digits + std::string(static_cast<std::size_t>(point - size), '0');
  } else {
    d.integer = digits.substr(0, static_cast<std::size_t>(point));
    d.fraction = digits.substr(static_cast<std::size_t>(point));
  }
  d.integer.erase(0, std::min(d.integer.find_first_not_of('0'), d.integer.size()));
  if (d.integer.empty()) d.integer = "0";
  d.fraction.erase(d.fraction.find_last_not_of('0') + 1);
  if (d.integer == "0" && d.fraction.empty()) d.negative = false;  // -0 is 0
  return d;
}

// A bound on a non-negative value: its digits and whether it is exclusive.
struct Side {
  Decimal magnitude;
  bool exclusive = false;
};

// Digit strings d of at most `room` digits (non-empty unless allow_empty) with lo <= 0.d <= hi,
// strictly where lo_strict / hi_strict. lo and hi are the bounds' fraction digits still to match,
// nullopt once that side holds whatever follows. Each digit either frees a side (above lo's digit,
// below hi's) or keeps it tight, so the expression grows with the bounds' length, not 10^room.
std::optional<std::string> fraction_digits(std::optional<std::string_view> lo, bool lo_strict,
                                           std::optional<std::string_view> hi, bool hi_strict, int room, bool allow_empty) {
  if (lo && lo->empty() && !lo_strict) lo.reset();  // >= 0: anything
  std::vector<std::string> options;
  const bool empty_ok = !lo && (!hi || !hi->empty() || !hi_strict);
  if (allow_empty && empty_ok) options.push_back("\"\"");
  if (!lo && !hi) {
    if (room > 0) options.push_back(fmt::format("[0-9]{{{},{}}}", allow_empty ? 0 : 1, room));
    if (options.empty()) return std::nullopt;
    return options.back();
  }
  if (room > 0) {
    // After digit c, each side fails (0), stays tight on the rest of its digits (1) or holds (2).
    auto lo_after = [&](int c) {
      if (!lo) return 2;
      const int l = lo->empty() ? 0 : (*lo)[0] - '0';
      return c > l ? 2 : c == l ? 1 : 0;
    };
    auto hi_after = [&](int c) {
      if (!hi) return 2;
      const int h = hi->empty() ? 0 : (*hi)[0] - '0';
      return c < h ? 2 : c == h ? 1 : 0;
    };
    auto rest = [](std::string_view digits) { return digits.empty() ? digits : digits.substr(1); };
    for (int c = 0; c <= 9;) {
      const int a = lo_after(c), b = hi_after(c);
      int e = c;
      while (e < 9 && lo_after(e + 1) == a && hi_after(e + 1) == b) ++e;
      if (a && b) {
        const std::optional<std::string_view> lo_rest = a == 2 ? std::nullopt : std::optional(rest(*lo));
        const std::optional<std::string_view> hi_rest = b == 2 ? std::nullopt : std::optional(rest(*hi));
        if (auto tail = fraction_digits(lo_rest, lo_strict, hi_rest, hi_strict, room - 1, true))
          options.push_back(digit_class(static_cast<char>('0' + c), static_cast<char>('0' + e)) +
                            (*tail == "\"\"" ? "" : " " + *tail));
      }
      c = e + 1;
    }
  }
  if (options.empty()) return std::nullopt;
  return alternatives(options);
}

// "<integer>" and "<integer>.<digits>" whose fraction lies within the bounds' fraction digits.
std::optional<std::string> with_fraction(const std::string& integer, std::optional<std::string_view> lo, bool lo_strict,
                                         std::optional<std::string_view> hi, bool hi_strict, int room) {
  std::vector<std::string> options;
  const std::string literal = fmt::format("\"{}\"", integer);
  if (fraction_digits(lo, lo_strict, hi, hi_strict, 0, true)) options.push_back(literal);
  if (auto digits = fraction_digits(lo, lo_strict, hi, hi_strict, room, false))
    options.push_back(literal + " \".\" " + *digits);
  if (options.empty()) return std::nullopt;
  return alternatives(options);
}

// Non-negative numbers within [lo, hi] (lo nullopt: from 0; hi nullopt: up to max_digits digits).
std::optional<std::string> non_negative_range(const std::optional<Side>& lo, const std::optional<Side>& hi, int max_digits) {
  const Side from = lo.value_or(Side{});
  const int64_t low = std::stoll(from.magnitude.integer);
  const std::string_view low_fraction = from.magnitude.fraction;
  const std::string any_fraction = fmt::format("( \".\" [0-9]{{1,{}}} )?", max_digits);
  std::vector<std::string> options;
  auto add = [&](const std::optional<std::string>& option) {
    if (option) options.push_back(*option);
  };
  if (hi) {
    const int64_t high = std::stoll(hi->magnitude.integer);
    const std::string_view high_fraction = hi->magnitude.fraction;
    if (low > high) return std::nullopt;
    if (low == high) {
      add(with_fraction(from.magnitude.integer, low_fraction, from.exclusive, high_fraction, hi->exclusive, max_digits));
    } else {
      add(with_fraction(from.magnitude.integer, low_fraction, from.exclusive, std::nullopt, false, max_digits));
      if (low + 1 <= high - 1) options.push_back(natural_range(low + 1, high - 1) + " " + any_fraction);
      add(with_fraction(hi->magnitude.integer, std::nullopt, false, high_fraction, hi->exclusive, max_digits));
    }
  } else {
    int64_t top = 1;
    for (int i = 0; i < max_digits; ++i) top *= 10;
    add(with_fraction(from.magnitude.integer, low_fraction, from.exclusive, std::nullopt, false, max_digits));
    if (low + 1 <= top - 1) options.push_back(natural_range(low + 1, top - 1) + " " + any_fraction);
  }
  if (options.empty()) return std::nullopt;
  return alternatives(options);
}

}  // namespace

// Naturals (no leading zeros) in [lo, hi], both within the grammar's 15 digits.
std::string natural_range(int64_t lo, int64_t hi) {
  std::vector<std::string> options;
  if (lo == 0) {
    options.push_back("\"0\"");
    lo = 1;
  }
  for (int64_t length_end = 10; lo <= hi; length_end *= 10) {
    if (lo >= length_end) continue;
    const int64_t top = std::min(hi, length_end - 1);
    options.push_back(same_length_range(std::to_string(lo), std::to_string(top)));
    lo = top + 1;
  }
  std::string out;
  for (const std::string& o : options) out += (out.empty() ? "" : " | ") + o;
  return "( " + out + " )";
}

std::optional<std::string> decimal_range(const std::optional<DecimalBound>& lower, const std::optional<DecimalBound>& upper,
                                         int max_digits) {
  std::optional<Side> low, high;
  if (lower) low = Side{parse_decimal(lower->text), lower->exclusive};
  if (upper) high = Side{parse_decimal(upper->text), upper->exclusive};
  const auto too_long = [&](const Side& s) { return static_cast<int>(s.magnitude.integer.size()) > max_digits; };
  if (high && too_long(*high)) {
    if (high->magnitude.negative) return std::nullopt;  // below every number the grammar writes
    high.reset();
  }
  if (low && too_long(*low)) {
    if (!low->magnitude.negative) return std::nullopt;
    low.reset();
  }
  std::vector<std::string> options;
  // x >= 0, written without a sign.
  if (!high || !high->magnitude.negative) {
    std::optional<Side> from;
    if (low && !low->magnitude.negative) from = low;
    if (auto body = non_negative_range(from, high, max_digits)) options.push_back(*body);
  }
  // x < 0, written "-" and its magnitude y > 0, whose bounds are the other side's, mirrored.
  if (!low || low->magnitude.negative) {
    std::optional<Side> from = Side{Decimal{}, true};
    if (high && high->magnitude.negative) from = high;
    std::optional<Side> to;
    if (low) to = low;
    if (auto body = non_negative_range(from, to, max_digits)) options.push_back("\"-\" " + *body);
  }
  if (options.empty()) return std::nullopt;
  return alternatives(options);
}

}  // namespace inferlab
