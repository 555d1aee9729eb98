// What every generating route does after parsing: one engine request per prompt and choice, then
// the answer as an SSE stream or, whole, once every choice is done; the route's ResponseWriter
// lays it out. A failed submit (queue full: 503) cancels the choices already submitted.
#pragma once
#include <memory>

#include "server/http_message.h"
#include "server/openai_request.h"
#include "server/response_writer.h"
#include "server/server_state.h"

namespace inferlab::api {

void answer_generation(ServerState& state, HttpResponse& res, ParsedRequest request, std::unique_ptr<ResponseWriter> writer);

}  // namespace inferlab::api
