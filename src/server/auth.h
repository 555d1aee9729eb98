// API-key checks for `inferlab serve --api-key`: kept apart from the HTTP plumbing so the
// comparison can be tested (and fuzzed) alone.
#pragma once
#include <string_view>

namespace inferlab::api {

// Equal strings, in time that depends only on the lengths, not on where they first differ (so
// the key cannot be guessed byte by byte from response times).
bool constant_time_equal(std::string_view a, std::string_view b);

// An Authorization header value "Bearer KEY" (scheme case-insensitive, spaces around the token
// ignored) carrying exactly `key`.
bool bearer_matches(std::string_view authorization, std::string_view key);

// The request carries `key`: as a Bearer token, or as Anthropic's `x-api-key` header value (whole).
bool key_matches(std::string_view authorization, std::string_view x_api_key, std::string_view key);

// Paths answered without the key: /health (probes) and /dashboard, the dashboard's static page,
// which a browser loads without headers; it holds no data and asks for the key itself.
bool is_public_path(std::string_view path);

}  // namespace inferlab::api
