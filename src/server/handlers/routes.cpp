// The route table: one line per route. The transport counts requests under these paths (/metrics).
#include "server/handlers/routes.h"

namespace inferlab::api {

std::span<const Route> server_routes() {
  static constexpr Route kRoutes[] = {
      {"GET", "/health", get_health},
      {"GET", "/ready", get_ready},
      {"GET", "/v1/models", list_models},
      {"GET", "/v1/models/{id}", get_model},
      {"GET", "/server_info", get_server_info},
      {"GET", "/metrics", get_metrics},
      {"GET", "/dashboard", get_dashboard},
      {"GET", "/dashboard/stats", get_dashboard_stats},
      {"POST", "/v1/chat/completions", chat_completions},
      {"POST", "/v1/completions", completions},
      {"POST", "/v1/embeddings", embeddings},
      {"POST", "/tokenize", tokenize},
      {"POST", "/detokenize", detokenize},
  };
  return kRoutes;
}

}  // namespace inferlab::api
