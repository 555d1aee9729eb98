// HTTP transport (see http_server.h): an Asio event loop on --http-threads threads, one strand per
// connection, Beast's parser for requests (its limits: header bytes, body bytes, Content-Length).
// Every connection is a small state machine: read a request (deadlines), run its handler (POST
// handlers on a small pool: they parse and tokenize), write the answer (whole, streamed or
// deferred), then the next request (pipelined ones wait in the buffer, answered in order). While an
// answer is pending the socket is read too, so a client that hangs up is seen at once and its work
// cancelled. Nothing here blocks: the engine wakes a connection when its answer has news.
#include "server/http_server.h"
#include "inferlab/util/thread_name.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <boost/asio.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "inferlab/generation/scheduler.h"
#include "server/auth.h"
#include "server/local_access.h"
#include "server/request_id.h"

namespace inferlab::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

constexpr auto kTick = std::chrono::milliseconds(250);       // deadlines and keep-alive comments checked this often
constexpr std::size_t kReadAheadBytes = 64 << 10;            // read while an answer is pending (pipelining)
constexpr auto kLinger = std::chrono::seconds(2);            // reading what the client still sends after our close
constexpr int kHandlerThreads = 2;                           // POST handlers: parse, render, tokenize

// /health and /metrics: answered on a connection past --max-connections too (and run on the event
// loop, never behind the handler pool), so an overloaded server can still be watched.
bool is_monitoring(const std::string& path) { return path == "/health" || path == "/ready" || path == "/metrics"; }

// Lets threads outside the loop (the engine's) post to it only while it exists.
struct LoopGate {
  std::shared_mutex mutex;
  bool open = true;
};

std::string reason_phrase(int status) {
  return std::string(bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(status))));
}

// The answer to a handler's exception, in the route's error shape.
HttpResponse error_response(std::exception_ptr ep, ErrorShape shape) {
  HttpResponse res;
  try {
    std::rethrow_exception(ep);
  } catch (const ApiError& e) {
    send_error(res, e, shape);
  } catch (const OverloadedError& e) {
    send_error(res, ApiError(503, e.what(), "", "overloaded", "server_error"), shape);
  } catch (const Error& e) {
    send_error(res, ApiError(400, e.what()), shape);
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, e.what(), "", "", "server_error"), shape);
  } catch (...) {
    send_error(res, ApiError(500, "internal error", "", "", "server_error"), shape);
  }
  return res;
}

}  // namespace

void send_json(HttpResponse& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(HttpResponse& res, const ApiError& error, ErrorShape shape) {
  if (error.status == 503) res.set_header("Retry-After", "1");
  send_json(res, error.status, shape ? shape(error) : error.body());
}

struct HttpServer::Impl {
  struct Route {
    std::string method, path;  // path: exact, or the part before "{name}" when `param`
    bool param = false;
    std::string suffix;   // what follows "{name}" ("/input_items"; "" when it ends the pattern)
    std::string pattern;  // as given ("/v1/models/{id}"): the path label of /metrics
    Handler handler;
    ErrorShape error_shape = nullptr;

    // What "{name}" matched in `p` (non-empty, slashes allowed: a model id like
    // Qwen/Qwen2.5-0.5B-Instruct), or nullopt when `p` is not this route's.
    std::optional<std::string> match(const std::string& p) const {
      if (!param) return p == path ? std::optional<std::string>("") : std::nullopt;
      if (p.size() <= path.size() + suffix.size() || p.compare(0, path.size(), path) != 0 ||
          p.compare(p.size() - suffix.size(), suffix.size(), suffix) != 0)
        return std::nullopt;
      return p.substr(path.size(), p.size() - path.size() - suffix.size());
    }
  };
  // The route of `path` (for `method`; any method when empty): an exact one first, else the one
  // with the most fixed text (/v1/responses/{id}/input_items before /v1/responses/{id}).
  const Route* route_at(const std::string& method, const std::string& path, std::string* param = nullptr) const;
  void add_route(const char* method, const std::string& pattern, Handler handler, ErrorShape error_shape);

  HttpOptions options;
  LocalAccessPolicy access;
  int connection_limit;
  std::atomic<int> admitted{0};
  std::atomic<uint64_t> refused{0};
  mutable std::mutex counts_mutex;
  std::map<std::pair<std::string, int>, uint64_t> counts;
  std::vector<Route> routes;

  std::unique_ptr<asio::io_context> loop = std::make_unique<asio::io_context>();
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<asio::steady_timer> accept_retry;
  std::unique_ptr<asio::thread_pool> handlers = std::make_unique<asio::thread_pool>(kHandlerThreads);
  std::vector<std::thread> threads;
  std::shared_ptr<LoopGate> gate = std::make_shared<LoopGate>();
  std::shared_ptr<const void> owner;

  explicit Impl(const HttpOptions& o)
      : options(o),
        access(o.host, split_list_lower(o.allowed_hosts), split_list_lower(o.allowed_origins)),
        connection_limit(o.max_connections > 0 ? o.max_connections : 8192) {}

  void accept();
  const Route* find_route(const HttpRequest& req, std::vector<std::string>& params) const;
  std::string path_label(const std::string& path) const;  // a route's pattern, or "other"
  ErrorShape error_shape_for(const std::string& path) const;  // the route's at this path (any method), else nullptr
  // Host/Origin, API key, route, handler: the whole answer to one admitted request.
  HttpResponse handle(HttpRequest& req) const;
  bool refuse_foreign_caller(const HttpRequest& req, HttpResponse& res) const;
  HttpResponse overloaded(ErrorShape shape) const;
  void count(const std::string& method, const std::string& path, int status, const std::string& request_id);
};

namespace {

// One connection. Runs on its strand; engine threads reach it only through wake().
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl& server, tcp::socket socket, bool admitted)
      : server_(server), socket_(std::move(socket)), timer_(socket_.get_executor()), admitted_(admitted) {}
  ~Session() {
    cancel_work();
    if (admitted_) --server_.admitted;
  }

  void start() {
    error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);  // tokens are small writes: no Nagle + delayed-ACK wait
    tick();
    read_header();
  }

  // From any thread: the answer has news. Posts one pump to the strand (coalesced).
  void wake() {
    if (wake_posted_.exchange(true)) return;
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      self->wake_posted_ = false;
      self->on_wake();
    });
  }

 private:
  enum class Phase { header, body, handling, writing, streaming, deferred, between, closing, closed };

  std::function<void()> waker() {
    std::weak_ptr<Session> weak = shared_from_this();
    std::shared_ptr<LoopGate> gate = server_.gate;
    return [weak, gate] {
      std::shared_lock lock(gate->mutex);
      if (!gate->open) return;
      if (auto self = weak.lock()) self->wake();
    };
  }

  void tick() {
    timer_.expires_after(kTick);
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->phase_ == Phase::closed) return;
      self->on_tick();
      self->tick();
    });
  }

  void on_tick() {
    const auto now = Clock::now();
    const bool reading_request = phase_ == Phase::header || phase_ == Phase::body || phase_ == Phase::between;
    if (reading_request && now > deadline_ && !timed_out_) {
      timed_out_ = true;
      error_code ec;
      socket_.cancel(ec);  // the pending read ends with operation_aborted and sees timed_out_
      return;
    }
    // A client that has read nothing for --slow-client-timeout while we have bytes for it.
    if (writing_ && now - write_started_ > std::chrono::duration<double>(server_.options.slow_client_timeout_s)) {
      close();
      return;
    }
    if (phase_ == Phase::closing && now > deadline_) close();
    if (phase_ == Phase::streaming || phase_ == Phase::deferred) on_wake();  // keep-alive comments
  }

  // ---- reading a request ----

  void read_header() {
    phase_ = Phase::header;
    timed_out_ = false;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(server_.options.header_timeout_s));
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(static_cast<std::uint64_t>(server_.options.max_body_bytes));
    reading_ = true;
    bhttp::async_read_header(socket_, buffer_, *parser_, [self = shared_from_this()](error_code ec, std::size_t) {
      self->reading_ = false;
      self->on_header(ec);
    });
  }

  void on_header(error_code ec) {
    if (phase_ == Phase::closed) return;
    if (ec) return read_failed(ec, "the request headers did not arrive within --header-timeout");
    const auto& head = parser_->get();
    const auto fields = static_cast<int>(std::distance(head.begin(), head.end()));
    if (fields > server_.options.max_header_count)
      return refuse(431, fmt::format("the request has {} header fields; the server accepts at most {} (--max-header-count)",
                                     fields, server_.options.max_header_count));
    // RFC 9112 6.3: both framings at once is how requests are smuggled past a proxy; refuse and close.
    if (head.count(bhttp::field::transfer_encoding) > 0 && head.count(bhttp::field::content_length) > 0)
      return refuse(400, "a request with both Transfer-Encoding and Content-Length is refused (RFC 9112 section 6.3)");
    if (parser_->is_done()) return on_request();
    if (beast::iequals(head[bhttp::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      error_code ignored;
      asio::write(socket_, asio::buffer(kContinue), ignored);
    }
    phase_ = Phase::body;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(server_.options.body_timeout_s));
    reading_ = true;
    bhttp::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](error_code ec, std::size_t) {
      self->reading_ = false;
      if (self->phase_ == Phase::closed) return;
      if (ec) return self->read_failed(ec, "the request body did not arrive within --body-timeout");
      self->on_request();
    });
  }

  void read_failed(error_code ec, const char* timeout_message) {
    if (timed_out_) {
      // An idle keep-alive connection just closes; a request begun and not finished gets a 408.
      if (phase_ == Phase::header && buffer_.size() == 0 && !parser_->got_some()) return close();
      return refuse(408, timeout_message);
    }
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == bhttp::error::partial_message || ec == asio::error::operation_aborted)
      return close();
    if (ec == bhttp::error::body_limit)
      return refuse(413, fmt::format("the request body is larger than the server's limit of {} bytes (--max-body-bytes)",
                                     server_.options.max_body_bytes));
    if (ec == bhttp::error::header_limit)
      return refuse(431, fmt::format("the request headers are larger than the server's limit of {} bytes (--max-header-bytes)",
                                     server_.options.max_header_bytes));
    if (ec == bhttp::error::bad_content_length || ec == bhttp::error::multiple_content_length)
      return refuse(400, "the Content-Length header is not a valid length, or is sent with Transfer-Encoding "
                         "(both framings at once are refused, RFC 9112 section 6.3)");
    if (ec == bhttp::error::bad_transfer_encoding)
      return refuse(400, "Transfer-Encoding is repeated or sent with Content-Length (both framings at once are "
                         "refused, RFC 9112 section 6.3)");
    refuse(400, "malformed HTTP request (request line or headers)");
  }

  // A transport-level error: answered in OpenAI's shape, then the connection closed (where the next
  // request would start is unknown).
  void refuse(int status, const std::string& message) {
    close_after_ = true;
    request_id_ = request_id_for(parser_ && parser_->is_header_done() ? std::string(parser_->get()["x-request-id"]) : "");
    method_ = parser_ && parser_->is_header_done() ? std::string(parser_->get().method_string()) : "-";
    path_ = parser_ && parser_->is_header_done() ? std::string(parser_->get().target()) : "-";
    HttpResponse res;
    // The route's shape: its target is known once the request line is read, even when the
    // headers then failed (a Content-Length past --max-body-bytes fails them).
    const std::string target = parser_ ? std::string(parser_->get().target()) : "";
    const ErrorShape shape = server_.error_shape_for(percent_decoded(target.substr(0, target.find('?'))));
    send_json(res, status, shape ? shape(ApiError(status, message)) : ApiError(status, message).body());
    respond(std::move(res));
  }

  void on_request() {
    auto message = parser_->release();
    parser_.reset();
    HttpRequest req;
    req.method = std::string(message.method_string());
    const std::string_view target = message.target();
    const std::size_t question = target.find('?');
    req.path = percent_decoded(target.substr(0, question));
    if (question != std::string_view::npos) req.query = parse_query(target.substr(question + 1));
    for (const auto& field : message) req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    req.body = std::move(message.body());
    method_ = req.method;
    path_ = req.path;
    request_id_ = request_id_for(req.header("x-request-id"));
    error_shape_ = server_.error_shape_for(req.path);
    if (!message.keep_alive()) close_after_ = true;
    phase_ = Phase::handling;
    watch();

    if (!admitted_) {
      close_after_ = true;  // past --max-connections: one answer, then the connection goes
      if (!is_monitoring(req.path)) return respond(server_.overloaded(error_shape_));
    }
    if (req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS" || is_monitoring(req.path))
      return respond(server_.handle(req));
    asio::post(*server_.handlers, [self = shared_from_this(), req = std::move(req)]() mutable {
      HttpResponse res = self->server_.handle(req);
      asio::post(self->socket_.get_executor(),
                 [self, res = std::move(res)]() mutable { self->respond(std::move(res)); });
    });
  }

  // While an answer is pending: read what comes (a pipelined request, up to kReadAheadBytes), and
  // learn at once when the client hangs up or half-closes.
  void watch() {
    if (reading_ || phase_ == Phase::closed || buffer_.size() >= kReadAheadBytes) return;
    reading_ = true;
    socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, std::size_t n) {
      self->reading_ = false;
      self->buffer_.commit(n);
      if (self->phase_ == Phase::closed) return;
      // Cancelled by answered(): a pipelined request already waits in the buffer.
      if (ec == asio::error::operation_aborted && self->phase_ == Phase::between && !self->timed_out_)
        return self->read_header();
      if (ec) return self->close();  // gone: its work is cancelled
      if (self->phase_ == Phase::closing) return self->drain();
      if (self->phase_ == Phase::between) return self->read_header();
      self->watch();
    });
  }

  // ---- answering ----

  void respond(HttpResponse res) {
    if (phase_ == Phase::closed) {
      if (res.stream) res.stream->cancel();
      if (res.deferred) res.deferred->cancel();
      return;
    }
    res.set_header("x-request-id", request_id_);  // on every answer
    for (auto& [name, value] : carried_headers_)
      if (!has_header(res.headers, name)) res.headers.emplace_back(name, value);
    carried_headers_.clear();
    if (res.deferred) {
      deferred_ = std::move(res.deferred);
      carried_headers_ = std::move(res.headers);  // CORS headers set before the handler ran
      phase_ = Phase::deferred;
      deferred_->start(waker());
      return on_wake();
    }
    status_ = res.status;  // counted and logged once sent (or cut off), as the request's end
    std::string out = head(res);
    if (res.stream) {
      stream_ = std::move(res.stream);
      phase_ = Phase::streaming;
      stream_->start(waker());
      write(std::move(out));
      return;
    }
    if (method_ != "HEAD") out += res.body;
    phase_ = Phase::writing;
    write(std::move(out));
  }

  std::string head(const HttpResponse& res) const {
    std::string out = fmt::format("HTTP/1.1 {} {}\r\n", res.status, reason_phrase(res.status));
    for (const auto& [name, value] : res.headers) out += name + ": " + value + "\r\n";
    if (!res.content_type.empty()) out += "Content-Type: " + res.content_type + "\r\n";
    if (res.stream) out += "Transfer-Encoding: chunked\r\n";
    else out += fmt::format("Content-Length: {}\r\n", res.body.size());
    out += close_after_ ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n";
    return out;
  }

  void on_wake() {
    if (phase_ == Phase::deferred) {
      std::optional<HttpResponse> res;
      try {
        res = deferred_->poll();
      } catch (...) {
        res = error_response(std::current_exception(), error_shape_);
      }
      if (!res) return;
      deferred_.reset();
      return respond(std::move(*res));
    }
    if (phase_ != Phase::streaming || writing_ || !stream_) return;
    std::string data;
    const bool ended = stream_->poll(data);
    std::string out;
    if (!data.empty()) out = fmt::format("{:x}\r\n", data.size()) + data + "\r\n";
    if (ended) {
      out += "0\r\n\r\n";
      stream_ended_ = true;
    }
    if (!out.empty()) write(std::move(out));
  }

  // One write at a time; what the engine produces meanwhile waits in its request stream, so a slow
  // reader holds at most this buffer here and never blocks anyone.
  void write(std::string out) {
    out_ = std::move(out);
    writing_ = true;
    write_started_ = Clock::now();
    asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this()](error_code ec, std::size_t) {
      self->writing_ = false;
      self->out_.clear();
      if (self->phase_ == Phase::closed) return;
      if (ec) return self->close();
      if (self->phase_ == Phase::streaming && !self->stream_ended_) return self->on_wake();
      self->answered();
    });
  }

  void log_answer() {
    if (status_ == 0) return;
    server_.count(method_, path_, status_, request_id_);
    status_ = 0;
  }

  void answered() {
    log_answer();
    stream_.reset();
    stream_ended_ = false;
    if (close_after_) return linger();
    phase_ = Phase::between;
    timed_out_ = false;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(server_.options.header_timeout_s));
    if (!reading_) return read_header();
    // The watch read is pending; it calls read_header() when it completes. A pipelined request
    // already in the buffer need not wait for more bytes: end that read now.
    if (buffer_.size() > 0) {
      error_code ec;
      socket_.cancel(ec);
    }
  }

  // Close after an answer: stop sending, read (and drop) what the client still sends for a while,
  // so closing with unread data does not reset the connection before the client reads the answer.
  void linger() {
    phase_ = Phase::closing;
    deadline_ = Clock::now() + kLinger;
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    drain();
  }
  void drain() {
    if (reading_) return;  // the pending read ends in drain's place: see watch()
    reading_ = true;
    buffer_.clear();
    socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, std::size_t) {
      self->reading_ = false;
      if (self->phase_ == Phase::closed) return;
      if (ec) return self->close();
      self->drain();
    });
  }

  void cancel_work() {
    if (stream_) stream_->cancel();
    if (deferred_) deferred_->cancel();
    stream_.reset();
    deferred_.reset();
  }

  void close() {
    if (phase_ == Phase::closed) return;
    phase_ = Phase::closed;
    log_answer();
    cancel_work();  // a client that went away frees its slot and KV blocks now
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    timer_.cancel();
  }

  HttpServer::Impl& server_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  bool admitted_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Phase phase_ = Phase::header;
  Clock::time_point deadline_;
  bool timed_out_ = false;
  bool reading_ = false;
  bool writing_ = false;
  Clock::time_point write_started_;
  bool close_after_ = false;
  std::string method_, path_, request_id_;
  int status_ = 0;  // of the answer being sent
  std::string out_;
  std::shared_ptr<StreamedBody> stream_;
  bool stream_ended_ = false;
  std::shared_ptr<DeferredResponse> deferred_;
  ErrorShape error_shape_ = nullptr;  // the request's route's (errors of a deferred answer)
  HttpHeaders carried_headers_;
  std::atomic<bool> wake_posted_{false};
};

}  // namespace

void HttpServer::Impl::accept() {
  acceptor->async_accept(asio::make_strand(*loop), [this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
    if (ec) {
      // Out of descriptors (EMFILE) and the like: try again shortly instead of spinning.
      accept_retry->expires_after(std::chrono::milliseconds(50));
      accept_retry->async_wait([this](error_code e) {
        if (!e) accept();
      });
      return;
    }
    if (options.send_buffer_bytes > 0) {
      // A fixed kernel send buffer: a client that stops reading fills it after this many bytes.
      const int bytes = options.send_buffer_bytes;
      setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    }
    const bool admit = admitted.fetch_add(1) < connection_limit;
    if (!admit) {
      --admitted;
      ++refused;
    }
    std::make_shared<Session>(*this, std::move(socket), admit)->start();
    accept();
  });
}

const HttpServer::Impl::Route* HttpServer::Impl::route_at(const std::string& method, const std::string& path,
                                                           std::string* param) const {
  const Route* best = nullptr;
  std::optional<std::string> best_param;
  for (const auto& route : routes) {
    if (!method.empty() && route.method != method) continue;
    auto matched = route.match(path);
    if (!matched) continue;
    if (!route.param) return &route;
    if (!best || route.path.size() + route.suffix.size() > best->path.size() + best->suffix.size()) {
      best = &route;
      best_param = std::move(matched);
    }
  }
  if (best && param) *param = *best_param;
  return best;
}

const HttpServer::Impl::Route* HttpServer::Impl::find_route(const HttpRequest& req, std::vector<std::string>& params) const {
  const std::string method = req.method == "HEAD" ? "GET" : req.method;  // HEAD: a GET's head
  std::string param;
  const Route* route = route_at(method, req.path, &param);
  if (route && route->param) params = {std::move(param)};
  return route;
}

std::string HttpServer::Impl::path_label(const std::string& path) const {
  const Route* route = route_at("", path);
  return route ? route->pattern : "other";
}

void HttpServer::Impl::count(const std::string& method, const std::string& path, int status, const std::string& request_id) {
  {
    std::lock_guard lock(counts_mutex);
    ++counts[{path_label(path), status}];
  }
  if (options.log_requests)
    std::fprintf(stderr, "%s %s -> %d [%s]\n", method.c_str(), path.c_str(), status, request_id.c_str());
}

ErrorShape HttpServer::Impl::error_shape_for(const std::string& path) const {
  const Route* route = route_at("", path);
  return route ? route->error_shape : nullptr;
}

HttpResponse HttpServer::Impl::overloaded(ErrorShape shape) const {
  HttpResponse res;
  send_error(res, ApiError(503, fmt::format("the server is at its limit of {} connections (--max-connections); "
                                            "retry after a second", connection_limit),
                           "", "overloaded", "server_error"), shape);
  return res;
}

HttpResponse HttpServer::Impl::handle(HttpRequest& req) const {
  HttpResponse res;
  // Host, Origin, then the API key: checked before routing, so no handler (and no body parsing)
  // runs for a stranger.
  if (refuse_foreign_caller(req, res)) return res;
  const ErrorShape shape = error_shape_for(req.path);
  if (!options.api_key.empty() && !is_public_path(req.path) &&
      !key_matches(req.header("Authorization"), req.header("x-api-key"), options.api_key)) {
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, ApiError(401, req.has("Authorization") || req.has("x-api-key")
                                      ? "incorrect API key provided (the key given to inferlab serve --api-key is needed)"
                                      : "missing API key: send the header 'Authorization: Bearer <key>' (or 'x-api-key: <key>')",
                             "", "invalid_api_key", "invalid_request_error"), shape);
    return res;
  }
  const Route* route = find_route(req, req.params);
  if (!route) {
    send_json(res, 404, ApiError(404, fmt::format("no route for {} {}", req.method, req.path)).body());
    return res;
  }
  try {
    route->handler(req, res);
  } catch (...) {
    HttpResponse error = error_response(std::current_exception(), route->error_shape);
    for (auto& [name, value] : res.headers)
      if (!has_header(error.headers, name)) error.headers.emplace_back(name, value);
    return error;
  }
  return res;
}

bool HttpServer::Impl::refuse_foreign_caller(const HttpRequest& req, HttpResponse& res) const {
  const std::string host = req.header("Host");
  if (!access.host_allowed(host)) {
    send_error(res, ApiError(403, fmt::format("the Host header '{}' does not name this server: a loopback server answers "
                                              "localhost, 127.0.0.1 and [::1] (with its port or none); give other "
                                              "names with --allowed-hosts (DNS-rebinding protection)", host),
                             "", "host_not_allowed"));
    return true;
  }
  // Browsers send Origin on cross-origin requests (and on every POST): a page not listed in
  // --allowed-origins is refused outright, not only kept from reading the answer, since a "simple"
  // cross-origin POST is sent without a preflight.
  const std::string origin = req.header("Origin");
  if (origin.empty()) return false;
  if (!access.origin_allowed(origin)) {
    send_error(res, ApiError(403, fmt::format("requests from the web origin '{}' are not allowed: {}", origin,
                                              access.cors_enabled() ? "it is not listed in --allowed-origins"
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
  res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
  // The SDKs send their own headers from a browser (Anthropic's x-api-key and anthropic-*, OpenAI's
  // x-stainless-*): the origin is already allowed, so the headers it asks for are, as vLLM's
  // allow_headers ["*"] does (a wildcard would not cover Authorization). Only header-name characters
  // are echoed.
  std::string asked = req.header("Access-Control-Request-Headers");
  const bool plain = !asked.empty() && asked.size() <= 1024 &&
                     std::all_of(asked.begin(), asked.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' || c == ' ';
                     });
  res.set_header("Access-Control-Allow-Headers", plain ? asked : "Authorization, Content-Type, x-api-key, anthropic-version");
  res.set_header("Access-Control-Max-Age", "600");
  return true;
}

HttpServer::HttpServer(const HttpOptions& options) : impl_(std::make_shared<Impl>(options)) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::Impl::add_route(const char* method, const std::string& pattern, Handler handler, ErrorShape error_shape) {
  Route route{method, pattern, false, "", pattern, std::move(handler), error_shape};
  const std::size_t open = pattern.find('{'), close = pattern.find('}');
  if (open != std::string::npos && close != std::string::npos && close > open + 1) {
    route.param = true;
    route.path = pattern.substr(0, open);
    route.suffix = pattern.substr(close + 1);
  }
  routes.push_back(std::move(route));
}

void HttpServer::get(const std::string& path, Handler handler, ErrorShape error_shape) {
  impl_->add_route("GET", path, std::move(handler), error_shape);
}
void HttpServer::post(const std::string& path, Handler handler, ErrorShape error_shape) {
  impl_->add_route("POST", path, std::move(handler), error_shape);
}
void HttpServer::del(const std::string& path, Handler handler, ErrorShape error_shape) {
  impl_->add_route("DELETE", path, std::move(handler), error_shape);
}

int HttpServer::bind() {
  Impl& s = *impl_;
  error_code ec;
  auto addresses = tcp::resolver(*s.loop).resolve(s.options.host, std::to_string(s.options.port),
                                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || addresses.empty())
    fail("cannot listen on {}:{} ({}); pick another --host", s.options.host, s.options.port, ec ? ec.message() : "no address");
  const tcp::endpoint endpoint = addresses.begin()->endpoint();
  auto acceptor = std::make_unique<tcp::acceptor>(*s.loop);
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec && s.options.send_buffer_bytes > 0) {
    const int bytes = s.options.send_buffer_bytes;
    setsockopt(acceptor->native_handle(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  }
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    if (s.options.port == 0) fail("cannot listen on {} (any port): {}", s.options.host, ec.message());
    fail("cannot listen on {}:{} (in use, or not an address of this machine: {}); pick another with --port",
         s.options.host, s.options.port, ec.message());
  }
  const int port = acceptor->local_endpoint().port();
  s.access.set_port(port);
  s.acceptor = std::move(acceptor);
  s.accept_retry = std::make_unique<asio::steady_timer>(*s.loop);
  return port;
}

void HttpServer::listen_in_background(std::shared_ptr<const void> owner) {
  Impl& s = *impl_;
  s.owner = std::move(owner);
  s.accept();
  const int threads = std::max(1, s.options.http_threads);
  for (int i = 0; i < threads; ++i) s.threads.emplace_back([loop = s.loop.get()] {
      name_this_thread("http-io");
      loop->run();
    });
}

bool HttpServer::listening() const { return !impl_->threads.empty(); }

void HttpServer::stop() {
  Impl& s = *impl_;
  if (!s.loop) return;
  {
    std::unique_lock lock(s.gate->mutex);
    s.gate->open = false;  // the engine's wakes stop reaching the loop
  }
  s.loop->stop();
  for (auto& thread : s.threads) thread.join();
  s.threads.clear();
  s.handlers->join();  // a handler still parsing posts its answer to the stopped loop: dropped below
  s.acceptor.reset();
  s.accept_retry.reset();
  s.loop.reset();  // destroys every connection, which cancels the work behind its answer
  s.owner.reset();
}

int HttpServer::admitted_connections() const { return impl_->admitted.load(); }
uint64_t HttpServer::refused_connections() const { return impl_->refused.load(); }
std::map<std::pair<std::string, int>, uint64_t> HttpServer::request_counts() const {
  std::lock_guard lock(impl_->counts_mutex);
  return impl_->counts;
}

}  // namespace inferlab::api
