// POST /v1/responses' request (OpenAI's Responses API) -> the chat request it amounts to: the
// input items (and those of the previous_response_id it continues) become the chat template's
// messages, function tools and text.format become tools and response_format, and the chat
// parser (openai_request.h) does the rest, with every limit. What the answer echoes back and what
// the store keeps travels beside it.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "server/http_message.h"
#include "server/openai_request.h"
#include "server/response_store.h"

namespace inferlab::api {

struct ResponsesRequest {
  ParsedRequest parsed;
  json echo;          // the request fields every response object carries (instructions, tools, text, ...)
  json conversation;  // the input items, after those of the previous response
  bool store = true;
};

// Finds a stored response by id (nullopt: unknown or evicted).
using StoredLookup = std::function<std::optional<StoredResponse>(const std::string& id)>;

// The Responses body as the chat request it amounts to (exposed for the tests): the messages, tools,
// tool_choice, response_format and sampling fields. ApiError (400, 404 for an unknown
// previous_response_id) names the Responses field at fault.
json responses_to_chat(const json& body, const StoredLookup& lookup, json& conversation);

ResponsesRequest parse_responses_request(const json& body, const ModelContext& model, const StoredLookup& lookup);

// GET /v1/responses/{id}/input_items' query, OpenAI's list parameters: `limit` 1..100 (default 20),
// `order` asc or desc (default desc), `include` / `include[]` (only reasoning.encrypted_content,
// which changes nothing here), and the `after` / `before` item-id cursors. A parameter given twice
// counts by its last value; unknown ones are ignored. ApiError 400 naming the parameter.
struct InputItemsQuery {
  int limit = 20;
  bool ascending = false;
  std::optional<std::string> after, before;
};
InputItemsQuery parse_input_items_query(const QueryParams& query);

}  // namespace inferlab::api
