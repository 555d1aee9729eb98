// POST /v1/responses (OpenAI's Responses API: input items through the chat template, answered as a
// `response` object or its event stream), GET and DELETE /v1/responses/{id} on the store of
// finished responses.
#include <fmt/format.h>

#include "server/handlers/generation.h"
#include "server/handlers/routes.h"
#include "server/responses_request.h"

namespace inferlab::api {
namespace {

ApiError not_found(const std::string& id) {
  return ApiError(404, fmt::format("Response with id '{}' not found.", id), "response_id", "response_not_found");
}

}  // namespace

void create_response(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  auto store = state.responses;
  ResponsesRequest request = parse_responses_request(parse_json_object(req.body, state.options.max_json_depth), state.context,
                                                     [&](const std::string& id) { return store->get(id); });
  auto writer = openai_response_writer(state.engine->name(), std::move(request.echo), std::move(request.conversation),
                                       request.store ? store : nullptr);
  answer_generation(state, res, std::move(request.parsed), std::move(writer));
}

void get_response(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  const std::string& id = req.params.at(0);
  auto stored = state.responses->get(id);
  if (!stored) throw not_found(id);
  send_json(res, 200, stored->response);
}

void delete_response(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  const std::string& id = req.params.at(0);
  if (!state.responses->remove(id)) throw not_found(id);
  send_json(res, 200, {{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
}

}  // namespace inferlab::api
