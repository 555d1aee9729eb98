// The stream pool and the blocking request against a one-connection server on a loopback socket:
// the headers every request sends, body callbacks, hanging up, cancelling, transport failures.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "lab/http_client.h"
#include "inferlab/util/error.h"

using namespace inferlab::lab;
using End = TransferOutcome::End;

namespace {

// Listens on a free loopback port; serve() answers one connection with `reply` (after reading the
// request head and its Content-Length body) and keeps what was received.
class OneShotServer {
 public:
  OneShotServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd_, 1) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("cannot listen on loopback");
    port_ = ntohs(addr.sin_port);
  }
  ~OneShotServer() {
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);
  }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  void close_listener() { close(std::exchange(fd_, -1)); }

  // reply empty: read the request, then hold the connection until the client hangs up.
  void serve(std::string reply) {
    thread_ = std::thread([this, reply = std::move(reply)] {
      int client = accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      char buf[4096];
      std::size_t head_end = std::string::npos, wanted = 0;
      while (head_end == std::string::npos || request_.size() < head_end + 4 + wanted) {
        ssize_t n = read(client, buf, sizeof buf);
        if (n <= 0) break;
        request_.append(buf, n);
        if (head_end == std::string::npos && (head_end = request_.find("\r\n\r\n")) != std::string::npos)
          if (auto at = request_.find("Content-Length: "); at != std::string::npos) wanted = std::stoul(request_.substr(at + 16));
      }
      if (!reply.empty()) (void)!write(client, reply.data(), reply.size());
      else while (read(client, buf, sizeof buf) > 0) {}
      close(client);
    });
  }
  const std::string& request() {  // after the transfer ended
    if (thread_.joinable()) thread_.join();
    return request_;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string request_;
};

const std::string kSseReply =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: hi\n\ndata: [DONE]\n\n";

// Runs the pool until every transfer ended.
void drain(StreamPool& pool) {
  while (pool.in_flight() > 0) {
    pool.perform();
    pool.wait(100);
  }
}

}  // namespace

TEST(HttpClient, PoolSendsTheCommonHeadersAndStreamsTheBody) {
  OneShotServer server;
  server.serve(kSseReply);
  StreamPool pool(4);
  std::string body;
  int done_calls = 0;
  TransferOutcome outcome;
  pool.start({.url = server.url("/v1/chat/completions"), .timeout_ms = 10000, .body = "{\"a\":1}",
              .accept_event_stream = true},
             {.on_header = {},
              .on_body =
                  [&](long status, std::string_view bytes) {
                    EXPECT_EQ(status, 200);
                    body.append(bytes);
                    return true;
                  },
              .on_done =
                  [&](const TransferOutcome& o) {
                    outcome = o;
                    ++done_calls;
                  }});
  drain(pool);
  EXPECT_EQ(done_calls, 1);
  EXPECT_EQ(outcome.end, End::answered);
  EXPECT_EQ(outcome.status, 200);
  EXPECT_EQ(body, "data: hi\n\ndata: [DONE]\n\n");
  const std::string& request = server.request();
  EXPECT_EQ(request.rfind("POST /v1/chat/completions HTTP/1.1\r\n", 0), 0u) << request;
  for (const char* header : {"Content-Type: application/json\r\n", "Accept: text/event-stream\r\n",
                             "Authorization: Bearer EMPTY\r\n", "Content-Length: 7\r\n"})
    EXPECT_NE(request.find(header), std::string::npos) << header << " missing in\n" << request;
  EXPECT_EQ(request.find("Expect:"), std::string::npos);
  EXPECT_TRUE(request.ends_with("\r\n\r\n{\"a\":1}"));
}

TEST(HttpClient, FetchCollectsTheBodyAndNamesTransportFailures) {
  OneShotServer server;
  server.serve("HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\nConnection: close\r\n\r\nnope!");
  HttpResponse answer = fetch({.url = server.url("/v1/models"), .api_key = "k", .timeout_ms = 10000});
  EXPECT_EQ(answer.outcome.end, End::answered);
  EXPECT_EQ(answer.outcome.status, 404);
  EXPECT_EQ(answer.body, "nope!");
  EXPECT_NE(server.request().find("Authorization: Bearer k\r\n"), std::string::npos);
  EXPECT_EQ(server.request().rfind("GET /v1/models HTTP/1.1\r\n", 0), 0u);

  OneShotServer closed;
  const std::string url = closed.url("/v1/models");
  closed.close_listener();  // nothing listens: the connection is refused
  HttpResponse refused = fetch({.url = url, .timeout_ms = 10000});
  EXPECT_EQ(refused.outcome.end, End::failed);
  EXPECT_EQ(refused.outcome.status, 0);
  EXPECT_EQ(refused.outcome.error_kind, "Couldn't connect to server");
  try {
    require_answer(refused, "GET " + url);
    ADD_FAILURE() << "no error for a refused connection";
  } catch (const inferlab::Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("GET " + url + ": ", 0), 0u) << e.what();
  }
}

TEST(HttpClient, HangingUpAndThrowingEndTheTransfer) {
  OneShotServer server;
  server.serve(kSseReply);
  StreamPool pool(1);
  TransferOutcome outcome;
  pool.start({.url = server.url("/s"), .timeout_ms = 10000},
             {.on_header = {},
              .on_body = [](long, std::string_view) -> bool { throw inferlab::Error("unreadable stream"); },
              .on_done = [&](const TransferOutcome& o) { outcome = o; }});
  drain(pool);
  EXPECT_EQ(outcome.end, End::hung_up);
  EXPECT_EQ(outcome.error, "unreadable stream");

  OneShotServer other;
  other.serve(kSseReply);
  std::string headers;
  pool.start({.url = other.url("/s"), .timeout_ms = 10000},
             {.on_header = [&](std::string_view line) { headers.append(line); },
              .on_body = [](long, std::string_view) { return false; },
              .on_done = [&](const TransferOutcome& o) { outcome = o; }});
  drain(pool);
  EXPECT_EQ(outcome.end, End::hung_up);
  EXPECT_EQ(outcome.status, 200);
  EXPECT_NE(headers.find("Content-Type: text/event-stream"), std::string::npos);
}

TEST(HttpClient, CancelEndsATransferOnceAndTheServerSeesTheClose) {
  OneShotServer server;
  server.serve("");  // never answers
  StreamPool pool(1);
  int done_calls = 0;
  TransferOutcome outcome;
  auto id = pool.start({.url = server.url("/slow"), .timeout_ms = 10000},
                       {.on_header = {},
                        .on_body = [](long, std::string_view) { return true; },
                        .on_done =
                            [&](const TransferOutcome& o) {
                              outcome = o;
                              ++done_calls;
                            }});
  for (int i = 0; i < 20; ++i) {  // connect and send the request
    pool.perform();
    pool.wait(10);
  }
  pool.cancel(id);
  pool.cancel(id);  // already gone: nothing
  EXPECT_EQ(done_calls, 1);
  EXPECT_EQ(outcome.end, End::cancelled);
  EXPECT_EQ(pool.in_flight(), 0u);
  EXPECT_EQ(server.request().rfind("GET /slow HTTP/1.1\r\n", 0), 0u);  // joins: the server saw the hang-up
}

// The conformance suite's needs: the answer's headers (names lower-cased, values trimmed), a
// request without Authorization, extra request headers.
TEST(HttpClient, FetchKeepsTheHeadersAndCanLeaveOutAuthorization) {
  OneShotServer server;
  server.serve("HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\nX-Request-Id:  abc-1 \r\nWWW-Authenticate: Bearer\r\n"
               "Connection: close\r\n\r\nno");
  HttpResponse answer = fetch({.url = server.url("/v1/models"), .timeout_ms = 10000, .send_authorization = false,
                               .extra_headers = {"x-request-id: mine-7"}});
  EXPECT_EQ(answer.outcome.status, 401);
  EXPECT_EQ(answer.header("x-request-id"), "abc-1");
  EXPECT_EQ(answer.header("www-authenticate"), "Bearer");
  EXPECT_EQ(answer.header("content-length"), "2");
  EXPECT_EQ(answer.header("absent"), "");
  const std::string& request = server.request();
  EXPECT_EQ(request.find("Authorization"), std::string::npos) << request;
  EXPECT_NE(request.find("x-request-id: mine-7\r\n"), std::string::npos) << request;
}
