// HTTP transport (see http_server.h): httplib's task queue with admission, the overflow refusal,
// the Host, Origin and API key checks before routing, and the error, exception and logging handlers.
#include "server/http_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "inferlab/generation/scheduler.h"
#include "server/auth.h"
#include "server/local_access.h"
#include "server/request_id.h"

namespace inferlab::api {
namespace {

// Set while a worker of the overflow pool runs a connection that was not admitted.
thread_local bool refusing_connection = false;

// httplib's task queue with admission: at most `limit` connections are admitted (served by one of
// the workers or waiting for one). httplib 0.11's enqueue cannot refuse and hands over only a
// closure that owns the socket, so a connection beyond the limit goes to a small overflow pool
// that answers its request with 503 and closes it (see HttpServer::refuse_if_overflow).
class AdmissionQueue : public httplib::TaskQueue {
 public:
  AdmissionQueue(int workers, int limit, int overflow_workers, std::atomic<int>& admitted, std::atomic<uint64_t>& refused)
      : workers_(workers), overflow_(overflow_workers), limit_(limit), admitted_(admitted), refused_(refused) {}

  void enqueue(std::function<void()> connection) override {
    if (admitted_.fetch_add(1) < limit_) {
      workers_.enqueue([this, connection = std::move(connection)] {
        connection();
        --admitted_;
      });
      return;
    }
    --admitted_;
    ++refused_;
    overflow_.enqueue([connection = std::move(connection)] {
      refusing_connection = true;
      connection();
      refusing_connection = false;
    });
  }
  void shutdown() override {
    workers_.shutdown();
    overflow_.shutdown();
  }

 private:
  httplib::ThreadPool workers_, overflow_;
  int limit_;
  std::atomic<int>& admitted_;
  std::atomic<uint64_t>& refused_;
};

// /health and /metrics: answered on the overflow pool too (its threads are their own small
// budget), so an overloaded server can still be watched.
bool is_monitoring(const std::string& path) { return path == "/health" || path == "/metrics"; }

// Sends the response as it stands and closes the connection: a content provider that fails once
// the whole body is written makes httplib 0.11 drop the keep-alive (a Connection header does not).
void answer_then_close(httplib::Response& res) {
  auto body = std::make_shared<std::string>(std::move(res.body));
  res.body.clear();
  const std::string type = res.get_header_value("Content-Type");
  res.headers.erase("Content-Type");
  res.set_header("Connection", "close");
  res.set_content_provider(body->size(), type, [body](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
    sink.write(body->data() + offset, length);
    return false;
  });
}

}  // namespace

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) {
  if (error.status == 503) res.set_header("Retry-After", "1");
  send_json(res, error.status, error.body());
}

HttpServer::HttpServer(const ServerOptions& options)
    : options_(options),
      access_(options.host, split_list_lower(options.allowed_hosts), split_list_lower(options.allowed_origins)),
      connection_limit_(options.max_connections > 0 ? options.max_connections : std::max(1, options.http_threads)) {
  const int threads = std::max(1, options_.http_threads);
  http_.new_task_queue = [this, threads] {
    return new AdmissionQueue(threads, connection_limit_, 4, admitted_connections_, refused_connections_);
  };
  // Accepted sockets inherit the listening socket's SO_SNDBUF (Linux): with a fixed size, a client
  // that stops reading blocks the writes (and is dropped after --slow-client-timeout) once that
  // much is unsent, instead of once the kernel's autotuned buffer is full.
  if (const int bytes = options_.send_buffer_bytes; bytes > 0)
    http_.set_socket_options([bytes](socket_t sock) {
      httplib::default_socket_options(sock);
      setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    });
  // Tokens go out as small writes: with Nagle's algorithm on, a chunk written while the previous
  // one is unacknowledged waits for the client's delayed ACK (up to 40 ms on Linux), which showed
  // as 25-40 ms of "transport" between the server's TTFT and the client's.
  http_.set_tcp_nodelay(true);
  http_.set_payload_max_length(options_.max_body_bytes);
  http_.set_keep_alive_max_count(10000);
  http_.set_keep_alive_timeout(5);
  http_.set_read_timeout(30);
  http_.set_write_timeout(std::chrono::milliseconds(static_cast<int64_t>(options_.slow_client_timeout_s * 1000)));

  // Host, Origin, then the API key: checked before routing, so no handler (and no body parsing)
  // runs for a stranger. A connection beyond --max-connections goes on to its handler, which reads
  // the body and refuses.
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    res.set_header("x-request-id", request_id_for(req.get_header_value("x-request-id")));  // on every answer
    if (refusing_connection && !is_monitoring(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    if (refuse_foreign_caller(req, res)) {
      if (refusing_connection) answer_then_close(res);  // a monitoring request on the overflow pool
      return httplib::Server::HandlerResponse::Handled;
    }
    if (options_.api_key.empty() || is_public_path(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    if (bearer_matches(req.get_header_value("Authorization"), options_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, ApiError(401, req.has_header("Authorization")
                                      ? "incorrect API key provided (the key given to inferlab serve --api-key is needed)"
                                      : "missing API key: send the header 'Authorization: Bearer <key>'",
                             "", "invalid_api_key"));
    if (refusing_connection) answer_then_close(res);  // a monitoring request on the overflow pool
    return httplib::Server::HandlerResponse::Handled;
  });
  http_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    {
      std::lock_guard lock(request_counts_mutex_);
      std::string path = req.path;
      static const char* known[] = {"/v1/models", "/v1/chat/completions", "/v1/completions", "/health",
                                    "/metrics", "/tokenize", "/detokenize", "/dashboard", "/dashboard/stats"};
      if (path.starts_with("/v1/models/")) path = "/v1/models/{id}";
      else if (std::find(std::begin(known), std::end(known), path) == std::end(known)) path = "other";
      ++request_counts_[{path, res.status}];
    }
    if (options_.log_requests)
      std::fprintf(stderr, "%s %s -> %d [%s]\n", req.method.c_str(), req.path.c_str(), res.status,
                   res.get_header_value("x-request-id").c_str());
  });
  http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    // A request httplib could not parse never reached the pre-routing handler.
    if (!res.has_header("x-request-id")) res.set_header("x-request-id", request_id_for(req.get_header_value("x-request-id")));
    if (res.content_length_ > 0 || !res.body.empty() || refuse_if_overflow(req, res)) return;  // answered already
    std::string message = res.status == 404 ? fmt::format("no route for {} {}", req.method, req.path)
                          : res.status == 413 ? fmt::format("the request body is larger than the server's limit (--max-body-bytes)")
                          : res.status == 400 ? std::string("malformed HTTP request (request line or headers)")
                                              : fmt::format("HTTP {} for {} {}", res.status, req.method, req.path);
    send_json(res, res.status, ApiError(res.status, message).body());
    // httplib could not parse the request, so where the next one starts is unknown.
    if (res.status == 400) answer_then_close(res);
  });
  http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    send_json(res, 500, ApiError(500, message, "", "", "server_error").body());
  });
}

HttpServer::~HttpServer() = default;

bool HttpServer::refuse_if_overflow(const httplib::Request& req, httplib::Response& res) const {
  if (!refusing_connection || is_monitoring(req.path)) return false;
  if (res.content_length_ > 0) return true;  // already refused (the error handler sees the 503 too)
  res.status = 503;
  res.set_header("Retry-After", "1");
  res.set_content(dump(ApiError(503, fmt::format("the server is at its limit of {} connections (--max-connections); "
                                                 "retry after a second", connection_limit_),
                                "", "overloaded", "server_error").body()),
                  "application/json");
  answer_then_close(res);
  return true;
}

bool HttpServer::refuse_foreign_caller(const httplib::Request& req, httplib::Response& res) const {
  const std::string host = req.get_header_value("Host");
  if (!access_.host_allowed(host)) {
    send_error(res, ApiError(403, fmt::format("the Host header '{}' does not name this server: a loopback server answers "
                                              "localhost, 127.0.0.1 and [::1] (with its port or none); give other "
                                              "names with --allowed-hosts (DNS-rebinding protection)", host),
                             "", "host_not_allowed"));
    return true;
  }
  // Browsers send Origin on cross-origin requests (and on every POST): a page not listed in
  // --allowed-origins is refused outright, not only kept from reading the answer, since a "simple"
  // cross-origin POST is sent without a preflight.
  const std::string origin = req.get_header_value("Origin");
  if (origin.empty()) return false;
  if (!access_.origin_allowed(origin)) {
    send_error(res, ApiError(403, fmt::format("requests from the web origin '{}' are not allowed: {}", origin,
                                              access_.cors_enabled() ? "it is not listed in --allowed-origins"
                                                                     : "start the server with --allowed-origins ORIGIN "
                                                                       "to let browser pages call it"),
                             "", "origin_not_allowed"));
    return true;
  }
  res.set_header("Access-Control-Allow-Origin", origin);
  res.set_header("Vary", "Origin");
  if (req.method != "OPTIONS") return false;
  // A preflight: answered here, before the API key check (browsers send it without credentials).
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
  res.set_header("Access-Control-Max-Age", "600");
  return true;
}

HttpServer::Handler HttpServer::guarded(Handler handler) const {
  return [this, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    if (refuse_if_overflow(req, res)) return;
    try {
      handler(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const OverloadedError& e) {
      send_error(res, ApiError(503, e.what(), "", "overloaded", "server_error"));
    } catch (const Error& e) {
      send_error(res, ApiError(400, e.what()));
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, e.what(), "", "", "server_error"));
    }
    if (refusing_connection) answer_then_close(res);  // a monitoring request on the overflow pool: free its thread
  };
}

void HttpServer::get(const std::string& path, Handler handler) { http_.Get(path, guarded(std::move(handler))); }
void HttpServer::post(const std::string& path, Handler handler) { http_.Post(path, guarded(std::move(handler))); }

int HttpServer::bind() {
  if (options_.port == 0) {
    const int port = http_.bind_to_any_port(options_.host);
    if (port <= 0) fail("cannot listen on {} (any port)", options_.host);
    access_.set_port(port);
    return port;
  }
  if (!http_.bind_to_port(options_.host, options_.port))
    fail("cannot listen on {}:{} (in use, or not an address of this machine); pick another with --port", options_.host,
         options_.port);
  access_.set_port(options_.port);
  return options_.port;
}

void HttpServer::listen_in_background(std::shared_ptr<const void> owner) {
  listener_ = std::thread([this, owner = std::move(owner)] {
    http_.listen_after_bind();
    listener_done_ = true;
  });
}

void HttpServer::stop() {
  http_.stop();
  if (!listener_.joinable()) return;
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  while (!listener_done_ && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (listener_done_) listener_.join();
  else listener_.detach();  // idle keep-alive connections close on their own timeout
}

std::map<std::pair<std::string, int>, uint64_t> HttpServer::request_counts() const {
  std::lock_guard lock(request_counts_mutex_);
  return request_counts_;
}

}  // namespace inferlab::api
