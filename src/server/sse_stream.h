// Streaming a Completion as Server-Sent Events: the events each choice produced since the last
// poll, `: ping` comments while nothing is generated, and every stream cancelled the moment the
// client goes away.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>

#include "server/http_message.h"
#include "server/openai_response.h"

namespace inferlab::api {

// Answers `res` with `completion` as an SSE stream; `active_streams` counts it while it is open.
// After `ping_interval` with nothing sent (queue wait, long prefill) a `: ping` comment goes out,
// so proxies with idle timeouts keep the stream (0: never).
void stream_completion(HttpResponse& res, std::shared_ptr<Completion> completion, std::atomic<int>& active_streams,
                       std::chrono::milliseconds ping_interval);

}  // namespace inferlab::api
