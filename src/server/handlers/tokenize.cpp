// POST /tokenize (a prompt, or messages rendered by the chat template) and POST /detokenize.
#include "server/handlers/routes.h"

namespace inferlab::api {

void tokenize(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  TokenizeRequest request = parse_tokenize_request(parse_json_object(req.body, state.options.max_json_depth), state.context);
  json out = {{"tokens", request.ids}, {"count", request.ids.size()}, {"max_model_len", state.context.context_length}};
  if (request.return_token_strs) {
    json strs = json::array();
    for (int32_t id : request.ids) strs.push_back(state.engine->text().token_piece(id));
    out["token_strs"] = strs;
  }
  send_json(res, 200, out);
}

void detokenize(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  std::vector<int32_t> ids = parse_detokenize_request(parse_json_object(req.body, state.options.max_json_depth), state.context);
  std::string text = state.engine->text().detokenize(ids);
  send_json(res, 200, {{"prompt", text}, {"text", text}});
}

}  // namespace inferlab::api
