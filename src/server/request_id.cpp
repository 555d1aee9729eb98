// Request ids (see request_id.h).
#include "server/request_id.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace inferlab::api {

std::string request_id_for(const std::string& client_value) {
  auto sane = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == ':' || c == '-';
  };
  if (!client_value.empty() && client_value.size() <= 128 &&
      std::all_of(client_value.begin(), client_value.end(), sane))
    return client_value;
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("req_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

}  // namespace inferlab::api
