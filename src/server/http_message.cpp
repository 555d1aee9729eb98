// inferlab's HTTP request and response (see http_message.h).
#include "server/http_message.h"

#include <strings.h>

namespace inferlab::api {
namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::string header_value(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [key, value] : headers)
    if (same_name(key, name)) return value;
  return "";
}

bool has_header(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [key, value] : headers)
    if (same_name(key, name)) return true;
  return false;
}

void HttpResponse::set_header(const std::string& name, std::string value) {
  for (auto& [key, old] : headers)
    if (same_name(key, name)) {
      old = std::move(value);
      return;
    }
  headers.emplace_back(name, std::move(value));
}

}  // namespace inferlab::api
