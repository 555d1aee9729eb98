// The SSE pump (see sse_stream.h). httplib calls it again and again on the connection's worker
// while it returns true; each call writes what the choices produced since the last one.
#include "server/sse_stream.h"

#include <httplib.h>

namespace inferlab::api {
namespace {

const std::string kDone = "data: [DONE]\n\n";

std::string sse(const json& value) { return "data: " + dump(value) + "\n\n"; }

// One response's pump. Every byte goes through write(), so the ping knows when the client last got
// any. A ping is also a write that finds a client gone while its request still waits.
class SsePump {
 public:
  SsePump(std::shared_ptr<Completion> completion, std::chrono::milliseconds ping_interval)
      : completion_(std::move(completion)), ping_interval_(ping_interval) {}

  // One call of the content provider; false ends the response (the client is gone).
  bool operator()(httplib::DataSink& sink) {
    Completion& completion = *completion_;
    if (!started_) {
      started_ = true;
      for (auto& c : completion.choices())
        if (auto item = completion.opening_item(*c); item && !write(sink, completion.chunk(json::array({*item}))))
          return fail();
      return true;
    }
    if (completion.all_done()) {
      if (completion.request().include_usage && !write(sink, completion.usage_chunk())) return false;
      if (!write(sink, kDone)) return false;
      sink.done();
      return true;
    }
    bool first_wait = true;
    for (auto& c : completion.choices()) {
      if (completion.settled(*c)) continue;
      auto events = c->stream->wait(std::chrono::milliseconds(first_wait ? 100 : 0));
      first_wait = false;
      if (events.empty()) continue;
      Delta delta;
      for (auto& event : events) completion.absorb(*c, event, delta);
      if (!c->error.empty()) {
        completion.cancel_all();
        write(sink, Completion::error_of(*c).body());
        write(sink, kDone);
        sink.done();
        return true;
      }
      if (auto item = completion.delta_item(*c, delta); item && !write(sink, completion.chunk(json::array({*item}))))
        return fail();
      if (delta.finished && !write(sink, completion.finish_chunk(*c))) return fail();
    }
    if (ping_interval_.count() > 0 && Clock::now() - last_write_ >= ping_interval_ && !write(sink, std::string(": ping\n\n")))
      return fail();
    return true;
  }

 private:
  bool write(httplib::DataSink& sink, const std::string& data) {
    last_write_ = Clock::now();
    return sink.write(data.data(), data.size());
  }
  bool write(httplib::DataSink& sink, const json& event) { return write(sink, sse(event)); }
  bool fail() {
    completion_->cancel_all();
    return false;
  }

  std::shared_ptr<Completion> completion_;
  std::chrono::milliseconds ping_interval_;
  bool started_ = false;
  Clock::time_point last_write_ = Clock::now();
};

}  // namespace

void stream_completion(httplib::Response& res, std::shared_ptr<Completion> completion, std::atomic<int>& active_streams,
                       std::chrono::milliseconds ping_interval) {
  ++active_streams;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto pump = std::make_shared<SsePump>(completion, ping_interval);
  res.set_chunked_content_provider(
      "text/event-stream",
      [pump, completion](std::size_t, httplib::DataSink& sink) -> bool {
        try {
          return (*pump)(sink);
        } catch (const std::exception& e) {
          // Past the headers an error can only travel as an event.
          completion->cancel_all();
          std::string event = sse(ApiError(500, e.what(), "", "", "server_error").body()) + kDone;
          sink.write(event.data(), event.size());
          sink.done();
          return true;
        }
      },
      [completion, &active_streams](bool) {
        completion->cancel_all();  // a client that went away frees its KV at once
        --active_streams;
      });
}

}  // namespace inferlab::api
