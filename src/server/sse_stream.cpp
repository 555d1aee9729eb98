// The SSE body (see sse_stream.h). The event loop polls it when the engine signals an event and a
// few times a second; each poll appends what the choices produced since the last one.
#include "server/sse_stream.h"

namespace inferlab::api {

std::string sse_data(const json& value) { return "data: " + dump(value) + "\n\n"; }
std::string sse_event(const char* name, const json& value) { return std::string("event: ") + name + "\n" + sse_data(value); }

namespace {

class SseBody : public StreamedBody {
 public:
  SseBody(std::shared_ptr<Completion> completion, std::unique_ptr<ResponseWriter> writer, std::atomic<int>& active_streams,
          std::chrono::milliseconds ping_interval)
      : completion_(std::move(completion)),
        writer_(std::move(writer)),
        active_streams_(active_streams),
        ping_interval_(ping_interval) {
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
      writer_->stream_error(ApiError(500, e.what(), "", "", "server_error"), out);
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
      writer_->stream_start(completion, out);
    }
    for (auto& c : completion.choices()) {
      if (completion.settled(*c)) continue;
      auto events = c->stream->wait(std::chrono::milliseconds(0));
      if (events.empty()) continue;
      Delta delta;
      for (auto& event : events) completion.absorb(*c, event, delta);
      if (!c->error.empty()) {
        completion.cancel_all();
        writer_->stream_error(Completion::error_of(*c), out);
        return true;
      }
      writer_->stream_delta(completion, *c, delta, out);
      if (delta.finished) writer_->stream_finish(completion, *c, out);
    }
    if (!completion.all_done()) return false;
    writer_->stream_end(completion, out);
    return true;
  }

  std::shared_ptr<Completion> completion_;
  std::unique_ptr<ResponseWriter> writer_;
  std::atomic<int>& active_streams_;
  std::chrono::milliseconds ping_interval_;
  bool started_ = false;
  bool ended_ = false;
  Clock::time_point last_write_ = Clock::now();
};

}  // namespace

void stream_completion(HttpResponse& res, std::shared_ptr<Completion> completion, std::unique_ptr<ResponseWriter> writer,
                       std::atomic<int>& active_streams, std::chrono::milliseconds ping_interval) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.content_type = "text/event-stream";
  res.stream = std::make_shared<SseBody>(std::move(completion), std::move(writer), active_streams, ping_interval);
}

}  // namespace inferlab::api
