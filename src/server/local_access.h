// Which browser-reachable callers a server answers: the Host header check against DNS rebinding
// (a page on evil.example whose name is re-pointed at 127.0.0.1 reaches a loopback server with
// `Host: evil.example`) and CORS (which origins a browser may read answers for). Kept apart from
// the HTTP plumbing so the rules can be read and tested alone. docs/reliability.md has the table.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab::api {

class LocalAccessPolicy {
 public:
  // `allowed_hosts`: extra names (`*`: any); `allowed_origins`: origins a browser may use
  // (`*`: any). With a loopback `bind_host` the Host check is on; with another it is on only when
  // `allowed_hosts` is given.
  LocalAccessPolicy(std::string bind_host, std::vector<std::string> allowed_hosts,
                    std::vector<std::string> allowed_origins);

  void set_port(int port) { port_ = port; }  // known once bound (port 0 picks one)

  // A Host header naming localhost, 127.0.0.1, [::1], the bound address or an allowed name, with
  // the bound port or none. Always true when the check is off.
  bool host_allowed(std::string_view host_header) const;
  bool host_check_enabled() const { return host_check_; }

  bool cors_enabled() const { return !allowed_origins_.empty(); }
  // An Origin header that may read answers (it is echoed in Access-Control-Allow-Origin).
  bool origin_allowed(std::string_view origin) const;

 private:
  std::string bind_host_;
  std::vector<std::string> allowed_hosts_, allowed_origins_;
  bool any_host_ = false, any_origin_ = false, host_check_ = false;
  int port_ = 0;
};

// "a, b,c" -> {"a","b","c"} (empty items dropped), lower-cased: the form of --allowed-hosts and
// --allowed-origins.
std::vector<std::string> split_list_lower(std::string_view text);

}  // namespace inferlab::api
