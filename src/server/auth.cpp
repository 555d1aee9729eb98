// Who may call the server: the API key comparison, and which listening addresses need none.
#include "server/auth.h"

#include <algorithm>
#include <cctype>

#include "inferlab/server/server.h"

namespace inferlab::api {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Compare over the longer length so a prefix of the key costs as long as a wrong key.
  const std::size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  // volatile: keep the compiler from turning the loop into an early-exit memcmp.
  volatile unsigned char result = diff;
  return result == 0;
}

bool bearer_matches(std::string_view authorization, std::string_view key) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  authorization = trim(authorization);
  constexpr std::string_view scheme = "bearer";
  if (authorization.size() <= scheme.size()) return false;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i]) return false;
  if (authorization[scheme.size()] != ' ' && authorization[scheme.size()] != '\t') return false;
  return !key.empty() && constant_time_equal(trim(authorization.substr(scheme.size())), key);
}

bool key_matches(std::string_view authorization, std::string_view x_api_key, std::string_view key) {
  // Both compared whatever the first says, so the time taken does not tell which header was right.
  const bool bearer = bearer_matches(authorization, key);
  const bool header = !key.empty() && !x_api_key.empty() && constant_time_equal(x_api_key, key);
  return bearer || header;
}

bool is_public_path(std::string_view path) { return path == "/health" || path == "/dashboard"; }

}  // namespace inferlab::api

namespace inferlab {

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

}  // namespace inferlab
