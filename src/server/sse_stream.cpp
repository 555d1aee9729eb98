// The SSE body (see sse_stream.h). The event loop polls it when the engine signals an event and a
// few times a second; each poll appends what the choices produced since the last one.
#include "server/sse_stream.h"

namespace inferlab::api {
namespace {

const std::string kDone = "data: [DONE]\n\n";

std::string sse(const json& value) { return "data: " + dump(value) + "\n\n"; }

class SseBody : public StreamedBody {
 public:
  SseBody(std::shared_ptr<Completion> completion, std::atomic<int>& active_streams, std::chrono::milliseconds ping_interval)
      : completion_(std::move(completion)), active_streams_(active_streams), ping_interval_(ping_interval) {
    ++active_streams_;
  }
  ~SseBody() override {
    completion_->cancel_all();  // a client that went away frees its KV at once
    --active_streams_;
  }

  void start(std::function<void()> wake) override { completion_->on_event(wake); }
  void cancel() override { completion_->cancel_all(); }

  bool poll(std::string& out) override {
    if (ended_) return true;
    const std::size_t before = out.size();
    try {
      ended_ = pump(out);
    } catch (const std::exception& e) {
      // Past the headers an error can only travel as an event.
      completion_->cancel_all();
      out += sse(ApiError(500, e.what(), "", "", "server_error").body()) + kDone;
      ended_ = true;
    }
    if (out.size() > before) last_write_ = Clock::now();
    else if (!ended_ && ping_interval_.count() > 0 && Clock::now() - last_write_ >= ping_interval_) {
      out += ": ping\n\n";
      last_write_ = Clock::now();
    }
    return ended_;
  }

 private:
  // Appends what is ready; true once the stream is complete.
  bool pump(std::string& out) {
    Completion& completion = *completion_;
    if (!started_) {
      started_ = true;
      for (auto& c : completion.choices())
        if (auto item = completion.opening_item(*c)) out += sse(completion.chunk(json::array({*item})));
    }
    for (auto& c : completion.choices()) {
      if (completion.settled(*c)) continue;
      auto events = c->stream->wait(std::chrono::milliseconds(0));
      if (events.empty()) continue;
      Delta delta;
      for (auto& event : events) completion.absorb(*c, event, delta);
      if (!c->error.empty()) {
        completion.cancel_all();
        out += sse(Completion::error_of(*c).body()) + kDone;
        return true;
      }
      if (auto item = completion.delta_item(*c, delta)) out += sse(completion.chunk(json::array({*item})));
      if (delta.finished) out += sse(completion.finish_chunk(*c));
    }
    if (!completion.all_done()) return false;
    if (completion.request().include_usage) out += sse(completion.usage_chunk());
    out += kDone;
    return true;
  }

  std::shared_ptr<Completion> completion_;
  std::atomic<int>& active_streams_;
  std::chrono::milliseconds ping_interval_;
  bool started_ = false;
  bool ended_ = false;
  Clock::time_point last_write_ = Clock::now();
};

}  // namespace

void stream_completion(HttpResponse& res, std::shared_ptr<Completion> completion, std::atomic<int>& active_streams,
                       std::chrono::milliseconds ping_interval) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.content_type = "text/event-stream";
  res.stream = std::make_shared<SseBody>(std::move(completion), active_streams, ping_interval);
}

}  // namespace inferlab::api
