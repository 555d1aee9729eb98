// POST /v1/messages (Anthropic's Messages API: its request through the chat template, answered as
// an Anthropic message) and POST /v1/messages/count_tokens. Both answer errors in Anthropic's
// shape (their ErrorShape in routes.cpp). The anthropic-version header is accepted and not read:
// there is one version of this shape.
#include "server/anthropic_request.h"
#include "server/handlers/generation.h"
#include "server/handlers/routes.h"

namespace inferlab::api {

void messages(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  ParsedRequest request = parse_messages_request(parse_json_object(req.body, state.options.max_json_depth), state.context);
  answer_generation(state, res, std::move(request), anthropic_message_writer(state.engine->name()));
}

void count_message_tokens(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  const std::size_t tokens = count_messages_tokens(parse_json_object(req.body, state.options.max_json_depth), state.context);
  send_json(res, 200, {{"input_tokens", tokens}});
}

}  // namespace inferlab::api
