// The server context (include/inferlab/server/server.h): wires the HTTP transport to the Engine
// through the OpenAI routes, and runs the lifecycle: start (listen), load (engine ready), the
// idle-memory housekeeper and the graceful shutdown.
#include "inferlab/server/server.h"
#include "inferlab/util/thread_name.h"

#include <fmt/format.h>
#include <malloc.h>
#include <sys/resource.h>

#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <algorithm>

#include "inferlab/generation/engine.h"
#include "server/dashboard.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/completion.h"
#include "server/response_writer.h"
#include "server/prometheus.h"
#include "server/server_info.h"
#include "server/sse_stream.h"

namespace inferlab {
namespace api {

// A non-streaming completion as the transport's deferred answer: polled when a choice has news.
class CompletionAnswer : public DeferredResponse {
 public:
  CompletionAnswer(std::shared_ptr<Completion> completion, std::unique_ptr<ResponseWriter> writer)
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

}  // namespace api

using api::ApiError;
using api::json;
using api::send_json;

struct Server::Impl {
  ServerOptions options;
  api::HttpServer http;
  int bound_port = 0;
  std::atomic<bool> ready{false}, draining{false};

  std::unique_ptr<Engine> engine;
  api::ModelContext context;
  std::string system_fingerprint;  // set at load: the served configuration
  std::time_t created = std::time(nullptr);

  std::atomic<int> active_streams{0};
  std::atomic<uint64_t> memory_trims{0};

  // Returns freed heap memory to the OS once the server goes idle (see housekeeping()).
  std::thread housekeeper;
  std::mutex housekeeper_mutex;
  std::condition_variable housekeeper_wake;
  bool housekeeper_stop = false;

  explicit Impl(ServerOptions o) : options(std::move(o)), http(http_options_of(options)) { routes(); }

  // The transport's part of the options (it knows nothing of the engine's).
  static api::HttpOptions http_options_of(const ServerOptions& o) {
    return {.host = o.host,
            .port = o.port,
            .http_threads = o.http_threads,
            .max_connections = o.max_connections,
            .log_requests = o.log_requests,
            .api_key = o.api_key,
            .allowed_hosts = o.allowed_hosts,
            .allowed_origins = o.allowed_origins,
            .max_body_bytes = o.max_body_bytes,
            .header_timeout_s = o.header_timeout_s,
            .body_timeout_s = o.body_timeout_s,
            .max_header_bytes = o.max_header_bytes,
            .max_header_count = o.max_header_count,
            .slow_client_timeout_s = o.slow_client_timeout_s,
            .send_buffer_bytes = o.send_buffer_bytes};
  }

  void routes();
  void housekeeping();
  void generate(const api::HttpRequest& req, api::HttpResponse& res, bool chat);
  json model_entry() const;
  api::MetricsSnapshot metrics() const;
  // /health says 503 while work waits and the engine loop made no progress for
  // --engine-stall-timeout (a hung engine must not look healthy). The engine clocks its own
  // progress, so a step that ends is seen at once, not on a later tick.
  bool engine_stalled() const {
    return options.engine_stall_s > 0 && engine && !engine->idle() &&
           engine->seconds_since_progress() > options.engine_stall_s;
  }
  void require_ready() const {
    if (draining) throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_error");
    if (!ready) throw ApiError(503, "the model is still loading; retry when GET /health returns 200", "", "loading", "server_error");
  }
};

namespace {

// OpenAI's system_fingerprint names the backend configuration a completion ran with, so a client
// can tell why the same seed gave other tokens: here the model, its weights format and the build.
std::string fingerprint_of(const Engine& engine, const ServerOptions& options) {
  const std::string identity = fmt::format("{}|{}|{}|{}|{}", engine.name(), engine.model_path().string(), options.weights,
                                           options.output_weights,
                                           options.scheduler.block_size);
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a
  for (unsigned char c : identity) hash = (hash ^ c) * 0x100000001b3ULL;
  return fmt::format("fp_{:010x}", hash & 0xffffffffffULL);
}

}  // namespace

Server::Server(ServerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {}

Server::~Server() {
  if (impl_->http.listening()) shutdown(std::chrono::milliseconds(0));
}

int Server::port() const { return impl_->bound_port; }
const std::string& Server::model_name() const {
  static const std::string not_loaded;
  return impl_->engine ? impl_->engine->name() : not_loaded;
}

int Server::start() {
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not end the process
  // Each connection is a descriptor: thousands of open streams need more than the usual soft
  // limit of 1024, and the hard limit is ours to take.
  if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  impl_->bound_port = impl_->http.bind();
  impl_->http.listen_in_background(impl_);
  return impl_->bound_port;
}

void Server::load(const std::string& model_name) {
  Impl& s = *impl_;
  EngineOptions engine_options;
  engine_options.scheduler = s.options.scheduler;
  engine_options.threads = s.options.threads;
  engine_options.weights = s.options.weights;
  engine_options.output_weights = s.options.output_weights;
  engine_options.served_model_name = s.options.served_model_name;
  s.engine = std::make_unique<Engine>(model_name, engine_options);
  if (const std::string& error = s.engine->text().chat_template_error(); !error.empty())
    std::fprintf(stderr, "inferlab serve: warning: chat template not usable (%s); /v1/chat/completions will refuse\n",
                 error.c_str());

  s.context.text = &s.engine->text();
  s.context.accepted_names = s.engine->accepted_names();
  s.context.context_length = s.engine->context_length();
  s.context.vocab_size = s.engine->vocab_size();
  s.context.kv_capacity_tokens = s.engine->kv_capacity_tokens();
  s.context.limits = {.max_n = s.options.max_n,
                      .max_messages = s.options.max_messages,
                      .max_prompt_tokens = s.options.max_prompt_tokens,
                      .max_tokens = s.options.max_tokens_limit,
                      .max_json_depth = s.options.max_json_depth,
                      .max_prompt_bytes = s.options.max_prompt_bytes,
                      .grammar = {}};
  s.context.limits.grammar.max_grammar_bytes = s.options.max_grammar_bytes;
  s.context.limits.grammar.max_regex_bytes = s.options.max_regex_bytes;
  s.context.limits.grammar.max_schema_depth = s.options.max_schema_depth;
  s.system_fingerprint = fingerprint_of(*s.engine, s.options);
  for (int32_t id = 0; id < s.engine->text().vocab_size(); ++id)
    s.context.longest_token_bytes = std::max(s.context.longest_token_bytes, s.engine->text().token_bytes(id).size());
  s.housekeeper = std::thread([&s] {
    name_this_thread("housekeeping");
    s.housekeeping();
  });
  // Ready last: a client that sees /health 200 sees every thread the server will run.
  s.ready = true;
}

void Server::Impl::housekeeping() {
  // glibc keeps memory freed by the HTTP threads in their arenas; after load that is tens of MB
  // above a cold start. Trim once per busy -> idle transition, checked a few times a second.
  bool busy_since_trim = false;
  std::unique_lock lock(housekeeper_mutex);
  while (!housekeeper_wake.wait_for(lock, std::chrono::milliseconds(200), [this] { return housekeeper_stop; })) {
    const bool idle = engine->idle() && active_streams == 0;
    if (!idle) {
      busy_since_trim = true;
    } else if (busy_since_trim) {
      busy_since_trim = false;
      malloc_trim(0);
      ++memory_trims;
    }
  }
}

void Server::shutdown(std::chrono::milliseconds drain) {
  Impl& s = *impl_;
  s.draining = true;
  if (s.engine) {
    auto deadline = Clock::now() + drain;
    while (!s.engine->idle() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s.engine->shutdown("the server is shutting down");
  }
  // Let the streams write their final error event and [DONE].
  auto deadline = Clock::now() + std::chrono::seconds(2);
  while (s.active_streams > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (s.housekeeper.joinable()) {
    {
      std::lock_guard lock(s.housekeeper_mutex);
      s.housekeeper_stop = true;
    }
    s.housekeeper_wake.notify_all();
    s.housekeeper.join();
  }
  s.http.stop();
}

api::MetricsSnapshot Server::Impl::metrics() const {
  api::MetricsSnapshot m;
  m.admitted_connections = http.admitted_connections();
  m.refused_connections = http.refused_connections();
  m.memory_trims = memory_trims;
  m.model_ready = ready && !draining;
  m.http_requests = http.request_counts();
  if (engine) m.engine = engine->stats();
  m.active_streams = active_streams;
  m.vllm_names = options.metrics_compat == "vllm";
  return m;
}

void Server::Impl::routes() {
  http.get("/health", [this](const api::HttpRequest&, api::HttpResponse& res) {
    if (draining) send_json(res, 503, {{"status", "shutting down"}});
    else if (!ready) send_json(res, 503, {{"status", "loading"}});
    else if (engine_stalled())
      send_json(res, 503, {{"status", "engine stalled"},
                           {"message", fmt::format("the engine made no step for over {} s with requests waiting "
                                                   "(--engine-stall-timeout)", options.engine_stall_s)}});
    else send_json(res, 200, {{"status", "ok"}});
  });
  // Readiness (load balancers, Kubernetes): serving now. Liveness is /health.
  http.get("/ready", [this](const api::HttpRequest&, api::HttpResponse& res) {
    if (ready && !draining) send_json(res, 200, {{"status", "ready"}});
    else send_json(res, 503, {{"status", draining ? "shutting down" : "loading"}});
  });
  http.get("/v1/models", [this](const api::HttpRequest&, api::HttpResponse& res) {
    require_ready();
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_entry()})}});
  });
  // openai's models.retrieve; any name the chat routes accept finds the one model served.
  http.get("/v1/models/{id}", [this](const api::HttpRequest& req, api::HttpResponse& res) {
    require_ready();
    const std::string& id = req.params.at(0);
    if (std::find(context.accepted_names.begin(), context.accepted_names.end(), id) == context.accepted_names.end())
      throw ApiError(404, fmt::format("The model `{}` does not exist.", id),
                     "model", "model_not_found");
    send_json(res, 200, model_entry());
  });
  http.get("/server_info", [this](const api::HttpRequest&, api::HttpResponse& res) {
    require_ready();
    send_json(res, 200, api::server_info(options, bound_port, engine->name(), engine->model_path().string(), context));
  });
  http.get("/metrics", [this](const api::HttpRequest&, api::HttpResponse& res) {
    res.set_content(api::prometheus_text(metrics()), "text/plain; version=0.0.4; charset=utf-8");
  });
  // The page is the same static bytes for everyone (no data: the API-key check lets it through,
  // as a login page); every figure it shows comes from /dashboard/stats, which needs the key.
  http.get("/dashboard", [](const api::HttpRequest&, api::HttpResponse& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_header("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                              "connect-src 'self'; img-src 'self'; frame-ancestors 'none'");
    res.set_content(api::dashboard_page(), "text/html; charset=utf-8");
  });
  http.get("/dashboard/stats", [this](const api::HttpRequest&, api::HttpResponse& res) {
    const std::vector<SequenceSnapshot> running = engine ? engine->running_sequences() : std::vector<SequenceSnapshot>{};
    res.set_header("Cache-Control", "no-store");
    send_json(res, 200, api::dashboard_stats(metrics(), running, engine ? engine->name() : "", Clock::now()));
  });
  http.post("/v1/chat/completions", [this](const api::HttpRequest& req, api::HttpResponse& res) { generate(req, res, true); });
  http.post("/v1/completions", [this](const api::HttpRequest& req, api::HttpResponse& res) { generate(req, res, false); });

  http.post("/tokenize", [this](const api::HttpRequest& req, api::HttpResponse& res) {
    require_ready();
    api::TokenizeRequest request = api::parse_tokenize_request(api::parse_json_object(req.body, options.max_json_depth), context);
    json out = {{"tokens", request.ids}, {"count", request.ids.size()}, {"max_model_len", context.context_length}};
    if (request.return_token_strs) {
      json strs = json::array();
      for (int32_t id : request.ids) strs.push_back(engine->text().token_piece(id));
      out["token_strs"] = strs;
    }
    send_json(res, 200, out);
  });
  http.post("/detokenize", [this](const api::HttpRequest& req, api::HttpResponse& res) {
    require_ready();
    std::vector<int32_t> ids = api::parse_detokenize_request(api::parse_json_object(req.body, options.max_json_depth), context);
    std::string text = engine->text().detokenize(ids);
    send_json(res, 200, {{"prompt", text}, {"text", text}});
  });
}

json Server::Impl::model_entry() const {
  return {{"id", engine->name()}, {"object", "model"}, {"created", created}, {"owned_by", "inferlab"},
          {"root", engine->model_path().string()}, {"max_model_len", context.context_length}};
}

void Server::Impl::generate(const api::HttpRequest& req, api::HttpResponse& res, bool chat) {
  require_ready();
  json body = api::parse_json_object(req.body, options.max_json_depth);
  auto request = std::make_shared<const api::ParsedRequest>(chat ? api::parse_chat_request(body, context)
                                                                  : api::parse_completion_request(body, context));
  auto completion = std::make_shared<api::Completion>(request, engine->text(), options.request_timeout_s, options.timings);
  std::unique_ptr<api::ResponseWriter> writer = chat ? api::chat_completion_writer(engine->name(), system_fingerprint)
                                                     : api::text_completion_writer(engine->name(), system_fingerprint);
  std::optional<Clock::time_point> deadline;
  if (options.request_timeout_s > 0)
    deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.request_timeout_s * 1000));
  // n choices per prompt, each its own sequence (a failed submit cancels those already running:
  // the completion goes away).
  for (std::size_t p = 0; p < request->prompts.size(); ++p) {
    for (int j = 0; j < request->n; ++j) {
      ChoiceRequest choice;
      choice.generation.prompt = request->prompts[p];
      choice.generation.max_tokens = request->max_tokens[p];
      choice.generation.sampling = request->sampling;
      choice.generation.sampling.logprobs = request->logprobs;
      choice.generation.stop_token_ids = request->stop_token_ids;
      choice.generation.deadline = deadline;
      choice.generation.grammar = request->grammar;
      choice.generation.grammar_trigger = request->grammar_trigger;
      choice.ignore_eos = request->ignore_eos;
      choice.choice_index = static_cast<int>(completion->choices().size());
      completion->add_choice(static_cast<int>(p), engine->submit(std::move(choice)));
    }
  }
  if (request->stream) {
    api::stream_completion(res, completion, std::move(writer), active_streams,
                           std::chrono::milliseconds(static_cast<int64_t>(options.sse_ping_interval_s * 1000)));
    return;
  }
  // Answered once whole; the transport cancels it when the client hangs up before that.
  res.deferred = std::make_shared<api::CompletionAnswer>(completion, std::move(writer));
}

}  // namespace inferlab
