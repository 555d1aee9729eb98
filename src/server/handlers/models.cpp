// GET /v1/models and GET /v1/models/{id}: the one served model, as OpenAI's models.list and
// models.retrieve; any name the generation routes accept finds it.
#include <fmt/format.h>

#include <algorithm>

#include "server/handlers/routes.h"

namespace inferlab::api {
namespace {

json model_entry(const ServerState& state) {
  return {{"id", state.engine->name()}, {"object", "model"}, {"created", state.created}, {"owned_by", "inferlab"},
          {"root", state.engine->model_path().string()}, {"max_model_len", state.context.context_length}};
}

}  // namespace

void list_models(ServerState& state, const HttpRequest&, HttpResponse& res) {
  state.require_ready();
  send_json(res, 200, {{"object", "list"}, {"data", json::array({model_entry(state)})}});
}

void get_model(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  const std::string& id = req.params.at(0);
  const auto& names = state.context.accepted_names;
  if (std::find(names.begin(), names.end(), id) == names.end())
    throw ApiError(404, fmt::format("The model `{}` does not exist.", id), "model", "model_not_found");
  send_json(res, 200, model_entry(state));
}

}  // namespace inferlab::api
