// The server's routes: each a handler over the shared ServerState, in a file of its own (or with
// its close siblings), listed once in the table of routes.cpp. Adding an endpoint is a handler
// file, its declaration here and its line in the table; nothing shared grows a branch.
#pragma once
#include <span>

#include "server/http_message.h"
#include "server/server_state.h"

namespace inferlab::api {

// May throw what HttpServer::Handler may throw (ApiError, OverloadedError, Error): answered in
// the route's error shape by the transport.
using RouteHandler = void (*)(ServerState& state, const HttpRequest& req, HttpResponse& res);

struct Route {
  const char* method;  // "GET", "POST" or "DELETE"
  const char* path;    // exact, or with one "{name}" (HttpServer::get)
  RouteHandler handler;
  ErrorShape error_shape = nullptr;  // how errors on this path are written (nullptr: OpenAI's)
};

std::span<const Route> server_routes();  // routes.cpp

// health.cpp: liveness and readiness.
void get_health(ServerState& state, const HttpRequest& req, HttpResponse& res);
void get_ready(ServerState& state, const HttpRequest& req, HttpResponse& res);
// models.cpp: the one served model, as OpenAI's models.list and models.retrieve.
void list_models(ServerState& state, const HttpRequest& req, HttpResponse& res);
void get_model(ServerState& state, const HttpRequest& req, HttpResponse& res);
// chat_completions.cpp, completions.cpp: generation, each with its response shape.
void chat_completions(ServerState& state, const HttpRequest& req, HttpResponse& res);
void completions(ServerState& state, const HttpRequest& req, HttpResponse& res);
// embeddings.cpp: the inputs' embeddings, pooled from the model's hidden states.
void embeddings(ServerState& state, const HttpRequest& req, HttpResponse& res);
// messages.cpp: Anthropic's Messages API (/v1/messages) and its token count.
void messages(ServerState& state, const HttpRequest& req, HttpResponse& res);
void count_message_tokens(ServerState& state, const HttpRequest& req, HttpResponse& res);
// tokenize.cpp: the tokenizer as a service.
void tokenize(ServerState& state, const HttpRequest& req, HttpResponse& res);
void detokenize(ServerState& state, const HttpRequest& req, HttpResponse& res);
// responses.cpp: OpenAI's Responses API and its store of finished responses.
void create_response(ServerState& state, const HttpRequest& req, HttpResponse& res);
void get_response(ServerState& state, const HttpRequest& req, HttpResponse& res);
void delete_response(ServerState& state, const HttpRequest& req, HttpResponse& res);
void list_response_input_items(ServerState& state, const HttpRequest& req, HttpResponse& res);
// observability.cpp: what the server runs with and how it is doing.
void get_server_info(ServerState& state, const HttpRequest& req, HttpResponse& res);
void get_metrics(ServerState& state, const HttpRequest& req, HttpResponse& res);
void get_dashboard(ServerState& state, const HttpRequest& req, HttpResponse& res);
void get_dashboard_stats(ServerState& state, const HttpRequest& req, HttpResponse& res);

}  // namespace inferlab::api
