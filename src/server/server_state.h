// What the route handlers share: the options, the transport (its counts go into /metrics), the
// engine and what loading learnt of its model, the lifecycle flags and the server's counters.
// The Server (server.cpp) owns it, loads it and drains it; a handler reads it and submits work to
// the engine, never touching the model or tokenizer.
#pragma once
#include <atomic>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>

#include "inferlab/generation/engine.h"
#include "inferlab/server/server.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/prometheus.h"
#include "server/response_store.h"

namespace inferlab::api {


// What request parsing knows of the engine's model under these options (the served names, the
// context, the reasoning markers, the limits): the server's, and an in-process caller's (in_process.h).
ModelContext model_context_of(const Engine& engine, const ServerOptions& options);

struct ServerState {
  explicit ServerState(ServerOptions options);

  ServerOptions options;
  HttpServer http;
  int bound_port = 0;
  std::atomic<bool> ready{false}, draining{false};

  std::unique_ptr<Engine> engine;
  ModelContext context;            // what request parsing knows of the model, set at load
  std::string system_fingerprint;  // set at load: the served configuration
  std::time_t created = std::time(nullptr);
  std::shared_ptr<ResponseStore> responses;  // /v1/responses' finished ones (--responses-store-size)

  std::atomic<int> active_streams{0};
  std::atomic<uint64_t> memory_trims{0};

  // 503 in OpenAI's shape while the model loads or the server drains.
  void require_ready() const;
  // /health says 503 while work waits and the engine loop made no progress for
  // --engine-stall-timeout (a hung engine must not look healthy). The engine clocks its own
  // progress, so a step that ends is seen at once, not on a later tick.
  bool engine_stalled() const;
  MetricsSnapshot metrics() const;  // one reading of what /metrics and the dashboard report
};

}  // namespace inferlab::api
