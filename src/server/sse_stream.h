// Streaming a Completion as Server-Sent Events: one writer per response, keep-alive comments
// while nothing is generated, and every stream cancelled the moment the client goes away.
#pragma once
#include <atomic>
#include <memory>

#include "server/openai_response.h"

namespace httplib {
struct Response;
}

namespace inferlab::api {

// Answers `res` with `completion` as an SSE stream; `active_streams` counts it while it is open.
void stream_completion(httplib::Response& res, std::shared_ptr<Completion> completion, std::atomic<int>& active_streams);

}  // namespace inferlab::api
