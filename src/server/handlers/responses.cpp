// POST /v1/responses (OpenAI's Responses API: input items through the chat template, answered as a
// `response` object or its event stream), GET and DELETE /v1/responses/{id} and GET
// /v1/responses/{id}/input_items on the store of finished responses.
#include <fmt/format.h>

#include <algorithm>

#include "server/handlers/generation.h"
#include "server/handlers/routes.h"
#include "server/responses_request.h"

namespace inferlab::api {
namespace {

ApiError not_found(const std::string& id) {
  return ApiError(404, fmt::format("Response with id '{}' not found.", id), "response_id", "response_not_found");
}

// Where the item `id` sits in `items` (the `after` / `before` cursors); 400 when no item has it.
std::size_t cursor_position(const json& items, const std::string& id, const char* param) {
  for (std::size_t i = 0; i < items.size(); ++i)
    if (items[i].value("id", "") == id) return i;
  throw ApiError(400, fmt::format("{} '{}' is not the id of an input item of this response", param, id), param);
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

// OpenAI's list of a response's input items: those its prompt was made of (the items of the
// responses it continued, then its own input), newest first unless order=asc, `limit` of them
// after the `after` item (or before the `before` one), paged by item id.
void list_response_input_items(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  state.require_ready();
  const std::string& id = req.params.at(0);
  const InputItemsQuery query = parse_input_items_query(req.query);
  auto stored = state.responses->get(id);
  if (!stored) throw not_found(id);

  json items(stored->conversation.begin(), stored->conversation.begin() + static_cast<std::ptrdiff_t>(stored->input_items));
  if (!query.ascending) std::reverse(items.begin(), items.end());
  std::size_t begin = 0, end = items.size();
  if (query.after) begin = cursor_position(items, *query.after, "after") + 1;
  if (query.before) end = cursor_position(items, *query.before, "before");
  end = std::max(begin, end);
  // Paging backwards (before, no after) takes the items nearest the cursor.
  const bool backwards = query.before && !query.after;
  const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(query.limit), end - begin);
  const std::size_t first = backwards ? end - count : begin;
  json data(items.begin() + static_cast<std::ptrdiff_t>(first), items.begin() + static_cast<std::ptrdiff_t>(first + count));
  const bool has_more = backwards ? first > begin : first + count < end;
  send_json(res, 200, {{"object", "list"}, {"data", data},
                       {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
                       {"last_id", data.empty() ? json(nullptr) : data.back()["id"]},
                       {"has_more", has_more}});
}

}  // namespace inferlab::api
