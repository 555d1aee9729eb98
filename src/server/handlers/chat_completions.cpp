// POST /v1/chat/completions: messages through the chat template, answered as chat.completion.
#include "server/handlers/generation.h"
#include "server/handlers/routes.h"

namespace inferlab::api {

void chat_completions(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  ParsedRequest request = parse_chat_request(parse_json_object(req.body, state.options.max_json_depth), state.context);
  answer_generation(state, res, std::move(request), chat_completion_writer(state.engine->name(), state.system_fingerprint));
}

}  // namespace inferlab::api
