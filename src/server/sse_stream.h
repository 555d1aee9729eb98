// Streaming a Completion as Server-Sent Events: the events each choice produced since the last
// poll, laid out by the API shape's ResponseWriter, `: ping` comments while nothing is generated,
// and every stream cancelled the moment the client goes away.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "server/completion.h"
#include "server/http_message.h"
#include "server/response_writer.h"

namespace inferlab::api {

// SSE framing: one `data:` event, or a named one (`event:` line first, as Anthropic's stream has).
std::string sse_data(const json& value);
std::string sse_event(const char* name, const json& value);

// Answers `res` with `completion` as an SSE stream written by `writer`; `active_streams` counts it
// while it is open. After `ping_interval` with nothing sent (queue wait, long prefill) a `: ping`
// comment goes out, so proxies with idle timeouts keep the stream (0: never).
void stream_completion(HttpResponse& res, std::shared_ptr<Completion> completion, std::unique_ptr<ResponseWriter> writer,
                       std::atomic<int>& active_streams, std::chrono::milliseconds ping_interval);

}  // namespace inferlab::api
