// HTTP transport: an event loop (Boost.Beast's HTTP/1.1 parser on Boost.Asio, a few threads for
// thousands of connections; docs/server.md says why), connection admission (at most
// --max-connections, beyond that 503 + Retry-After and the connection closed, /health and /metrics
// still answered), read deadlines and header limits, the Host (DNS rebinding) and Origin (CORS)
// checks, the API key check, the OpenAI error shape for transport failures (400, 404, 408, 413,
// 431, exceptions), request counting and logging, routes. Handlers see only http_message.h.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "inferlab/server/http_options.h"
#include "server/api_error.h"
#include "server/http_message.h"

namespace inferlab::api {

// What the transport takes of `inferlab serve`'s options is their HttpOptions part
// (inferlab/server/http_options.h), so the transport knows nothing of the engine or the
// scheduler's options.

void send_json(HttpResponse& res, int status, const json& body);
// With Retry-After on a 503; `shape` lays out the body (nullptr: OpenAI's).
void send_error(HttpResponse& res, const ApiError& error, ErrorShape shape = nullptr);

class HttpServer {
 public:
  // A handler runs off the event loop (GET handlers on it: they must be quick) and may throw:
  // ApiError is answered as it says, OverloadedError 503, Error 400, any other exception 500, all
  // in OpenAI's error shape. It answers now (res.body) or later (res.stream / res.deferred).
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;

  explicit HttpServer(const HttpOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // `path` is exact, or holds one "{name}" (any non-empty text, slashes too: HttpRequest::params),
  // at its end or before a fixed rest ("/v1/responses/{id}/input_items"); the route with the most
  // fixed text wins where two match.
  // `error_shape`: how errors on this path are written (nullptr: OpenAI's shape).
  void get(const std::string& path, Handler handler, ErrorShape error_shape = nullptr);
  void post(const std::string& path, Handler handler, ErrorShape error_shape = nullptr);
  void del(const std::string& path, Handler handler, ErrorShape error_shape = nullptr);

  // Binds (Error when the address cannot be had) and returns the port.
  int bind();
  // Starts the event loop threads. They hold `owner` (what the handlers use) until stop().
  void listen_in_background(std::shared_ptr<const void> owner);
  bool listening() const;
  // Stops listening, closes every connection (their answers' work is cancelled) and joins the threads.
  void stop();

  int admitted_connections() const;
  uint64_t refused_connections() const;
  std::map<std::pair<std::string, int>, uint64_t> request_counts() const;  // (path, status) -> count

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace inferlab::api
