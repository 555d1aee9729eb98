// inferlab's own HTTP request and response, what the routes' handlers see: no type of the HTTP
// library (src/server/http_server.cpp) passes this line. A response is either whole now, or comes
// later from a producer the event loop polls (a streamed body, or a whole answer once ready), so
// no handler and no engine thread ever waits on a socket.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferlab::api {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// Case-insensitive lookup (HTTP field names); "" when absent.
std::string header_value(const HttpHeaders& headers, std::string_view name);
bool has_header(const HttpHeaders& headers, std::string_view name);

// %XX escapes decoded (a model id sent as Qwen%2FQwen2.5 is Qwen/Qwen2.5); in a query, '+' is a
// space too (HTML forms' encoding, which clients' query builders use).
std::string percent_decoded(std::string_view text, bool plus_is_space = false);

// A target's query ("a=1&b=x%20y&flag") as its name/value pairs, in order, decoded.
using QueryParams = std::vector<std::pair<std::string, std::string>>;
QueryParams parse_query(std::string_view query);

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query, %XX decoded
  QueryParams query;   // the target's ?name=value pairs
  HttpHeaders headers;
  std::string body;
  std::vector<std::string> params;  // what the route's "{name}" matched (may hold slashes)

  std::string header(std::string_view name) const { return header_value(headers, name); }
  bool has(std::string_view name) const { return has_header(headers, name); }
  // The values of query parameter `name`, in order (none: absent).
  std::vector<std::string> query_values(std::string_view name) const;
};

struct HttpResponse;

// A body sent as it is produced (Transfer-Encoding: chunked after the response's head). The event
// loop calls poll() after start(), whenever `wake` was called (from any thread), and about once a
// second; poll never blocks.
class StreamedBody {
 public:
  virtual ~StreamedBody() = default;
  virtual void start(std::function<void()> wake) = 0;
  // Appends what is ready to `out`; true once the body is complete (nothing follows).
  virtual bool poll(std::string& out) = 0;
  virtual void cancel() = 0;  // the client went away: stop the work behind it
};

// A whole answer that is ready later (a non-streaming completion). Polled like StreamedBody; it may
// throw what a handler may throw (mapped to an error answer).
class DeferredResponse {
 public:
  virtual ~DeferredResponse() = default;
  virtual void start(std::function<void()> wake) = 0;
  virtual std::optional<HttpResponse> poll() = 0;
  virtual void cancel() = 0;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;  // besides Content-Type / Content-Length / Transfer-Encoding / Connection
  std::string content_type;
  std::string body;
  std::shared_ptr<StreamedBody> stream;        // set: `body` unused, sent chunked as produced
  std::shared_ptr<DeferredResponse> deferred;  // set: the whole response comes from it

  void set_header(const std::string& name, std::string value);  // replaces one of the same name
  std::string header(std::string_view name) const { return header_value(headers, name); }
  void set_content(std::string content, std::string type) {
    body = std::move(content);
    content_type = std::move(type);
  }
};

}  // namespace inferlab::api
