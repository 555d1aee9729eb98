// The generation routes in-process (include/inferlab/server/in_process.h): the routes' parsing
// (parse_chat_request / parse_completion_request with the server's ModelContext), the engine
// submission of answer_generation, and the Completion that follows each choice; only the HTTP
// transport and the response writers are left out.
#include "inferlab/server/in_process.h"

#include <condition_variable>
#include <mutex>

#include "server/completion.h"
#include "server/openai_request.h"
#include "server/server_state.h"

namespace inferlab {
namespace {

using api::json;

json logprobs_json(const std::vector<api::LogprobEntry>& entries, const EngineText& text) {
  json out = json::array();
  for (const auto& entry : entries) {
    json top = json::array();
    for (const auto& alt : entry.sampled.top) top.push_back(json::array({alt.token, alt.logprob, text.token_text(alt.token)}));
    out.push_back({{"token", entry.sampled.token},
                   {"text", text.token_text(entry.sampled.token)},
                   {"logprob", entry.sampled.logprob},
                   {"top", std::move(top)}});
  }
  return out;
}

// What the engine thread signals to a waiting poll(). Shared with the streams' callbacks, which
// may still run once the request is gone.
struct Signal {
  std::mutex mutex;
  std::condition_variable wake;
  bool news = false;
};

class Request : public InProcessRequest {
 public:
  Request(std::shared_ptr<const api::ParsedRequest> parsed, const EngineText& text)
      : completion_(std::move(parsed), text, /*request_timeout_s=*/0, /*timings=*/true) {}

  api::Completion& completion() { return completion_; }
  // After every choice was added: each engine event wakes a waiting poll().
  void listen() {
    completion_.on_event([signal = signal_] {
      std::lock_guard lock(signal->mutex);
      signal->news = true;
      signal->wake.notify_all();
    });
  }

  std::string poll(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    json out = json::array();
    while (true) {
      {
        std::lock_guard lock(signal_->mutex);
        signal_->news = false;
      }
      for (auto& choice : completion_.choices()) absorb(*choice, out);
      if (!out.empty() || done()) return api::dump(out);
      std::unique_lock lock(signal_->mutex);
      if (!signal_->wake.wait_until(lock, deadline, [this] { return signal_->news; })) return api::dump(out);
    }
  }

  bool done() const override { return completion_.all_done(); }
  void cancel() override {
    cancelled_ = true;
    completion_.cancel_all();
  }
  std::string prompt_token_ids() const override { return api::dump(json(completion_.request().prompts)); }

 private:
  // What one choice showed since the last poll, appended to `out` when there is something.
  void absorb(api::Choice& choice, json& out) {
    if (completion_.settled(choice)) return;
    std::vector<int32_t> tokens;
    api::Delta delta;
    for (auto& event : choice.stream->wait(std::chrono::milliseconds(0))) {
      if (event.token && !choice.done) tokens.push_back(event.token->token);  // past a stop string: not shown
      completion_.absorb(choice, event, delta);
    }
    if (!choice.error.empty() && !cancelled_) {
      const api::ApiError error = api::Completion::error_of(choice);
      if (error.status < 500) throw RequestError(error.status, error.message, error.param);
      throw Error(error.message);
    }
    const bool settled = completion_.settled(choice);
    if (tokens.empty() && delta.text.empty() && delta.reasoning.empty() && !settled) return;
    json item = {{"index", choice.index},
                 {"prompt_index", choice.prompt_index},
                 {"text", delta.text},
                 {"reasoning", delta.reasoning},
                 {"token_ids", tokens},
                 {"logprobs", logprobs_json(delta.logprobs, completion_.text())}};
    if (settled) {
      json calls = json::array();
      for (const auto& call : choice.tool_calls)
        calls.push_back({{"id", call.id}, {"name", call.name}, {"arguments", call.arguments}});
      item["tool_calls"] = std::move(calls);
      item["finish_reason"] = choice.error.empty() ? choice.finish_reason : "cancelled";
      item["stop_reason"] = choice.stop.hit() ? json(choice.stop.matched()) : json(nullptr);  // the stop string met
      item["timings"] = choice.timings ? api::timings_json(*choice.timings) : json(nullptr);
    }
    out.push_back(std::move(item));
  }

  api::Completion completion_;
  std::shared_ptr<Signal> signal_ = std::make_shared<Signal>();
  bool cancelled_ = false;
};

}  // namespace

struct InProcessServer::Impl {
  std::unique_ptr<Engine> engine;
  api::ModelContext context;
};

InProcessServer::InProcessServer(const std::string& model, const ServerOptions& options) : impl_(std::make_unique<Impl>()) {
  EngineOptions engine_options;
  engine_options.scheduler = options.scheduler;
  engine_options.threads = options.threads;
  engine_options.weights = options.weights;
  engine_options.output_weights = options.output_weights;
  engine_options.served_model_name = options.served_model_name;
  impl_->engine = std::make_unique<Engine>(model, engine_options);
  impl_->context = api::model_context_of(*impl_->engine, options);
}

InProcessServer::~InProcessServer() = default;

const Engine& InProcessServer::engine() const { return *impl_->engine; }

void InProcessServer::run_on_model(const std::function<void(Model&)>& task) { impl_->engine->run_on_model(task); }

std::unique_ptr<InProcessRequest> InProcessServer::submit(const std::string& route, const std::string& body) {
  const api::ModelContext& context = impl_->context;
  try {
    const json request_body = api::parse_json_object(body, context.limits.max_json_depth);
    std::shared_ptr<const api::ParsedRequest> parsed;
    if (route == "chat") parsed = std::make_shared<const api::ParsedRequest>(api::parse_chat_request(request_body, context));
    else if (route == "completions")
      parsed = std::make_shared<const api::ParsedRequest>(api::parse_completion_request(request_body, context));
    else fail("route '{}' is not one of chat, completions", route);
    auto request = std::make_unique<Request>(parsed, impl_->engine->text());
    // As answer_generation submits: n choices per prompt, each its own sequence (no deadline).
    request->completion().submit_choices(*impl_->engine, std::nullopt);
    request->listen();
    return request;
  } catch (const api::ApiError& e) {
    if (e.status >= 500) throw Error(e.message);
    throw RequestError(e.status, e.message, e.param);
  }
}

}  // namespace inferlab
