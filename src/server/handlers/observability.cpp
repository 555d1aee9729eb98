// What the server runs with and how it is doing: GET /server_info (the options in force), GET
// /metrics (Prometheus text), GET /dashboard (the page) and GET /dashboard/stats (its figures).
#include "server/dashboard.h"
#include "server/handlers/routes.h"
#include "server/server_info.h"

namespace inferlab::api {

void get_server_info(ServerState& state, const HttpRequest&, HttpResponse& res) {
  state.require_ready();
  send_json(res, 200, server_info(state.options, state.bound_port, state.engine->name(), state.engine->model_path().string(),
                                  state.context));
}

void get_metrics(ServerState& state, const HttpRequest&, HttpResponse& res) {
  res.set_content(prometheus_text(state.metrics()), "text/plain; version=0.0.4; charset=utf-8");
}

// The page is the same static bytes for everyone (no data: the API-key check lets it through,
// as a login page); every figure it shows comes from /dashboard/stats, which needs the key.
void get_dashboard(ServerState&, const HttpRequest&, HttpResponse& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                            "connect-src 'self'; img-src 'self'; frame-ancestors 'none'");
  res.set_content(dashboard_page(), "text/html; charset=utf-8");
}

void get_dashboard_stats(ServerState& state, const HttpRequest&, HttpResponse& res) {
  const std::vector<SequenceSnapshot> running =
      state.engine ? state.engine->running_sequences() : std::vector<SequenceSnapshot>{};
  res.set_header("Cache-Control", "no-store");
  send_json(res, 200, dashboard_stats(state.metrics(), running, state.engine ? state.engine->name() : "", Clock::now()));
}

}  // namespace inferlab::api
