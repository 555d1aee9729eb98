// GET /health (liveness: 503 while loading, draining or with the engine stalled) and GET /ready
// (readiness for load balancers and Kubernetes: serving now).
#include <fmt/format.h>

#include "server/handlers/routes.h"

namespace inferlab::api {

void get_health(ServerState& state, const HttpRequest&, HttpResponse& res) {
  if (state.draining) send_json(res, 503, {{"status", "shutting down"}});
  else if (!state.ready) send_json(res, 503, {{"status", "loading"}});
  else if (state.engine_stalled())
    send_json(res, 503, {{"status", "engine stalled"},
                         {"message", fmt::format("the engine made no step for over {} s with requests waiting "
                                                 "(--engine-stall-timeout)", state.options.engine_stall_s)}});
  else send_json(res, 200, {{"status", "ok"}});
}

void get_ready(ServerState& state, const HttpRequest&, HttpResponse& res) {
  if (state.ready && !state.draining) send_json(res, 200, {{"status", "ready"}});
  else send_json(res, 503, {{"status", state.draining ? "shutting down" : "loading"}});
}

}  // namespace inferlab::api
