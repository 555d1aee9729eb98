// POST /v1/completions: one or several raw prompts, answered as text_completion.
#include "server/handlers/generation.h"
#include "server/handlers/routes.h"

namespace inferlab::api {

void completions(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  ParsedRequest request = parse_completion_request(parse_json_object(req.body, state.options.max_json_depth), state.context);
  answer_generation(state, res, std::move(request), text_completion_writer(state.engine->name(), state.system_fingerprint));
}

}  // namespace inferlab::api
