// `inferlab bench soak`: a reliability run against an OpenAI-compatible server. It first takes a
// sequential greedy baseline of each prompt, then keeps `concurrency` requests in flight for
// `duration` seconds — streaming and non-streaming mixed, plain chats, forced tool calls and
// json_schema structured outputs (constrained decoding) mixed, some cancelled mid-way (the transfer
// is aborted), some deliberately malformed — and checks at the end that every completed answer is
// whole and is its own request's answer (unique ids, the baseline's text or call, the same
// streamed or not), that every structured answer conforms to its schema (checked by
// lab/schema_check.h, not by the server's compiler), that the server went back to idle (no
// running, queued or streaming requests, no KV blocks held) and that its resident memory came
// back to the idle level.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace inferlab::lab {

struct SoakOptions {
  std::string base_url;
  std::string model;        // empty: the first of GET /v1/models
  std::string api_key;
  double duration_s = 60;
  int concurrency = 8;
  double cancel_rate = 0.1;     // fraction of requests aborted by the client mid-way
  double malformed_rate = 0.05; // fraction of requests that are deliberately invalid (expect 4xx)
  double stream_fraction = 0.5;
  double tool_call_rate = 0.1;    // fraction of valid requests with tools and tool_choice "required"
  double json_schema_rate = 0.1;  // fraction of valid requests with response_format json_schema (strict)
  int max_tokens = 24;
  int structured_max_tokens = 128;  // max_tokens of tool-call and json_schema requests (room for the whole JSON)
  uint64_t seed = 0;
  double request_timeout_s = 120;
  int server_pid = 0;           // read VmRSS from /proc/PID/status (else /metrics process_resident_memory_bytes)
  double rss_tolerance = 0.10;  // end RSS may exceed the idle RSS by this fraction
  double warmup_s = -1;         // full-concurrency load before the idle RSS is read (-1: min(30 s, duration/10))
  double settle_s = 30;         // how long to wait for the server to go idle after the run
  bool progress = false;
  std::vector<std::string> prompts;  // the user messages sent; empty: soak_prompts() (bench soak --dataset picks others)
};

struct SoakReport {
  std::string model;
  int prompts = 0;
  double duration_s = 0;
  int64_t started = 0;
  int64_t completed = 0;          // whole answers that matched their baseline
  int64_t completed_stream = 0;
  int64_t completed_tool_calls = 0;   // of completed: forced tool calls
  int64_t completed_json_schema = 0;  // of completed: json_schema answers
  int64_t structured_cut = 0;     // of those: finished by max_tokens, so the JSON is unfinished (not checked)
  int64_t cancelled = 0;          // aborted by us on purpose
  int64_t interrupted_in_flight = 0;  // cut off when the run was interrupted
  std::string interrupted_by;     // "SIGINT" / "SIGTERM": a partial run (never a PASS)
  int64_t malformed_4xx = 0;      // invalid requests answered 4xx
  int64_t overload_503 = 0;       // deliberate overload answers (Retry-After)
  int64_t lost = 0;               // transport errors, timeouts, streams without [DONE] or finish_reason
  int64_t mixed_up = 0;           // someone else's text, a reused id, a wrong model name
  int64_t http_5xx = 0;           // 5xx other than overload 503
  int64_t unexpected_status = 0;  // a malformed request that was accepted, or a valid one refused with 4xx
  int64_t schema_broken = 0;      // a finished tool call or json_schema answer that is not JSON or breaks its schema
  std::map<std::string, int64_t> problems;  // first examples of each failure, by message
  std::vector<std::string> examples;        // a few full descriptions
  std::optional<int64_t> rss_cold_bytes;  // after the sequential baseline only
  std::optional<int64_t> rss_idle_bytes, rss_peak_bytes, rss_end_bytes;
  std::string rss_source;  // "/proc/PID/status", "/metrics", or why it was not read
  bool server_idle = false;
  std::string idle_detail;

  bool ok(double rss_tolerance) const;
  std::string text(double rss_tolerance) const;  // the printed summary
};

SoakReport run_soak(const SoakOptions& options);

// The fixed prompt set, tool and response schema (exposed for tests).
const std::vector<std::string>& soak_prompts();
const nlohmann::json& soak_tool();             // {"type": "function", "function": {..., "parameters", "strict": true}}
const nlohmann::json& soak_response_schema();  // the json_schema of structured requests

}  // namespace inferlab::lab
