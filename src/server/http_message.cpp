// inferlab's HTTP request and response (see http_message.h).
#include "server/http_message.h"

#include <strings.h>

#include <cctype>

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

std::string percent_decoded(std::string_view text, bool plus_is_space) {
  auto hex = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10; };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool escape = text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
                        std::isxdigit(static_cast<unsigned char>(text[i + 2]));
    if (escape) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else if (text[i] == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += text[i];
    }
  }
  return out;
}

QueryParams parse_query(std::string_view query) {
  QueryParams params;
  while (!query.empty()) {
    const std::size_t end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    query = end == std::string_view::npos ? std::string_view() : query.substr(end + 1);
    if (pair.empty()) continue;
    const std::size_t equals = pair.find('=');
    params.emplace_back(percent_decoded(pair.substr(0, equals), true),
                        equals == std::string_view::npos ? "" : percent_decoded(pair.substr(equals + 1), true));
  }
  return params;
}

std::vector<std::string> HttpRequest::query_values(std::string_view name) const {
  std::vector<std::string> values;
  for (const auto& [key, value] : query)
    if (key == name) values.push_back(value);
  return values;
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
