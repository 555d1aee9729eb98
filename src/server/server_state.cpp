// The handlers' shared state (see server_state.h): the options the transport takes, readiness,
// the stall rule and the metrics reading.
#include "server/server_state.h"

namespace inferlab::api {

ServerState::ServerState(ServerOptions o)
    : options(std::move(o)), http(options.http), responses(std::make_shared<ResponseStore>(options.responses_store_size)) {}

void ServerState::require_ready() const {
  if (draining) throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_error");
  if (!ready) throw ApiError(503, "the model is still loading; retry when GET /health returns 200", "", "loading", "server_error");
}

bool ServerState::engine_stalled() const {
  return options.engine_stall_s > 0 && engine && !engine->idle() && engine->seconds_since_progress() > options.engine_stall_s;
}

MetricsSnapshot ServerState::metrics() const {
  MetricsSnapshot m;
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

}  // namespace inferlab::api
