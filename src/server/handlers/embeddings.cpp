// POST /v1/embeddings: each input one engine request (they share steps with generation), the
// answer once every input is embedded.
#include <optional>

#include "server/embedding_request.h"
#include "server/handlers/routes.h"
#include "server/http_server.h"

namespace inferlab::api {
namespace {

// The inputs' streams, polled when one has news; the answer once all have their embedding.
class EmbeddingsAnswer : public DeferredResponse {
 public:
  EmbeddingsAnswer(std::vector<std::shared_ptr<RequestStream>> streams, bool base64, std::string model_name, int prompt_tokens,
                   double timeout_s)
      : streams_(std::move(streams)),
        embeddings_(streams_.size()),
        base64_(base64),
        model_name_(std::move(model_name)),
        prompt_tokens_(prompt_tokens),
        timeout_s_(timeout_s) {}

  void start(std::function<void()> wake) override {
    for (auto& stream : streams_) stream->on_event(wake);
  }

  std::optional<HttpResponse> poll() override {
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      if (done_[i]) continue;
      for (StreamEvent& event : streams_[i]->wait(std::chrono::milliseconds(0))) {
        if (!event.finish) continue;
        done_[i] = true;
        if (*event.finish == FinishReason::stop) embeddings_[i] = std::move(event.embedding);
        else if (!error_) error_ = error_of(*event.finish, event.error);
      }
    }
    for (bool done : done_)
      if (!done) return std::nullopt;
    if (error_) throw *error_;
    HttpResponse res;
    send_json(res, 200, embeddings_response(embeddings_, base64_, model_name_, prompt_tokens_));
    return res;
  }

  void cancel() override {
    for (auto& stream : streams_) stream->cancel();
  }

 private:
  ApiError error_of(FinishReason reason, const std::string& message) const {
    if (reason == FinishReason::timeout)
      return ApiError(504, fmt::format("the request timed out after {} s (inferlab serve --timeout)", timeout_s_), "",
                      "timeout", "timeout_error");
    return ApiError(500, message.empty() ? "embedding failed" : message, "", "", "server_error");
  }

  std::vector<std::shared_ptr<RequestStream>> streams_;
  std::vector<std::vector<float>> embeddings_;
  std::vector<bool> done_ = std::vector<bool>(streams_.size(), false);
  std::optional<ApiError> error_;
  bool base64_;
  std::string model_name_;
  int prompt_tokens_;
  double timeout_s_;
};

}  // namespace

void embeddings(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  EmbeddingsRequest request = parse_embeddings_request(parse_json_object(req.body, state.options.max_json_depth), state.context);
  std::optional<Clock::time_point> deadline;
  if (state.options.request_timeout_s > 0)
    deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(state.options.request_timeout_s * 1000));
  std::vector<std::shared_ptr<RequestStream>> streams;
  int prompt_tokens = 0;
  try {
    for (auto& input : request.inputs) {
      prompt_tokens += static_cast<int>(input.size());
      streams.push_back(state.engine->submit(EmbeddingRequest{std::move(input), deadline}));
    }
  } catch (...) {  // a full queue (503): the inputs already queued are not needed any more
    for (auto& stream : streams) stream->cancel();
    throw;
  }
  res.deferred = std::make_shared<EmbeddingsAnswer>(std::move(streams), request.base64, state.engine->name(), prompt_tokens,
                                                    state.options.request_timeout_s);
}

}  // namespace inferlab::api
