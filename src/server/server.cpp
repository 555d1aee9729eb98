#include "inferlab/server/server.h"

#include <httplib.h>
#include <malloc.h>

#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <random>

#include "inferlab/tokenizer/chat_template.h"
#include "inferlab/util/model_path.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "inferlab/util/process_memory.h"
#include "auth.h"
#include "openai_api.h"

namespace inferlab {

using api::ApiError;
using api::json;
namespace fs = std::filesystem;

namespace {

constexpr auto kKeepAliveAfter = std::chrono::seconds(2);  // SSE comment so a dead client is noticed

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(api::dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) {
  if (error.status == 503) res.set_header("Retry-After", "1");
  send_json(res, error.status, error.body());
}

std::string sse(const json& value) { return "data: " + api::dump(value) + "\n\n"; }

// Set while a worker of the overflow pool runs a connection that was not admitted.
thread_local bool refusing_connection = false;

// httplib's task queue with admission: at most `limit` connections are admitted (served by one of
// the workers or waiting for one). httplib 0.11's enqueue cannot refuse and hands over only a
// closure that owns the socket, so a connection beyond the limit goes to a small overflow pool
// that answers its request with 503 and closes it (see Impl::refuse_if_overflow).
class AdmissionQueue : public httplib::TaskQueue {
 public:
  AdmissionQueue(int workers, int limit, int overflow_workers, std::atomic<int>& admitted, std::atomic<uint64_t>& refused)
      : workers_(workers), overflow_(overflow_workers), limit_(limit), admitted_(admitted), refused_(refused) {}

  void enqueue(std::function<void()> connection) override {
    if (admitted_.fetch_add(1) < limit_) {
      workers_.enqueue([this, connection = std::move(connection)] {
        connection();
        --admitted_;
      });
      return;
    }
    --admitted_;
    ++refused_;
    overflow_.enqueue([connection = std::move(connection)] {
      refusing_connection = true;
      connection();
      refusing_connection = false;
    });
  }
  void shutdown() override {
    workers_.shutdown();
    overflow_.shutdown();
  }

 private:
  httplib::ThreadPool workers_, overflow_;
  int limit_;
  std::atomic<int>& admitted_;
  std::atomic<uint64_t>& refused_;
};

// One choice of a response: its request stream plus the text-side state (detokenizer, stop strings).
struct Choice {
  int index = 0;
  int prompt_index = 0;
  std::shared_ptr<RequestStream> stream;
  StreamDecoder decoder;
  api::StopMatcher stop;
  int completion_tokens = 0;
  bool done = false;
  std::string finish_reason;  // "stop" / "length" once done without error
  std::string error;          // set when it ended with an error or timeout
  bool timed_out = false;
  std::size_t text_length = 0;  // bytes shown so far (completions text_offset)
  std::string text;             // everything shown (non-streaming answer)
  json chat_logprobs = json::array();
  json completion_logprobs = {{"tokens", json::array()}, {"token_logprobs", json::array()},
                              {"top_logprobs", json::array()}, {"text_offset", json::array()}};

  Choice(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special, std::vector<std::string> stops)
      : decoder(std::move(tokenizer), skip_special), stop(std::move(stops)) {}
};

// What one poll of a choice produced: new visible text and the logprobs of its new tokens.
struct Delta {
  std::string text;
  json chat_logprobs = json::array();
  json completion_logprobs;
  bool finished = false;
};

}  // namespace

struct Server::Impl {
  ServerOptions options;
  httplib::Server http;
  std::thread listener;
  std::atomic<bool> listener_done{false};
  int bound_port = 0;
  std::atomic<bool> ready{false}, draining{false};
  std::string load_error;

  std::unique_ptr<Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;
  std::string chat_template_error;
  std::unique_ptr<Scheduler> scheduler;
  api::ModelContext context;
  std::string name;
  std::vector<int32_t> eos_ids;
  std::time_t created = std::time(nullptr);

  std::atomic<int> active_streams{0};
  std::atomic<int> admitted_connections{0};
  std::atomic<uint64_t> refused_connections{0};
  std::atomic<uint64_t> memory_trims{0};

  // Returns freed heap memory to the OS once the server goes idle (see housekeeping()).
  std::thread housekeeper;
  std::mutex housekeeper_mutex;
  std::condition_variable housekeeper_wake;
  bool housekeeper_stop = false;
  std::mutex http_counts_mutex;
  std::map<std::pair<std::string, int>, uint64_t> http_counts;  // (path, status) -> count

  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  void routes();
  void housekeeping();
  // On an overflow connection: answers 503 (OpenAI shape, Retry-After) and returns true.
  bool refuse_if_overflow(httplib::Response& res);
  void generate(const httplib::Request& req, httplib::Response& res, bool chat);
  std::string metrics_text() const;
  void require_ready() const {
    if (draining) throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_error");
    if (!ready) throw ApiError(503, "the model is still loading; retry when GET /health returns 200", "", "loading", "server_error");
  }

  // Applies one stream event to a choice.
  void absorb(Choice& choice, StreamEvent& event, const api::ParsedRequest& request, Delta& delta) {
    if (choice.done) return;
    if (event.token) {
      const SampledToken& t = *event.token;
      ++choice.completion_tokens;
      std::string shown = choice.stop.feed(choice.decoder.push(t.token));
      if (request.logprobs) add_logprobs(choice, t, request, delta);
      delta.text += shown;
      if (choice.stop.hit()) {
        choice.stream->cancel();  // we have what we need: free the sequence now
        choice.done = true;
        choice.finish_reason = "stop";
      }
    }
    if (event.finish && !choice.done) {
      switch (*event.finish) {
        case FinishReason::stop:
        case FinishReason::length: {
          std::string tail = choice.stop.feed(choice.decoder.flush());
          tail += choice.stop.finish();
          delta.text += tail;
          choice.finish_reason = choice.stop.hit() || *event.finish == FinishReason::stop ? "stop" : "length";
          break;
        }
        case FinishReason::timeout:
          choice.timed_out = true;
          choice.error = fmt::format("the request timed out after {} s (inferlab serve --timeout)", options.request_timeout_s);
          break;
        case FinishReason::cancelled:
          choice.error = "the request was cancelled";
          break;
        case FinishReason::error:
          choice.error = event.error.empty() ? "generation failed" : event.error;
          break;
      }
      choice.done = true;
    }
    choice.text += delta.text;
    delta.finished = choice.done;
  }

  void add_logprobs(Choice& choice, const SampledToken& t, const api::ParsedRequest& request, Delta& delta) {
    std::string piece = api::token_text(*tokenizer, t.token);
    if (request.chat) {
      json top = json::array();
      for (const auto& alt : t.top) {
        std::string alt_text = api::token_text(*tokenizer, alt.token);
        top.push_back({{"token", alt_text}, {"logprob", alt.logprob}, {"bytes", api::token_bytes(*tokenizer, alt.token)}});
      }
      json entry = {{"token", piece}, {"logprob", t.logprob}, {"bytes", api::token_bytes(*tokenizer, t.token)}, {"top_logprobs", top}};
      choice.chat_logprobs.push_back(entry);
      delta.chat_logprobs.push_back(entry);
    } else {
      if (delta.completion_logprobs.is_null())
        delta.completion_logprobs = {{"tokens", json::array()}, {"token_logprobs", json::array()},
                                     {"top_logprobs", json::array()}, {"text_offset", json::array()}};
      json top = json::object();
      for (const auto& alt : t.top) top[api::token_text(*tokenizer, alt.token)] = alt.logprob;
      for (json* target : {&choice.completion_logprobs, &delta.completion_logprobs}) {
        (*target)["tokens"].push_back(piece);
        (*target)["token_logprobs"].push_back(t.logprob);
        (*target)["top_logprobs"].push_back(top);
        (*target)["text_offset"].push_back(choice.text_length);
      }
      choice.text_length += piece.size();
    }
  }
};

Server::Server(ServerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {}

Server::~Server() {
  if (impl_->listener.joinable()) shutdown(std::chrono::milliseconds(0));
}

int Server::port() const { return impl_->bound_port; }
const std::string& Server::model_name() const { return impl_->name; }

int Server::start() {
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not end the process
  Impl& s = *impl_;
  const int threads = std::max(1, s.options.http_threads);
  const int limit = s.options.max_connections > 0 ? s.options.max_connections : threads;
  s.http.new_task_queue = [&s, threads, limit] {
    return new AdmissionQueue(threads, limit, 4, s.admitted_connections, s.refused_connections);
  };
  // Accepted sockets inherit the listening socket's SO_SNDBUF (Linux): with a fixed size, a client
  // that stops reading blocks the writes (and is dropped after --slow-client-timeout) once that
  // much is unsent, instead of once the kernel's autotuned buffer is full.
  if (const int bytes = s.options.send_buffer_bytes; bytes > 0)
    s.http.set_socket_options([bytes](socket_t sock) {
      httplib::default_socket_options(sock);
      setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    });
  s.http.set_payload_max_length(s.options.max_body_bytes);
  s.http.set_keep_alive_max_count(10000);
  s.http.set_keep_alive_timeout(5);
  s.http.set_read_timeout(30);
  s.http.set_write_timeout(std::chrono::milliseconds(static_cast<int64_t>(s.options.slow_client_timeout_s * 1000)));
  s.routes();
  if (s.options.port == 0) {
    s.bound_port = s.http.bind_to_any_port(s.options.host);
    if (s.bound_port <= 0) fail("cannot listen on {} (any port)", s.options.host);
  } else {
    if (!s.http.bind_to_port(s.options.host, s.options.port))
      fail("cannot listen on {}:{} (in use, or not an address of this machine); pick another with --port",
           s.options.host, s.options.port);
    s.bound_port = s.options.port;
  }
  // The listener owns a reference: shutdown may stop waiting for it (idle keep-alive
  // connections hold workers until their timeout) and let the process exit.
  std::shared_ptr<Impl> keep = impl_;
  s.listener = std::thread([keep] {
    keep->http.listen_after_bind();
    keep->listener_done = true;
  });
  return s.bound_port;
}

void Server::load(const std::string& model_name) {
  Impl& s = *impl_;
  LoadOptions load_options;
  load_options.threads = s.options.threads;
  load_options.weights = s.options.weights;
  // The tokenizer before the weights: a bad tokenizer fails before the long load, and the memory
  // its JSON parse used for a moment (~60 MiB for Qwen's) goes back to the system before the
  // weights are allocated, so it never adds to the serving peak.
  const fs::path path = resolve_model_path(model_name);
  if (fs::is_directory(path)) s.tokenizer = Tokenizer::from_folder(path);
  else if (path.extension() == ".gguf") s.tokenizer = Tokenizer::from_gguf(path);
  else s.tokenizer = Tokenizer::from_folder(path.parent_path());
  malloc_trim(0);
  s.model = Model::load(model_name, load_options);
  if (!s.tokenizer->chat_template().empty()) {
    try {
      s.chat_template.emplace(s.tokenizer->chat_template());
    } catch (const std::exception& e) {
      s.chat_template_error = e.what();
      std::fprintf(stderr, "inferlab serve: warning: chat template not usable (%s); /v1/chat/completions will refuse\n", e.what());
    }
  }
  const ModelConfig& config = s.model->config();
  s.eos_ids = config.eos_token_ids;
  if (auto eos = s.tokenizer->piece_to_id(s.tokenizer->eos_token()); eos && !s.tokenizer->eos_token().empty())
    if (std::find(s.eos_ids.begin(), s.eos_ids.end(), *eos) == s.eos_ids.end()) s.eos_ids.push_back(*eos);

  // Served name: --served-model-name, else the folder's name (or the repo id as given).
  fs::path given(model_name);
  std::string folder = fs::is_directory(given) || fs::is_regular_file(given)
                           ? fs::weakly_canonical(given).filename().string()
                           : model_name;
  s.name = s.options.served_model_name.empty() ? folder : s.options.served_model_name;
  s.context.accepted_names = {s.name, model_name, path.string(), fs::weakly_canonical(path).string(), folder};

  s.scheduler = std::make_unique<Scheduler>(*s.model, s.options.scheduler);
  s.context.tokenizer = s.tokenizer;
  s.context.chat_template = s.chat_template ? &*s.chat_template : nullptr;
  s.context.context_length = config.max_position_embeddings;
  s.context.vocab_size = config.vocab_size;
  s.context.kv_capacity_tokens = s.scheduler->capacity_tokens();
  s.context.max_n = s.options.max_n;
  s.ready = true;
  s.housekeeper = std::thread([&s] { s.housekeeping(); });
}

void Server::Impl::housekeeping() {
  // glibc keeps memory freed by the HTTP threads in their arenas; after load that is tens of MB
  // above a cold start. Trim once per busy -> idle transition, checked a few times a second.
  bool busy_since_trim = false;
  std::unique_lock lock(housekeeper_mutex);
  while (!housekeeper_wake.wait_for(lock, std::chrono::milliseconds(200), [this] { return housekeeper_stop; })) {
    const bool idle = scheduler->idle() && active_streams == 0;
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
  if (s.scheduler) {
    auto deadline = Clock::now() + drain;
    while (!s.scheduler->idle() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s.scheduler->shutdown("the server is shutting down");
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
  if (s.listener.joinable()) {
    deadline = Clock::now() + std::chrono::seconds(1);
    while (!s.listener_done && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (s.listener_done) s.listener.join();
    else s.listener.detach();  // idle keep-alive connections close on their own timeout
  }
}

bool Server::Impl::refuse_if_overflow(httplib::Response& res) {
  if (!refusing_connection) return false;
  if (res.content_length_ > 0) return true;  // already refused (the error handler sees the 503 too)
  const int limit = options.max_connections > 0 ? options.max_connections : std::max(1, options.http_threads);
  std::string body = api::dump(ApiError(503, fmt::format("the server is at its limit of {} connections (--max-connections); "
                                                          "retry after a second", limit),
                                        "", "overloaded", "server_error").body());
  res.status = 503;
  res.set_header("Retry-After", "1");
  res.set_header("Connection", "close");
  // Failing the provider once the whole body is written makes httplib close the connection
  // rather than keep it alive on the overflow pool.
  res.set_content_provider(body.size(), "application/json",
                           [body](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
                             sink.write(body.data() + offset, length);
                             return false;
                           });
  return true;
}

void Server::Impl::routes() {
  // API key: checked before routing, so no handler (and no body parsing) runs for a stranger.
  // A connection beyond --max-connections goes on to its handler, which reads the body and refuses.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (refusing_connection) return httplib::Server::HandlerResponse::Unhandled;
    if (options.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (api::bearer_matches(req.get_header_value("Authorization"), options.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, ApiError(401, req.has_header("Authorization")
                                      ? "incorrect API key provided (the key given to inferlab serve --api-key is needed)"
                                      : "missing API key: send the header 'Authorization: Bearer <key>'",
                             "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    {
      std::lock_guard lock(http_counts_mutex);
      std::string path = req.path;
      static const char* known[] = {"/v1/models", "/v1/chat/completions", "/v1/completions", "/health",
                                    "/metrics", "/tokenize", "/detokenize"};
      if (std::find(std::begin(known), std::end(known), path) == std::end(known)) path = "other";
      ++http_counts[{path, res.status}];
    }
    if (options.log_requests) std::fprintf(stderr, "%s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (refuse_if_overflow(res) || !res.body.empty()) return;
    std::string message = res.status == 404 ? fmt::format("no route for {} {}", req.method, req.path)
                          : res.status == 413 ? fmt::format("the request body is larger than the server's limit (--max-body-bytes)")
                                              : fmt::format("HTTP {} for {} {}", res.status, req.method, req.path);
    send_json(res, res.status, ApiError(res.status, message).body());
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    send_json(res, 500, ApiError(500, message, "", "", "server_error").body());
  });

  // Every route refuses on an overflow connection first.
  auto admitted = [this](auto handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      if (!refuse_if_overflow(res)) handler(req, res);
    };
  };
  auto guarded = [admitted](auto body) {
    return admitted([body](const httplib::Request& req, httplib::Response& res) {
      try {
        body(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const OverloadedError& e) {
        send_error(res, ApiError(503, e.what(), "", "overloaded", "server_error"));
      } catch (const Error& e) {
        send_error(res, ApiError(400, e.what()));
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, e.what(), "", "", "server_error"));
      }
    });
  };

  http.Get("/health", admitted([this](const httplib::Request&, httplib::Response& res) {
    if (draining) send_json(res, 503, {{"status", "shutting down"}});
    else if (!ready) send_json(res, 503, {{"status", "loading"}});
    else send_json(res, 200, {{"status", "ok"}});
  }));
  http.Get("/v1/models", guarded([this](const httplib::Request&, httplib::Response& res) {
    require_ready();
    json model_entry = {{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "inferlab"},
                        {"root", model->path().string()}, {"max_model_len", context.context_length}};
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_entry})}});
  }));
  http.Get("/metrics", admitted([this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
  }));
  http.Post("/v1/chat/completions", guarded([this](const httplib::Request& req, httplib::Response& res) { generate(req, res, true); }));
  http.Post("/v1/completions", guarded([this](const httplib::Request& req, httplib::Response& res) { generate(req, res, false); }));

  http.Post("/tokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
    require_ready();
    json body = api::parse_json_object(req.body);
    api::check_model(body, context);
    std::vector<int32_t> ids;
    if (body.contains("messages")) {
      json chat = body;
      api::ParsedRequest parsed = api::parse_chat_request(chat, context);
      ids = parsed.prompts.front();
    } else if (body.contains("prompt")) {
      if (!body["prompt"].is_string()) throw ApiError(400, "'prompt' must be a string", "prompt");
      bool add_special = true;
      if (body.contains("add_special_tokens")) {
        if (!body["add_special_tokens"].is_boolean()) throw ApiError(400, "'add_special_tokens' must be a boolean", "add_special_tokens");
        add_special = body["add_special_tokens"].get<bool>();
      }
      ids = tokenizer->encode(body["prompt"].get<std::string>(), add_special);
    } else {
      throw ApiError(400, "give 'prompt' (a string) or 'messages'", "prompt");
    }
    json out = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", context.context_length}};
    if (body.value("return_token_strs", false)) {
      json strs = json::array();
      for (int32_t id : ids) strs.push_back(tokenizer->id_to_piece(id));
      out["token_strs"] = strs;
    }
    send_json(res, 200, out);
  }));
  http.Post("/detokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
    require_ready();
    json body = api::parse_json_object(req.body);
    api::check_model(body, context);
    if (!body.contains("tokens") || !body["tokens"].is_array()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
    std::vector<int32_t> ids;
    for (const json& v : body["tokens"]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= context.vocab_size)
        throw ApiError(400, fmt::format("'tokens' must hold token ids 0..{}, found {}", context.vocab_size - 1, v.dump()), "tokens");
      ids.push_back(v.get<int32_t>());
    }
    std::string text = tokenizer->decode(ids, false);
    send_json(res, 200, {{"prompt", text}, {"text", text}});
  }));
}

void Server::Impl::generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  require_ready();
  json body = api::parse_json_object(req.body);
  if (chat && body.contains("messages") && body["messages"].is_array() &&
      body["messages"].size() > static_cast<std::size_t>(options.max_messages))
    throw ApiError(400, fmt::format("{} messages; this server accepts at most {} (--max-messages)", body["messages"].size(),
                                    options.max_messages), "messages");
  for (const char* name : {"max_tokens", "max_completion_tokens"})
    if (options.max_tokens_limit > 0 && body.contains(name) && body[name].is_number() &&
        body[name].get<double>() > options.max_tokens_limit)
      throw ApiError(400, fmt::format("'{}' is {}; this server allows at most {} (--max-tokens-limit)", name, body[name].dump(),
                                      options.max_tokens_limit), name);
  auto request = std::make_shared<api::ParsedRequest>(chat ? api::parse_chat_request(body, context)
                                                            : api::parse_completion_request(body, context));
  for (std::size_t p = 0; p < request->prompts.size(); ++p) {
    if (options.max_prompt_tokens > 0 && request->prompts[p].size() > static_cast<std::size_t>(options.max_prompt_tokens))
      throw ApiError(400, fmt::format("the prompt is {} tokens; this server accepts at most {} (--max-prompt-tokens)",
                                      request->prompts[p].size(), options.max_prompt_tokens),
                     chat ? "messages" : "prompt", "context_length_exceeded");
    if (options.max_tokens_limit > 0) request->max_tokens[p] = std::min(request->max_tokens[p], options.max_tokens_limit);
  }
  if (chat && !chat_template) throw ApiError(400, "this model's chat template cannot be used: " + chat_template_error, "messages");

  auto choices = std::make_shared<std::vector<std::unique_ptr<Choice>>>();
  int prompt_tokens = 0;
  std::optional<Clock::time_point> deadline;
  if (options.request_timeout_s > 0)
    deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.request_timeout_s * 1000));
  try {
    for (std::size_t p = 0; p < request->prompts.size(); ++p) {
      prompt_tokens += static_cast<int>(request->prompts[p].size());
      for (int j = 0; j < request->n; ++j) {
        GenerationRequest generation;
        generation.prompt = request->prompts[p];
        generation.max_tokens = request->max_tokens[p];
        generation.sampling = request->sampling;
        generation.sampling.logprobs = request->logprobs;
        if (tokenizer->vocab_size() < context.vocab_size) generation.sampling.vocab_limit = tokenizer->vocab_size();
        if (generation.sampling.seed) *generation.sampling.seed += p * request->n + j;  // n choices differ, reproducibly
        generation.stop_token_ids = request->stop_token_ids;
        if (!request->ignore_eos) generation.stop_token_ids.insert(generation.stop_token_ids.end(), eos_ids.begin(), eos_ids.end());
        generation.deadline = deadline;
        auto choice = std::make_unique<Choice>(tokenizer, request->skip_special_tokens, request->stop);
        choice->index = static_cast<int>(choices->size());
        choice->prompt_index = static_cast<int>(p);
        choice->stream = scheduler->submit(std::move(generation));
        choices->push_back(std::move(choice));
      }
    }
  } catch (...) {
    for (auto& choice : *choices) choice->stream->cancel();
    throw;
  }

  const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
  const std::time_t created_at = std::time(nullptr);
  const int n = request->n;
  auto usage_of = [choices, prompt_tokens, n]() {
    int completion = 0, cached = 0;
    for (auto& c : *choices) completion += c->completion_tokens;
    for (auto& c : *choices)
      if (c->index % n == 0) cached += c->stream->cached_prompt_tokens();  // prompts count once, not per choice
    return json{{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion},
                {"total_tokens", prompt_tokens + completion}, {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  };
  auto error_of = [](const Choice& c) {
    return c.timed_out ? ApiError(504, c.error, "", "timeout", "timeout_error") : ApiError(500, c.error, "", "", "server_error");
  };

  if (!request->stream) {
    // Wait for every choice; poll all so n > 1 progress together.
    struct CancelOnExit {
      std::shared_ptr<std::vector<std::unique_ptr<Choice>>> choices;
      ~CancelOnExit() {
        for (auto& c : *choices) c->stream->cancel();  // no-op for finished ones; frees the rest on an error
      }
    } cancel_on_exit{choices};
    for (;;) {
      bool all_done = true;
      for (auto& choice : *choices) {
        if (choice->done) continue;
        all_done = false;
        for (auto& event : choice->stream->wait(std::chrono::milliseconds(choices->size() == 1 ? 200 : 5))) {
          Delta delta;
          absorb(*choice, event, *request, delta);
        }
      }
      if (all_done) break;
    }
    for (auto& choice : *choices)
      if (!choice->error.empty()) throw error_of(*choice);
    json out_choices = json::array();
    for (auto& choice : *choices) {
      json c = {{"index", choice->index}, {"finish_reason", choice->finish_reason}};
      if (chat) {
        c["message"] = {{"role", "assistant"}, {"content", choice->text}};
        c["logprobs"] = request->logprobs ? json{{"content", choice->chat_logprobs}} : json(nullptr);
      } else {
        c["text"] = request->echo ? request->prompt_texts[choice->prompt_index] + choice->text : choice->text;
        c["logprobs"] = request->logprobs ? choice->completion_logprobs : json(nullptr);
      }
      out_choices.push_back(std::move(c));
    }
    send_json(res, 200, {{"id", id}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created_at},
                         {"model", name}, {"choices", out_choices}, {"usage", usage_of()}});
    return;
  }

  // Streaming: one worker thread writes chunks as tokens arrive.
  struct StreamState {
    bool started = false, finished = false;
    Clock::time_point last_write = Clock::now();
  };
  auto state = std::make_shared<StreamState>();
  ++active_streams;
  auto chunk = [this, id, created_at, chat, request](json choice_list) {
    json c = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created_at},
              {"model", name}, {"choices", std::move(choice_list)}};
    if (request->include_usage) c["usage"] = nullptr;
    return sse(c);
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto pump = [this, choices, request, state, chunk, usage_of, error_of, chat](httplib::DataSink& sink) -> bool {
        auto write = [&](const std::string& data) {
          state->last_write = Clock::now();
          return sink.write(data.data(), data.size());
        };
        auto cancel_all = [&] {
          for (auto& c : *choices) c->stream->cancel();
        };
        if (!state->started) {
          state->started = true;
          for (auto& c : *choices) {
            json first;
            if (chat)
              first = {{"index", c->index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                       {"finish_reason", nullptr}};
            else if (request->echo)  // completions echo: the prompt comes first
              first = {{"index", c->index}, {"text", request->prompt_texts[c->prompt_index]}, {"logprobs", nullptr},
                       {"finish_reason", nullptr}};
            else
              continue;
            if (!write(chunk(json::array({first})))) return cancel_all(), false;
          }
          return true;
        }
        bool all_done = true;
        for (auto& c : *choices) all_done = all_done && c->done;
        if (all_done) {
          if (request->include_usage) {
            json usage_chunk = json::parse(chunk(json::array()).substr(6));
            usage_chunk["usage"] = usage_of();
            if (!write(sse(usage_chunk))) return false;
          }
          if (!write("data: [DONE]\n\n")) return false;
          state->finished = true;
          sink.done();
          return true;
        }
        bool first_wait = true;
        for (auto& c : *choices) {
          if (c->done) continue;
          auto events = c->stream->wait(std::chrono::milliseconds(first_wait ? 100 : 0));
          first_wait = false;
          if (events.empty()) continue;
          Delta delta;
          for (auto& event : events) absorb(*c, event, *request, delta);
          if (!c->error.empty()) {
            cancel_all();
            write(sse(error_of(*c).body()));
            write("data: [DONE]\n\n");
            state->finished = true;
            sink.done();
            return true;
          }
          const bool has_logprobs = chat ? !delta.chat_logprobs.empty() : !delta.completion_logprobs.is_null();
          if (!delta.text.empty() || has_logprobs) {
            json item;
            if (chat) {
              item = {{"index", c->index}, {"delta", {{"content", delta.text}}},
                      {"logprobs", has_logprobs ? json{{"content", delta.chat_logprobs}} : json(nullptr)},
                      {"finish_reason", nullptr}};
            } else {
              std::string text = delta.text;
              item = {{"index", c->index}, {"text", text},
                      {"logprobs", has_logprobs ? delta.completion_logprobs : json(nullptr)}, {"finish_reason", nullptr}};
            }
            if (!write(chunk(json::array({item})))) return cancel_all(), false;
          }
          if (delta.finished) {
            json item = chat ? json{{"index", c->index}, {"delta", json::object()}, {"logprobs", nullptr},
                                    {"finish_reason", c->finish_reason}}
                             : json{{"index", c->index}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", c->finish_reason}};
            if (!write(chunk(json::array({item})))) return cancel_all(), false;
          }
        }
        if (Clock::now() - state->last_write > kKeepAliveAfter && !write(": keep-alive\n\n")) return cancel_all(), false;
        return true;
  };
  res.set_chunked_content_provider(
      "text/event-stream",
      [pump, choices](std::size_t, httplib::DataSink& sink) -> bool {
        try {
          return pump(sink);
        } catch (const std::exception& e) {
          // Past the headers an error can only travel as an event.
          for (auto& c : *choices) c->stream->cancel();
          std::string event = sse(ApiError(500, e.what(), "", "", "server_error").body()) + "data: [DONE]\n\n";
          sink.write(event.data(), event.size());
          sink.done();
          return true;
        }
      },
      [this, choices](bool) {
        for (auto& c : *choices) c->stream->cancel();  // a client that went away frees its KV at once
        --active_streams;
      });
}

std::string Server::Impl::metrics_text() const {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  auto histogram = [&](const char* name, const char* help, const Histogram& h) {
    metric(name, "histogram", help);
    uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, h.bounds[i], cumulative);
    }
    cumulative += h.counts.back();
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cumulative, name, h.sum, name, h.count);
  };
  metric("process_resident_memory_bytes", "gauge", "resident set size of the server process in bytes");
  if (auto rss = resident_bytes()) out += fmt::format("process_resident_memory_bytes {}\n", *rss);
  metric("inferlab_http_connections", "gauge", "connections admitted (served or waiting for an HTTP worker)");
  out += fmt::format("inferlab_http_connections {}\n", admitted_connections.load());
  metric("inferlab_http_connections_refused_total", "counter", "connections beyond --max-connections, answered 503");
  out += fmt::format("inferlab_http_connections_refused_total {}\n", refused_connections.load());
  metric("inferlab_memory_trims_total", "counter", "times freed heap memory was returned to the OS on going idle");
  out += fmt::format("inferlab_memory_trims_total {}\n", memory_trims.load());
  metric("inferlab_model_ready", "gauge", "1 once the model is loaded and requests are served");
  out += fmt::format("inferlab_model_ready {}\n", ready && !draining ? 1 : 0);
  {
    std::lock_guard lock(const_cast<std::mutex&>(http_counts_mutex));
    metric("inferlab_http_requests_total", "counter", "HTTP requests answered, by path and status");
    for (const auto& [key, count] : http_counts)
      out += fmt::format("inferlab_http_requests_total{{path=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, count);
  }
  if (!scheduler) return out;
  SchedulerStats s = scheduler->stats();
  metric("inferlab_requests_submitted_total", "counter", "generation requests (choices) accepted by the scheduler");
  out += fmt::format("inferlab_requests_submitted_total {}\n", s.requests_submitted);
  metric("inferlab_requests_rejected_total", "counter", "generation requests refused (never fits, queue full, shutting down)");
  out += fmt::format("inferlab_requests_rejected_total {}\n", s.requests_rejected);
  metric("inferlab_requests_finished_total", "counter", "generation requests finished, by reason");
  for (FinishReason r : {FinishReason::stop, FinishReason::length, FinishReason::cancelled, FinishReason::timeout, FinishReason::error})
    out += fmt::format("inferlab_requests_finished_total{{reason=\"{}\"}} {}\n", to_string(r), s.requests_finished[static_cast<int>(r)]);
  metric("inferlab_queue_length", "gauge", "requests waiting for a batch slot or KV blocks");
  out += fmt::format("inferlab_queue_length {}\n", s.waiting);
  metric("inferlab_running_requests", "gauge", "sequences in the running batch");
  out += fmt::format("inferlab_running_requests {}\n", s.running);
  metric("inferlab_active_streams", "gauge", "streaming HTTP responses open");
  out += fmt::format("inferlab_active_streams {}\n", active_streams.load());
  metric("inferlab_prompt_tokens_total", "counter", "prompt tokens submitted");
  out += fmt::format("inferlab_prompt_tokens_total {}\n", s.prompt_tokens);
  metric("inferlab_prefill_tokens_total", "counter", "prompt tokens computed (the rest came from the prefix cache)");
  out += fmt::format("inferlab_prefill_tokens_total {}\n", s.prefill_tokens);
  metric("inferlab_prefix_cache_hit_tokens_total", "counter", "prompt tokens reused from cached KV blocks");
  out += fmt::format("inferlab_prefix_cache_hit_tokens_total {}\n", s.prefix_cache_hit_tokens);
  metric("inferlab_generation_tokens_total", "counter", "tokens generated");
  out += fmt::format("inferlab_generation_tokens_total {}\n", s.generation_tokens);
  metric("inferlab_engine_steps_total", "counter", "engine steps (one batched forward each)");
  out += fmt::format("inferlab_engine_steps_total {}\n", s.steps);
  metric("inferlab_decode_steps_total", "counter", "steps that decoded at least one sequence");
  out += fmt::format("inferlab_decode_steps_total {}\n", s.decode_steps);
  metric("inferlab_batched_decode_steps_total", "counter", "steps that decoded more than one sequence together");
  out += fmt::format("inferlab_batched_decode_steps_total {}\n", s.batched_decode_steps);
  metric("inferlab_preemptions_total", "counter", "sequences preempted (KV recomputed later) when blocks ran out");
  out += fmt::format("inferlab_preemptions_total {}\n", s.preemptions);
  metric("inferlab_kv_cache_blocks_total", "gauge", "KV cache blocks in the pool");
  out += fmt::format("inferlab_kv_cache_blocks_total {}\n", s.kv_blocks_total);
  metric("inferlab_kv_cache_blocks_used", "gauge", "KV cache blocks held by queued or running sequences");
  out += fmt::format("inferlab_kv_cache_blocks_used {}\n", s.kv_blocks_in_use);
  metric("inferlab_kv_cache_blocks_cached", "gauge", "KV cache blocks held only by the prefix cache (evictable)");
  out += fmt::format("inferlab_kv_cache_blocks_cached {}\n", s.kv_blocks_cached);
  metric("inferlab_kv_cache_usage_ratio", "gauge", "fraction of KV blocks held by sequences");
  out += fmt::format("inferlab_kv_cache_usage_ratio {}\n", s.kv_blocks_total ? double(s.kv_blocks_in_use) / s.kv_blocks_total : 0.0);
  metric("inferlab_kv_cache_block_size", "gauge", "token positions per KV block");
  out += fmt::format("inferlab_kv_cache_block_size {}\n", s.block_size);
  histogram("inferlab_decode_batch_size", "sequences decoded per decode step", s.decode_batch_size);
  histogram("inferlab_time_to_first_token_seconds", "arrival to first generated token", s.time_to_first_token);
  histogram("inferlab_inter_token_latency_seconds", "time between consecutive tokens of a sequence", s.inter_token_latency);
  histogram("inferlab_e2e_request_latency_seconds", "arrival to last token", s.e2e_latency);
  return out;
}

}  // namespace inferlab
