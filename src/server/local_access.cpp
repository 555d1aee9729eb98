// Host header and Origin rules of a server (see local_access.h).
#include "server/local_access.h"

#include <algorithm>
#include <cctype>

#include "inferlab/server/server.h"

namespace inferlab::api {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// "[::1]:8080" -> {"[::1]", "8080"}, "localhost" -> {"localhost", ""}.
std::pair<std::string_view, std::string_view> split_host_port(std::string_view host) {
  const std::size_t bracket = host.rfind(']');
  const std::size_t colon = host.rfind(':');
  if (colon == std::string_view::npos || (bracket != std::string_view::npos && colon < bracket)) return {host, {}};
  return {host.substr(0, colon), host.substr(colon + 1)};
}

}  // namespace

std::vector<std::string> split_list_lower(std::string_view text) {
  std::vector<std::string> items;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    if (!item.empty()) items.push_back(lower(item));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return items;
}

LocalAccessPolicy::LocalAccessPolicy(std::string bind_host, std::vector<std::string> allowed_hosts,
                                     std::vector<std::string> allowed_origins)
    : bind_host_(lower(bind_host)), allowed_hosts_(std::move(allowed_hosts)), allowed_origins_(std::move(allowed_origins)) {
  any_host_ = contains(allowed_hosts_, "*");
  any_origin_ = contains(allowed_origins_, "*");
  host_check_ = !any_host_ && (is_loopback_host(bind_host_) || !allowed_hosts_.empty());
  // An IPv6 address is written in brackets in a Host header.
  if (bind_host_.find(':') != std::string::npos && bind_host_.front() != '[') bind_host_ = "[" + bind_host_ + "]";
}

bool LocalAccessPolicy::host_allowed(std::string_view host_header) const {
  if (!host_check_) return true;
  auto [name_view, port] = split_host_port(host_header);
  if (!port.empty() && port != std::to_string(port_)) return false;
  const std::string name = lower(name_view);
  if (name.empty()) return false;
  return name == "localhost" || name == "127.0.0.1" || name == "[::1]" ||
         (name == bind_host_ && bind_host_ != "0.0.0.0" && bind_host_ != "[::]") || contains(allowed_hosts_, name);
}

bool LocalAccessPolicy::origin_allowed(std::string_view origin) const {
  if (origin.empty()) return false;
  return any_origin_ || contains(allowed_origins_, lower(origin));
}

}  // namespace inferlab::api
