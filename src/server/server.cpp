// The server (include/inferlab/server/server.h): the route table (handlers/routes.cpp) bound to
// the HTTP transport, and the lifecycle: start (listen), load (engine ready), the idle-memory
// housekeeper and the graceful shutdown.
#include "inferlab/server/server.h"
#include "inferlab/util/error.h"
#include "inferlab/util/thread_name.h"

#include <fmt/format.h>
#include <malloc.h>
#include <sys/resource.h>

#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <algorithm>
#include <mutex>
#include <string_view>
#include <thread>

#include "inferlab/generation/engine.h"
#include "server/handlers/routes.h"
#include "server/server_state.h"

namespace inferlab {

// The handlers' shared state, plus the lifecycle only the server runs: the idle-memory housekeeper.
struct Server::Impl : api::ServerState {
  // Returns freed heap memory to the OS once the server goes idle (see housekeeping()).
  std::thread housekeeper;
  std::mutex housekeeper_mutex;
  std::condition_variable housekeeper_wake;
  bool housekeeper_stop = false;

  explicit Impl(ServerOptions o) : api::ServerState(std::move(o)) { add_routes(); }

  void add_routes();
  void housekeeping();
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

  s.context = api::model_context_of(*s.engine, s.options);
  s.system_fingerprint = fingerprint_of(*s.engine, s.options);
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

void Server::Impl::add_routes() {
  for (const api::Route& route : api::server_routes()) {
    api::HttpServer::Handler handler = [this, run = route.handler](const api::HttpRequest& req, api::HttpResponse& res) {
      run(*this, req, res);
    };
    const std::string_view method = route.method;
    if (method == "GET") http.get(route.path, std::move(handler), route.error_shape);
    else if (method == "POST") http.post(route.path, std::move(handler), route.error_shape);
    else if (method == "DELETE") http.del(route.path, std::move(handler), route.error_shape);
    else fail("the route {} {} has a method the transport does not serve", route.method, route.path);
  }
}

}  // namespace inferlab
