// The route table: one line per route. The transport counts requests under these paths (/metrics).
#include "server/handlers/routes.h"

#include "server/response_writer.h"

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
      {"POST", "/v1/messages", messages, anthropic_error_body},
      {"POST", "/v1/messages/count_tokens", count_message_tokens, anthropic_error_body},
      {"POST", "/tokenize", tokenize},
      {"POST", "/detokenize", detokenize},
      {"POST", "/v1/responses", create_response},
      {"GET", "/v1/responses/{id}", get_response},
      {"DELETE", "/v1/responses/{id}", delete_response},
      {"GET", "/v1/responses/{id}/input_items", list_response_input_items},
  };
  return kRoutes;
}

}  // namespace inferlab::api
