// The id of one HTTP exchange, sent back as the `x-request-id` response header (what the openai
// SDKs expose as `_request_id`) and printed in the request log: a client's own `x-request-id`
// when it is sane, so one id follows a request through proxies and logs, else a fresh one.
#pragma once
#include <string>

namespace inferlab::api {

// `client_value`: the request's x-request-id header ("" when absent). Kept when it is 1-128
// characters of [A-Za-z0-9._:-] (nothing that could forge a log line or a header); otherwise
// "req_" and 24 random hex digits.
std::string request_id_for(const std::string& client_value);

}  // namespace inferlab::api
