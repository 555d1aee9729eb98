// Talking to an OpenAI-compatible server: the API root from a base URL, the model list, what one
// streamed chunk carries, and the course's streaming chat client.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "inferlab/lab/metrics.h"

namespace inferlab::lab {

using Clock = std::chrono::steady_clock;

// "http://host:30000" and "http://host:30000/v1" both give "http://host:30000/v1" (the OpenAI
// client's base_url includes /v1; vLLM's benchmark --base-url does not).
std::string api_root(std::string base_url);

// GET {root}/models; the first model's id. Throws Error when unreachable, non-2xx or empty.
std::string first_model_id(const std::string& base_url, const std::string& api_key, double timeout_s);

// The message of an OpenAI-shaped error body ({"error":{"message":...}}, or {"message"}, {"detail"}),
// else the body itself, shortened.
std::string error_message_from_body(std::string_view body);

// What one `data:` event of a chat/completions stream carries.
struct StreamChunk {
  bool done = false;                  // data: [DONE]
  std::string content;                // delta.content, after a thinking model's reasoning_content (chat), or text (completions); may be empty
  std::string answer;                 // delta.content alone, without the thoughts: what a chat history keeps
  std::optional<int64_t> prompt_tokens, completion_tokens;  // from "usage"
  std::optional<std::string> error;   // an error event: data: {"error": {...}}
  std::optional<std::string> finish_reason;
  ServerTimings server;               // from "timings" and usage.prompt_tokens_details
};
// Throws Error when the data is not JSON.
StreamChunk parse_stream_chunk(std::string_view data);

struct ChatOptions {
  std::string base_url, model, api_key;
  bool stream = true;
  int max_tokens = 64;
  double temperature = 0;
  double frequency_penalty = 0;  // sent only when not 0
  std::optional<int64_t> seed;   // the sampler's seed, sent when given
  double timeout_s = 60;
};
struct ChatResult {
  std::string model;  // the model used (listed when not given)
  std::string text;
  double e2e_ms = 0;
  std::optional<double> first_content_ms;  // only when streaming and some content arrived
  std::optional<int64_t> prompt_tokens, completion_tokens;
};
// The course's stream_client.py: list the models when none is given, then one chat completion of
// `message`; each non-empty content piece goes to on_piece as it arrives. Times from just before
// the completion request, like the course's perf_counter().
ChatResult chat(const ChatOptions& options, const std::string& message,
                const std::function<void(std::string_view)>& on_piece);

}  // namespace inferlab::lab
