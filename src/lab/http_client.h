// The one HTTP client of the benchmarks, over libcurl: a pool of concurrent transfers driven by one
// thread through libcurl's multi interface (an event loop over non-blocking sockets, so thousands
// of streams cost file descriptors, not threads), and a blocking request built on it. Every
// request sends the same headers: Content-Type: application/json, the bearer key ("EMPTY" when
// none, or no Authorization header at all when asked), no 100-continue round trip, Accept:
// text/event-stream when asked, and any extra headers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab::lab {

struct HttpRequest {
  std::string url;
  std::string api_key;
  long timeout_ms = 0;              // the whole transfer, connection included
  std::optional<std::string> body = std::nullopt;  // POSTed as JSON; none: GET
  long connect_timeout_ms = 0;      // 0: libcurl's default
  bool accept_event_stream = false;
  bool http_1_1 = false;            // never negotiate HTTP/2
  bool send_authorization = true;   // false: no Authorization header (the conformance suite's auth check)
  std::vector<std::string> extra_headers = {};  // "Name: value" lines
};

// How a transfer ended.
struct TransferOutcome {
  enum class End {
    answered,   // a whole HTTP answer, whatever its status
    timed_out,  // timeout_ms passed
    hung_up,    // on_body asked to stop (or threw)
    cancelled,  // cancel() / cancel_all()
    failed,     // any other transport failure (refused, reset, ...)
  };
  End end = End::answered;
  long status = 0;         // HTTP status; 0 when none came
  std::string error;       // why it did not end answered: libcurl's message, or what on_body threw
  std::string error_kind;  // libcurl's short description of the failure code (stable, for grouping)
};

// What a transfer does with its answer, called on the pool's thread.
struct TransferCallbacks {
  // Each response header line as it arrives (may be empty).
  std::function<void(std::string_view line)> on_header;
  // Body bytes as they arrive, with the status; false hangs up (End::hung_up). An exception
  // hangs up too, its message in the outcome's error.
  std::function<bool(long status, std::string_view bytes)> on_body;
  // Exactly once, when the transfer ended in any way.
  std::function<void(const TransferOutcome&)> on_done;
};

class StreamPool {
 public:
  using TransferId = std::uint64_t;

  // Room for `max_streams` concurrent transfers: the open-file limit is raised to fit, the
  // connection cache sized to them.
  explicit StreamPool(std::size_t max_streams);
  ~StreamPool();  // transfers still running are dropped without their on_done
  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;

  TransferId start(const HttpRequest& request, TransferCallbacks callbacks);
  // Hangs up now (the server sees the connection close); on_done gets End::cancelled.
  void cancel(TransferId id);
  void cancel_all();
  // Moves every transfer on and calls on_done of those that ended; returns how many ended.
  std::size_t perform();
  // Sleeps until a socket is ready, a libcurl timer is due, or max_ms passed.
  void wait(long max_ms);
  std::size_t in_flight() const { return transfers_.size(); }

 private:
  struct Transfer;
  void finish(std::map<TransferId, std::unique_ptr<Transfer>>::iterator it, TransferOutcome outcome);

  void* multi_ = nullptr;  // CURLM*, kept out of this header
  TransferId next_id_ = 0;
  std::map<TransferId, std::unique_ptr<Transfer>> transfers_;
};

struct HttpResponse {
  TransferOutcome outcome;
  std::string body;  // the whole body (up to 64 MiB), except 2xx bytes given to on_stream
  std::map<std::string, std::string> headers;  // of the final answer, names lower-cased (the last of a repeated one)
  std::string header(const std::string& lower_case_name) const;  // "" when absent
};
// One blocking request. With on_stream, a 2xx body goes there as it arrives instead of into body
// (false or an exception hangs up). Never throws for transport failures: see outcome.
HttpResponse fetch(const HttpRequest& request, const std::function<bool(std::string_view)>& on_stream = {});
// Throws Error("<what>: <libcurl's message>") unless the request got an HTTP answer.
void require_answer(const HttpResponse& response, const std::string& what);

}  // namespace inferlab::lab
