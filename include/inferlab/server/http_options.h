// The HTTP transport's options: where it listens and the limits it enforces on every connection
// before a handler sees a request (docs/reliability.md). Part of ServerOptions (`inferlab serve`'s
// flags), handed to the transport as they are.
#pragma once
#include <cstddef>
#include <string>

namespace inferlab {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 30000;                     // 0: any free port (see Server::port())
  int http_threads = 4;                 // event-loop threads serving every connection
  int max_connections = 0;              // connections admitted at once; beyond: 503 + Retry-After and the
                                        // connection closed (0: 8192)
  bool log_requests = false;
  std::string api_key;                  // non-empty: all but /health and the static /dashboard page need
                                        // "Authorization: Bearer KEY" (or x-api-key) (401)
  std::string allowed_hosts;            // comma-separated extra Host names ("*": no check); a loopback
                                        // server answers only localhost, 127.0.0.1, [::1] and these (403)
  std::string allowed_origins;          // comma-separated web origins ("*": any) that get CORS headers;
                                        // a request with another Origin header: 403
  std::size_t max_body_bytes = 32u << 20;  // larger request bodies: 413
  double header_timeout_s = 10;         // request line + headers must arrive within this (else 408, closed);
                                        // also how long an idle keep-alive connection stays open
  double body_timeout_s = 30;           // the body must arrive within this once the headers did (408)
  std::size_t max_header_bytes = 16384; // request line + headers larger: 431
  int max_header_count = 100;           // more header fields: 431
  double slow_client_timeout_s = 30;    // a client that reads nothing for this long is dropped
  int send_buffer_bytes = 0;            // SO_SNDBUF of each connection (0: the OS default, autotuned up
                                        // to net.ipv4.tcp_wmem's maximum, 4 MiB on Debian)
};

}  // namespace inferlab
