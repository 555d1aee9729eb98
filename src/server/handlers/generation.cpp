// Generation requests to the engine and their answers (see generation.h).
#include "server/handlers/generation.h"

#include "server/http_server.h"
#include "server/sse_stream.h"

namespace inferlab::api {
namespace {

// A non-streaming answer as the transport's deferred response: polled when a choice has news.
class WholeAnswer : public DeferredResponse {
 public:
  WholeAnswer(std::shared_ptr<Completion> completion, std::unique_ptr<ResponseWriter> writer)
      : completion_(std::move(completion)), writer_(std::move(writer)) {}
  void start(std::function<void()> wake) override { completion_->on_event(wake); }
  std::optional<HttpResponse> poll() override {
    if (!completion_->poll_settled()) return std::nullopt;
    HttpResponse res;
    send_json(res, 200, writer_->body(*completion_));
    return res;
  }
  void cancel() override { completion_->cancel_all(); }

 private:
  std::shared_ptr<Completion> completion_;
  std::unique_ptr<ResponseWriter> writer_;
};

}  // namespace

void answer_generation(ServerState& state, HttpResponse& res, ParsedRequest parsed, std::unique_ptr<ResponseWriter> writer) {
  const ServerOptions& options = state.options;
  auto request = std::make_shared<const ParsedRequest>(std::move(parsed));
  auto completion = std::make_shared<Completion>(request, state.engine->text(), options.request_timeout_s, options.timings);
  std::optional<Clock::time_point> deadline;
  if (options.request_timeout_s > 0)
    deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.request_timeout_s * 1000));
  // n choices per prompt, each its own sequence (a failed submit cancels those already running:
  // the completion goes away).
  completion->submit_choices(*state.engine, deadline);
  if (request->stream) {
    stream_completion(res, completion, std::move(writer), state.active_streams,
                      std::chrono::milliseconds(static_cast<int64_t>(options.sse_ping_interval_s * 1000)));
    return;
  }
  // Answered once whole; the transport cancels it when the client hangs up before that.
  res.deferred = std::make_shared<WholeAnswer>(completion, std::move(writer));
}

}  // namespace inferlab::api
