#include "server/request_fields.h"

#include <algorithm>
#include <cmath>

namespace inferlab::api {

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string type_of(const json& value) {
  if (value.is_number_integer()) return "an integer";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "null";
}

double number(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) bad(name, "'{}' must be a number, got {}", name, type_of(*v));
  double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) bad(name, "'{}' must be between {} and {}, got {}", name, lo, hi, v->dump());
  return x;
}

std::optional<int64_t> integer(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(name, "'{}' must be an integer, got {}", name, type_of(*v));
  double as_double = v->get<double>();
  if (v->is_number_float() && (std::floor(as_double) != as_double || !std::isfinite(as_double)))
    bad(name, "'{}' must be an integer, got {}", name, v->dump());
  if (as_double < static_cast<double>(lo) || as_double > static_cast<double>(hi))
    bad(name, "'{}' must be between {} and {}, got {}", name, lo, hi, v->dump());
  if (v->is_number_unsigned()) return static_cast<int64_t>(v->get<uint64_t>());
  if (v->is_number_integer()) return v->get<int64_t>();
  return static_cast<int64_t>(as_double);
}

bool boolean(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) bad(name, "'{}' must be a boolean, got {}", name, type_of(*v));
  return v->get<bool>();
}

std::vector<int32_t> token_ids(const json& array, const char* name, int vocab) {
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (const json& v : array) {
    if (!v.is_number_integer()) bad(name, "'{}' token ids must be integers, got {}", name, type_of(v));
    int64_t id = v.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX)) : v.get<int64_t>();
    if (id < 0 || id >= vocab) bad(name, "token id {} in '{}' is outside the vocabulary (0..{})", id, name, vocab - 1);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace inferlab::api
