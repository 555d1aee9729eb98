// Arrays as GBNF: prefixItems / items within minItems / maxItems, contains / minContains, and
// uniqueItems over a few known values (schema_converter.h).
#include <algorithm>
#include <cmath>
#include <functional>

#include "grammar/schema_converter.h"

namespace inferlab::schema {

// uniqueItems true where each item's values are a few known ones: which were written is tracked,
// so none repeats (equal values are written one way: canonical()). Anything else is refused.
std::string SchemaConverter::unique_array(const json& schema, const std::string& hint) {
  auto refuse = [](const std::string& why) {
    unsupported("uniqueItems", "'uniqueItems' true " + why + " (the grammar can rule out a repeated item only among a "
                               "few known values: enum, const, boolean, null)");
  };
  std::vector<std::vector<json>> positions;  // prefixItems' values, position by position
  if (schema.contains("prefixItems")) {
    if (!schema["prefixItems"].is_array()) unsupported("prefixItems", "'prefixItems' must be an array of schemas");
    for (const json& p : schema["prefixItems"]) {
      auto values = finite_values(p);
      if (!values) refuse("over a prefix item that is not a few known values");
      positions.push_back(*values);
    }
  }
  std::vector<json> rest;  // items' values; none when items is false
  if (!schema.contains("items")) {
    refuse("where items may be any value");
  } else if (auto values = finite_values(schema["items"])) {
    rest = *values;
  } else {
    refuse("over items that are not a few known values");
  }
  // The distinct values, and each position's as a bit set over them.
  std::vector<json> distinct;
  auto bits = [&](const std::vector<json>& values) {
    uint32_t set = 0;
    for (const json& v : values) {
      std::size_t i = 0;
      while (i < distinct.size() && nlohmann::json(distinct[i]) != nlohmann::json(v)) ++i;
      if (i == distinct.size()) {
        if (distinct.size() >= 10) refuse("over more than 10 distinct values");
        distinct.push_back(v);
      }
      set |= 1u << i;
    }
    return set;
  };
  std::vector<uint32_t> allowed;
  for (const auto& values : positions) allowed.push_back(bits(values));
  const uint32_t rest_allowed = bits(rest);
  const int k = static_cast<int>(allowed.size()), m = static_cast<int>(distinct.size());
  const int min = bound(schema, "minItems", 0);
  int max = bound(schema, "maxItems", -1);
  const int longest = k + (rest_allowed ? m : 0);
  max = max < 0 ? longest : std::min(max, longest);
  std::map<std::pair<int, uint32_t>, std::optional<std::string>> memo;
  std::function<std::optional<std::string>(int, uint32_t)> state = [&](int i, uint32_t used) -> std::optional<std::string> {
    if (auto it = memo.find({i, used}); it != memo.end()) return it->second;
    if (memo.size() > 1024) refuse("over more item states than 1024");
    std::vector<std::string> options;
    if (i >= min) options.push_back("\"\"");
    const uint32_t here = i < k ? allowed[i] : rest_allowed;
    for (int v = 0; v < m && i < max; ++v)
      if ((here >> v & 1) && !(used >> v & 1))
        if (auto next = state(i + 1, used | 1u << v))
          options.push_back((i ? "\",\" ws " : "") + literal(distinct[v]) + " ws" + (*next == "\"\"" ? "" : " " + *next));
    std::optional<std::string> out;
    if (!options.empty()) {
      std::string body;
      for (const std::string& o : options) body += (body.empty() ? "" : " | ") + o;
      out = rule(hint + "-unique", body);
    }
    memo[{i, used}] = out;
    return out;
  };
  const auto body = state(0, 0);
  if (!body) unsupported("minItems", "no array of distinct items reaches 'minItems'");
  return rule(hint, "\"[\" ws " + *body + " \"]\"");
}

// contains (at least `need` items match it, all match items): blocks of items each ending with
// one that matches both, then any items; every such array parses, taking the first `need`
// matching items as the blocks' ends.
std::string SchemaConverter::containing(const json& schema, const std::string& hint, int depth, int need) {
  for (const char* k : {"prefixItems", "maxItems"})
    if (schema.contains(k)) unsupported("contains", fmt::format("'contains' beside '{}'", k));
  if (schema.contains("uniqueItems") && schema["uniqueItems"] != json(false)) unsupported("contains", "'contains' beside 'uniqueItems'");
  if (bound(schema, "minItems", 0) > need) unsupported("contains", "'contains' beside a 'minItems' above 'minContains'");
  const json& wanted = schema["contains"];
  if (matches_nothing(wanted)) unsupported("contains", "'contains' false: no item matches, so no array does");
  const json items = schema.value("items", json(true));
  if (matches_nothing(items)) unsupported("contains", "'contains' beside 'items' false");
  const std::string item = items == json(true) ? "json-value" : visit(items, hint + "-item", depth + 1);
  const std::string match = visit(items == json(true) ? wanted : merged_all_of(json::array({items, wanted})), hint + "-match", depth + 1);
  const std::string block = rule(hint + "-block", "( " + item + " ws \",\" ws )* " + match + " ws");
  std::string body = "\"[\" ws " + block;
  if (need > 1) body += " ( \",\" ws " + block + " )" + repeat(need - 1, need - 1);
  return rule(hint, body + " ( \",\" ws " + item + " ws )* \"]\"");
}

// Any JSON value but the few known ones listed (numbers among them integers), written only in forms
// that cannot equal them: the integers in the gaps between them (digit by digit, no "-0") and numbers
// with a fraction ending in a non-zero digit (never integers). Strings, arrays and objects among
// them are refused.
std::string SchemaConverter::other_values(const std::vector<json>& values, const std::string& hint) {
  std::set<std::string> listed_types;
  std::vector<int64_t> integers;
  bool has_true = false, has_false = false;
  for (const json& v : values) {
    const json c = canonical(v);
    if (c.is_number_integer() || c.is_number_unsigned()) {
      if (std::fabs(c.get<double>()) > 999999999999999.0) unsupported("maxContains", "'contains' of an integer beyond 15 digits");
      integers.push_back(c.get<int64_t>());
      listed_types.insert("number");
    } else if (c.is_boolean()) {
      (c.get<bool>() ? has_true : has_false) = true;
      listed_types.insert("boolean");
    } else if (c.is_null()) {
      listed_types.insert("null");
    } else {
      unsupported("maxContains", fmt::format("'maxContains' beside a 'contains' that allows {} (the other values of its type "
                                             "are not written here; integers, booleans and null are)", c.dump()));
    }
  }
  std::vector<std::string> options;
  for (const char* type : kAllTypes) {
    const std::string t = type;
    if (!listed_types.count(t)) {
      options.push_back(t == "boolean" ? "json-boolean" : "json-" + t);
    } else if (t == "boolean") {
      if (!has_true) options.push_back("\"true\"");
      if (!has_false) options.push_back("\"false\"");
    } else if (t == "number") {
      std::sort(integers.begin(), integers.end());
      integers.erase(std::unique(integers.begin(), integers.end()), integers.end());
      std::optional<int64_t> from;  // the gap's lower end; none: unbounded
      for (std::size_t i = 0; i <= integers.size(); ++i) {
        json gap{{"type", "integer"}};
        if (from) gap["minimum"] = *from;
        if (i < integers.size()) gap["maximum"] = integers[i] - 1;
        if (!(from && i < integers.size() && *from > integers[i] - 1)) options.push_back(number(gap, true));
        if (i < integers.size()) from = integers[i] + 1;
      }
      options.push_back("\"-\"? json-natural \".\" [0-9]{0,14} [1-9]");
    }
  }
  std::string body;
  for (const std::string& o : options) body += (body.empty() ? "" : " | ") + o;
  if (body.empty()) unsupported("maxContains", "'contains' allows every value, so no item is left for 'maxContains'");
  return rule(hint, body);
}

// contains with maxContains: between `min` and `max` items match it and the others its complement,
// where that is a grammar (negation(): a type or one bound; other_values(): not a few known values).
// The items in order, counting the matching ones: after j of them, any others, then either the
// end (j >= min) or one more (j < max).
std::string SchemaConverter::counted_containing(const json& schema, const std::string& hint, int depth, int min, int max) {
  for (const char* k : {"prefixItems", "minItems", "maxItems"})
    if (schema.contains(k)) unsupported("maxContains", fmt::format("'maxContains' beside '{}'", k));
  if (schema.contains("uniqueItems") && schema["uniqueItems"] != json(false)) unsupported("maxContains", "'maxContains' beside 'uniqueItems'");
  if (max < min) unsupported("maxContains", "'maxContains' below 'minContains': no array matches");
  const json& wanted = schema["contains"];
  const json items = schema.value("items", json(true));
  if (matches_nothing(items)) unsupported("maxContains", "'maxContains' beside 'items' false");
  std::string other;
  if (const auto complement = negation(wanted)) {
    if (matches_nothing(*complement)) unsupported("maxContains", "'contains' matches every item, so none is left over");
    other = visit(items == json(true) ? *complement : merged_all_of(json::array({items, *complement})), hint + "-other", depth + 1);
  } else if (const auto values = finite_values(wanted); values && items == json(true)) {
    other = other_values(*values, hint + "-other");
  } else {
    unsupported("maxContains", "'maxContains' beside a 'contains' whose complement is not written here (a type, one bound, or "
                               "a few known values beside 'items' true are)");
  }
  std::string match;
  if (!matches_nothing(wanted))
    match = visit(items == json(true) ? wanted : merged_all_of(json::array({items, wanted})), hint + "-match", depth + 1);
  if (match.empty() && min > 0) unsupported("maxContains", "'contains' false beside 'minContains' above 0: no array matches");
  const std::string others = "( \",\" ws " + other + " ws )*";
  std::vector<std::string> after(max + 2);  // after[j]: the rest, j matching items written
  for (int j = max; j >= 0; --j) {
    std::string tail;
    if (j < max && !match.empty()) tail = "\",\" ws " + match + " ws " + after[j + 1];
    if (j >= min) tail = tail.empty() ? "\"\"" : tail + " | \"\"";
    after[j] = rule(hint + "-after", others + " ( " + tail + " )");
  }
  std::string first = other + " ws " + after[0];
  if (max >= 1 && !match.empty()) first += " | " + match + " ws " + after[1];
  std::string body = "\"[\" ws ( " + first + " ) \"]\"";
  if (min == 0) body += " | \"[\" ws \"]\"";
  return rule(hint, body);
}

// Items in order: the prefixItems' schemas one by one, then `items` for the rest (false: no
// more), within minItems / maxItems; uniqueItems true only over a few known values (above).
std::string SchemaConverter::array(const json& schema, const std::string& hint, int depth) {
  // minContains / maxContains without contains apply nothing; minContains 0 makes contains apply nothing.
  if (schema.contains("contains")) {
    const int need = bound(schema, "minContains", 1);
    if (schema.contains("maxContains")) return counted_containing(schema, hint, depth, need, bound(schema, "maxContains", 0));
    if (need > 0) return containing(schema, hint, depth, need);
  }
  if (schema.contains("uniqueItems") && schema["uniqueItems"] != json(false)) {
    if (schema["uniqueItems"] != json(true)) unsupported("uniqueItems", "'uniqueItems' must be a boolean");
    return unique_array(schema, hint);
  }
  std::vector<std::string> prefix;
  std::optional<int> cut;
  if (schema.contains("prefixItems")) {
    const json& items = schema["prefixItems"];
    if (!items.is_array()) unsupported("prefixItems", "'prefixItems' must be an array of schemas");
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (items[i] == json(false)) {  // no item can be there: the array ends before it
        cut = static_cast<int>(i);
        break;
      }
      prefix.push_back(visit(items[i], fmt::format("{}-{}", hint, i), depth + 1));
    }
  }
  const bool no_more = schema.contains("items") && schema["items"] == json(false);
  std::string item = schema.contains("items") && !no_more ? visit(schema["items"], hint + "-item", depth + 1) : "json-value";
  int min = bound(schema, "minItems", 0), max = bound(schema, "maxItems", -1);
  const int k = static_cast<int>(prefix.size());
  if (no_more) max = max < 0 ? k : std::min(max, k);
  if (cut) max = max < 0 ? *cut : std::min(max, *cut);
  if (max >= 0 && max < min) unsupported("maxItems", "'maxItems' below 'minItems' (or more items required than 'items' false allows)");
  if (max == 0) return rule(hint, "\"[\" ws \"]\"");
  // element(i): the i-th item's schema; after(i): what may follow once i items are written.
  auto element = [&](int i) { return i < k ? prefix[i] : item; };
  std::string tail;  // after(i) for i >= k: the rest as a repetition
  {
    const int from = std::max(k, 1);
    const int rest_min = std::max(min - from, 0), rest_max = max < 0 ? -1 : max - from;
    tail = rest_max == 0 ? "" : "( \",\" ws " + item + " ws )" + repeat(rest_min, rest_max);
  }
  std::string after = tail;  // after(k), or after(1) when there is no prefix
  for (int i = k - 1; i >= 1; --i) {  // after(i) = "," element(i) after(i + 1), optional when i >= min
    if (max >= 0 && i >= max) {
      after = "";
      continue;
    }
    std::string next = "\",\" ws " + element(i) + " ws" + (after.empty() ? "" : " " + after);
    after = rule(hint + "-after", i >= min ? "( " + next + " )?" : next);
  }
  const std::string first = element(0) + " ws" + (after.empty() ? "" : " " + after);
  return rule(hint, min == 0 ? "\"[\" ws ( " + first + " )? \"]\"" : "\"[\" ws " + first + " \"]\"");
}

}  // namespace inferlab::schema
