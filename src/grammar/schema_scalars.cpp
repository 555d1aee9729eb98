// Strings (pattern, format, lengths) and numbers (bounds, multipleOf) as GBNF (schema_converter.h).
#include <cmath>

#include "inferlab/grammar/regex.h"
#include "grammar/number_multiples.h"
#include "grammar/number_ranges.h"
#include "grammar/schema_converter.h"

namespace inferlab::schema {

std::string SchemaConverter::string(const json& schema, const std::string& hint) {
  const bool length = schema.contains("minLength") || schema.contains("maxLength");
  if (schema.contains("pattern")) {
    if (length || schema.contains("format")) unsupported("pattern", "'pattern' together with a length or a format");
    if (!schema["pattern"].is_string()) unsupported("pattern", "'pattern' must be a string");
    std::string pattern = schema["pattern"].get<std::string>();
    // A JSON Schema pattern matches anywhere in the string unless anchored.
    if (pattern.empty() || pattern.front() != '^') pattern = ".*(" + pattern + ")";
    if (pattern.back() != '$' || (pattern.size() >= 2 && pattern[pattern.size() - 2] == '\\')) pattern = "(" + pattern + ").*";
    try {
      return rule(hint, "\"\\\"\" " + regex_to_gbnf_expression(pattern, true, limits_) + " \"\\\"\"");
    } catch (const GrammarError& e) {
      unsupported("pattern", e.what());
    }
  }
  if (schema.contains("format")) {
    if (length) unsupported("format", "'format' together with a length");
    // Each format as the rule of kPrimitives that writes it: a subset of the strings the format's RFC
    // allows (hostnames of LDH labels without "--", so valid IDNA too; URIs and IRIs of ASCII characters
    // with a hostname authority; ECMA-262 regexes of literals, classes, groups and quantifiers), so
    // every string written is valid.
    static const std::map<std::string, std::string> kFormatRules = {
        {"date", "date"}, {"time", "time"}, {"date-time", "date-time"}, {"uuid", "uuid"}, {"email", "email"},
        {"idn-email", "email"}, {"ipv4", "ipv4"}, {"ipv6", "ipv6"}, {"duration", "duration"},
        {"json-pointer", "json-pointer"}, {"relative-json-pointer", "relative-json-pointer"}, {"hostname", "hostname"},
        {"idn-hostname", "hostname"}, {"uri", "uri"}, {"iri", "uri"}, {"uri-reference", "uri-reference"},
        {"iri-reference", "uri-reference"}, {"uri-template", "uri-template"}, {"regex", "regex"}};
    const std::string format = schema["format"].is_string() ? schema["format"].get<std::string>() : "";
    const auto found = kFormatRules.find(format);
    if (found == kFormatRules.end()) {
      std::string known;
      for (const auto& [name, unused] : kFormatRules) known += (known.empty() ? "" : ", ") + name;
      unsupported("format", fmt::format("format {} is not supported ({} are)", schema["format"].dump(), known));
    }
    return rule(hint, "\"\\\"\" " + found->second + " \"\\\"\"");
  }
  if (length) {
    int min = bound(schema, "minLength", 0), max = bound(schema, "maxLength", -1);
    if (max >= 0 && max < min) unsupported("maxLength", "'maxLength' below 'minLength'");
    return rule(hint, "\"\\\"\" json-char" + repeat(min, max) + " \"\\\"\"");
  }
  return "json-string";
}

// Numbers have at most 15 integer digits (below 2^53), so bounds at or beyond +-(10^15 - 1) hold
// already (zod's safe-integer bounds). An integer's range is written digit by digit; a bounded
// number's too, on both sides of the point (number_ranges.h), and without an exponent.
std::string SchemaConverter::number(const json& schema, bool integer) {
  if (schema.contains("multipleOf")) return multiples(schema, integer);
  constexpr double kReach = 999999999999999.0;
  auto value = [&](const char* key) -> std::optional<double> {
    if (!schema.contains(key)) return std::nullopt;
    if (!schema[key].is_number()) unsupported(key, fmt::format("'{}' must be a number", key));
    return schema[key].get<double>();
  };
  const auto max = value("maximum"), min = value("minimum");
  const auto exclusive_min = value("exclusiveMinimum"), exclusive_max = value("exclusiveMaximum");
  if (integer) {
    // The inclusive integer bounds, clamped to what the grammar can write at all.
    double lo = -kReach, hi = kReach;
    if (min) lo = std::max(lo, std::ceil(*min));
    if (exclusive_min) lo = std::max(lo, std::floor(*exclusive_min) + 1);
    if (max) hi = std::min(hi, std::floor(*max));
    if (exclusive_max) hi = std::min(hi, std::ceil(*exclusive_max) - 1);
    if (lo > hi)
      unsupported(min ? "minimum" : "exclusiveMinimum", "no integer lies within 'minimum' / 'maximum' (and their exclusive forms)");
    if (lo == -kReach && hi == kReach) return "json-integer";
    const int64_t low = static_cast<int64_t>(lo), high = static_cast<int64_t>(hi);
    std::vector<std::string> options;
    if (low < 0) options.push_back("\"-\" " + natural_range(high < 0 ? -high : 1, -low));
    if (high >= 0) options.push_back(natural_range(std::max<int64_t>(low, 0), high));
    std::string body;
    for (const std::string& o : options) body += (body.empty() ? "" : " | ") + o;
    return rule("integer", body);
  }
  if (!max && !min && !exclusive_min && !exclusive_max) return "json-number";
  // Of an inclusive and an exclusive bound on one side, the tighter (the exclusive one at a tie).
  auto tighter = [&](const char* inclusive, const std::optional<double>& a, const char* exclusive,
                     const std::optional<double>& b, bool lower) -> std::optional<DecimalBound> {
    if (!a && !b) return std::nullopt;
    const bool use_exclusive = b && (!a || (lower ? *b >= *a : *b <= *a));
    return DecimalBound{schema[use_exclusive ? exclusive : inclusive].dump(), use_exclusive};
  };
  const auto lower = tighter("minimum", min, "exclusiveMinimum", exclusive_min, true);
  const auto upper = tighter("maximum", max, "exclusiveMaximum", exclusive_max, false);
  std::optional<std::string> body;
  try {
    body = decimal_range(lower, upper);
  } catch (const std::invalid_argument& e) {  // a bound JSON cannot write as digits (infinity)
    unsupported(lower ? (lower->exclusive ? "exclusiveMinimum" : "minimum") : (upper->exclusive ? "exclusiveMaximum" : "maximum"),
                fmt::format("a bound that is not a finite number ({})", e.what()));
  }
  if (!body)
    unsupported(min ? "minimum" : exclusive_min ? "exclusiveMinimum" : max ? "maximum" : "exclusiveMaximum",
                "no number with at most 15 digits on each side of the point lies within 'minimum' / 'maximum' (and "
                "their exclusive forms)");
  return rule("number", *body);
}

// multipleOf: the multiples of the step, digit by digit modulo its mantissa (number_multiples.h),
// exact for any step with at most 15 significant digits whose automaton is small enough. Bounds
// are taken where they keep or drop whole signs (minimum 0, exclusiveMinimum 0, ...); others are
// refused with it.
std::string SchemaConverter::multiples(const json& schema, bool integer) {
  // Bounds on the automata, so that a step's grammar stays well within --max-grammar-bytes.
  constexpr uint64_t kMaxStates = 64;
  constexpr std::size_t kMaxRangeBytes = 32000;
  constexpr double kReach = 999999999999999.0;  // 15 digits, as integers are written
  const json& given = schema["multipleOf"];
  if (!given.is_number() || !(given.get<double>() > 0) || !std::isfinite(given.get<double>()))
    unsupported("multipleOf", "'multipleOf' must be a number above 0");
  const auto step = parse_decimal_step(given.dump());
  if (!step) unsupported("multipleOf", fmt::format("'multipleOf' {} has more than 15 significant digits", given.dump()));
  if (integer && integer_modulus(*step) == 1) {  // every integer is a multiple (of 1, 0.5, 1e-8, ...)
    json rest = schema;
    rest.erase("multipleOf");
    return number(rest, true);
  }
  const bool integral = integer || step->decimals == 0;  // only integers are multiples
  auto value = [&](const char* key) -> std::optional<double> {
    if (!schema.contains(key)) return std::nullopt;
    if (!schema[key].is_number()) unsupported(key, fmt::format("'{}' must be a number", key));
    return schema[key].get<double>();
  };
  const auto min = value("minimum"), max = value("maximum"), exclusive_min = value("exclusiveMinimum"),
             exclusive_max = value("exclusiveMaximum");
  auto above_lower = [&](double v) { return (!min || v >= *min) && (!exclusive_min || v > *exclusive_min); };
  auto below_upper = [&](double v) { return (!max || v <= *max) && (!exclusive_max || v < *exclusive_max); };
  const bool lower = min || exclusive_min, upper = max || exclusive_max;
  // The smallest positive multiple; the multiples of each sign lie at or beyond it. A bound keeps
  // all multiples of a sign, drops them all, or cuts through them.
  const double unit = integral ? static_cast<double>(integer_modulus(*step)) : given.get<double>();
  bool cut = false;
  Signs signs;
  signs.zero = above_lower(0) && below_upper(0);
  if (!above_lower(-unit)) signs.negative = false;
  else if (lower || !below_upper(-unit)) cut = true;
  if (!below_upper(unit)) signs.positive = false;
  else if (upper || !above_lower(unit)) cut = true;

  // The integer range (15 digits at most, as every integer is written).
  double lo = -kReach, hi = kReach;
  if (min) lo = std::max(lo, std::ceil(*min));
  if (exclusive_min) lo = std::max(lo, std::floor(*exclusive_min) + 1);
  if (max) hi = std::min(hi, std::floor(*max));
  if (exclusive_max) hi = std::min(hi, std::ceil(*exclusive_max) - 1);
  const double digits = std::to_string(static_cast<int64_t>(std::max(std::fabs(lo), std::fabs(hi)))).size();
  if (integral && digits * static_cast<double>(integer_modulus(*step)) <= 1000) {
    // Digit by digit, the range's bounds and the remainder together.
    if (lo > hi) unsupported("multipleOf", "no integer lies within the bounds beside 'multipleOf'");
    const auto body = multiples_in_range(static_cast<int64_t>(lo), static_cast<int64_t>(hi), integer_modulus(*step), sink(),
                                         prefix_ + "-multiple", kMaxRangeBytes);
    if (body) return rule(prefix_ + "-multiple", *body);
    if (cut)
      unsupported("multipleOf", fmt::format("no multiple of 'multipleOf' {} lies within the bounds, or the digit automaton "
                                            "of the range and the step exceeds {} bytes of grammar", given.dump(), kMaxRangeBytes));
    // Too many rules with the digits counted: the signs alone, the digits not bounded.
  }
  if (cut)
    unsupported("multipleOf", "'multipleOf' beside a bound that cuts through the multiples (only bounds that keep or drop "
                              "all negative or all positive multiples, such as minimum 0, are enforced with a fractional or "
                              "large step)");
  if (!signs.negative && !signs.zero && !signs.positive)
    unsupported("multipleOf", "no multiple of 'multipleOf' lies within the bounds");
  if (!integral && !signs.zero && (signs.negative || signs.positive) && unit < 1)
    unsupported("multipleOf", "'multipleOf' below 1 with zero excluded by a bound (the grammar would have to tell 0.0 from 0.5)");
  if (!integral && step->mantissa == 1) {
    // 0.1, 0.01, ...: any number with at most that many decimals.
    if (step->decimals > limits_.max_repetition)
      unsupported("multipleOf", fmt::format("'multipleOf' {} allows more than {} decimals", given.dump(), limits_.max_repetition));
    const std::string decimals = fmt::format("json-natural ( \".\" [0-9]{{1,{}}} )?", step->decimals);
    std::string body;
    if (signs.negative) body = "\"-\" " + decimals;
    if (signs.zero) body += (body.empty() ? "" : " | ") + (signs.positive ? decimals : std::string("\"0\""));
    return rule(prefix_ + "-multiple", body);
  }
  const uint64_t states = multiples_rule_count(*step, integer);
  if (states > kMaxStates)
    unsupported("multipleOf", fmt::format("'multipleOf' {} needs a digit automaton of {} states; at most {} are written "
                                          "(the grammar would be too large)", given.dump(), states, kMaxStates));
  return rule(prefix_ + "-multiple", multiples_expression(*step, integer, signs, sink(), prefix_ + "-multiple"));
}

}  // namespace inferlab::schema
