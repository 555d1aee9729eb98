// HTTP transport (cpp-httplib): listening, connection admission (at most --max-connections,
// beyond that 503 + Retry-After and the connection closed, /health and /metrics still answered),
// the Host (DNS rebinding) and Origin (CORS) checks, the API key check, the OpenAI error
// shape for transport failures (404, 413, exceptions), request counting and logging, routes.
#pragma once
#include <httplib.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "inferlab/server/server.h"
#include "server/api_error.h"
#include "server/local_access.h"

namespace inferlab::api {

void send_json(httplib::Response& res, int status, const json& body);
void send_error(httplib::Response& res, const ApiError& error);  // with Retry-After on a 503

class HttpServer {
 public:
  // A handler may throw: ApiError is answered as it says, OverloadedError 503, Error 400, any
  // other exception 500, all in OpenAI's error shape.
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  explicit HttpServer(const ServerOptions& options);
  ~HttpServer();

  void get(const std::string& path, Handler handler);
  void post(const std::string& path, Handler handler);

  // Binds (Error when the address cannot be had) and returns the port.
  int bind();
  // Answers connections on a thread of its own. It holds `owner` (what the handlers use) so a
  // listener that stop() had to leave running never outlives it.
  void listen_in_background(std::shared_ptr<const void> owner);
  bool listening() const { return listener_.joinable(); }
  // Stops listening; waits up to a second for the listener, else leaves it to end on its own
  // (idle keep-alive connections hold workers until their timeout).
  void stop();

  int admitted_connections() const { return admitted_connections_.load(); }
  uint64_t refused_connections() const { return refused_connections_.load(); }
  std::map<std::pair<std::string, int>, uint64_t> request_counts() const;  // (path, status) -> count

 private:
  Handler guarded(Handler handler) const;  // refuses an overflow connection, answers what the handler throws
  bool refuse_if_overflow(const httplib::Request& req, httplib::Response& res) const;  // not /health, /metrics
  // 403 for a Host or Origin this server does not answer; adds the CORS headers for an allowed
  // Origin and answers its preflight. True when it answered.
  bool refuse_foreign_caller(const httplib::Request& req, httplib::Response& res) const;

  ServerOptions options_;
  LocalAccessPolicy access_;
  int connection_limit_;
  std::atomic<int> admitted_connections_{0};
  std::atomic<uint64_t> refused_connections_{0};
  mutable std::mutex request_counts_mutex_;
  std::map<std::pair<std::string, int>, uint64_t> request_counts_;
  httplib::Server http_;
  std::thread listener_;
  std::atomic<bool> listener_done_{false};
};

}  // namespace inferlab::api
