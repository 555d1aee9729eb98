// What a conformance check is written with (see include/inferlab/lab/conform.h): the Probe
// that sends requests to the server under test and keeps the last one as evidence, answers and
// streams read byte for byte, and the outcomes a check throws (Failure, Skip) or returns (pass).
// A check is one small function registered with its name and one-line summary.
#pragma once
#include <fmt/format.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/lab/conform.h"

namespace inferlab::lab::conform {

using json = nlohmann::json;

// Thrown by a check that found the server wrong; the evidence defaults to the last answer's bytes.
struct Failure {
  std::string what;
  std::optional<std::string> evidence;
};
// Thrown by a check that does not apply (a feature the server does not have, a flag not given).
struct Skip {
  std::string why;
};

[[noreturn]] inline void fail_check(std::string what, std::optional<std::string> evidence = std::nullopt) {
  throw Failure{std::move(what), std::move(evidence)};
}
[[noreturn]] inline void skip_check(std::string why) { throw Skip{std::move(why)}; }
inline void require(bool ok, const std::string& what) {
  if (!ok) fail_check(what);
}
inline void require(bool ok, const std::string& what, const std::string& evidence) {
  if (!ok) fail_check(what, evidence);
}

// `text` for a report line: control bytes escaped, at most `max` bytes, the length said when cut.
std::string cut(const std::string& text, std::size_t max = 240);

struct Answer {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
  json parsed;  // the body as JSON; discarded when it is not
  std::string header(const std::string& name) const;
  bool is_json_object() const { return parsed.is_object(); }
};

// A streamed answer: the raw bytes, and the `data:` payloads as an SSE client reads them.
struct Stream : Answer {
  std::vector<std::string> data;  // every event's data, in order ([DONE] included)
  std::vector<std::string> names;  // every event's `event:` name, in the same order ("" without one)
  std::vector<json> chunks;       // the JSON objects among them (not [DONE], not unparsable ones)
  bool done = false;              // the last event is [DONE]
  std::string text() const;       // the choices' concatenated text (delta.content or text), choice 0
  std::string text_of(int index) const;
};

struct RequestOptions {
  bool authorization = true;            // false: no Authorization header at all
  std::optional<std::string> api_key = std::nullopt;  // instead of the suite's key
  std::vector<std::string> headers = {};  // extra "Name: value" lines
};

class Probe {
 public:
  Probe(const ConformOptions& options, std::string model);

  const std::string& model() const { return model_; }
  const ConformOptions& options() const { return options_; }
  bool has_api_key() const { return !options_.api_key.empty(); }

  // `path` from the server's root ("/v1/models", "/metrics").
  Answer get(const std::string& path, const RequestOptions& request = {});
  Answer post(const std::string& path, const json& body, const RequestOptions& request = {});
  Answer post_raw(const std::string& path, const std::string& body, const RequestOptions& request = {});
  Stream stream(const std::string& path, const json& body, const RequestOptions& request = {});

  // A chat body for the model served: one user message, `extra` merged over it.
  json chat(const json& extra = json::object()) const;
  json completion(const json& extra = json::object()) const;

  // The last request sent, for a failure's evidence.
  const std::string& last_request() const { return last_request_; }
  const std::string& last_bytes() const { return last_bytes_; }

  // The model's context length when the server tells it (max_model_len in /v1/models as vLLM
  // and inferlab send, llama.cpp's /props n_ctx); none when it does not.
  std::optional<int> context_length();

  // A Prometheus text's samples ("name{labels}" -> value); none when there is no /metrics.
  std::optional<std::map<std::string, double>> metrics();

 private:
  Answer send(const std::string& path, std::optional<std::string> body, const RequestOptions& request, bool stream,
              const std::function<bool(std::string_view)>& on_bytes);

  ConformOptions options_;
  std::string root_;  // the server root, without /v1
  std::string model_;
  std::string last_request_, last_bytes_;
  std::optional<std::optional<int>> context_length_;
};

struct Check {
  std::string name;
  std::string summary;
  // Returns what it saw (a pass); throws Failure or Skip.
  std::function<std::string(Probe&)> run;
};

// Each group's file adds its checks, in the order they run.
void add_model_checks(std::vector<Check>& checks);
void add_chat_checks(std::vector<Check>& checks);
void add_stream_checks(std::vector<Check>& checks);
void add_generation_checks(std::vector<Check>& checks);
void add_error_checks(std::vector<Check>& checks);
void add_serving_checks(std::vector<Check>& checks);
void add_responses_checks(std::vector<Check>& checks);
void add_messages_checks(std::vector<Check>& checks);  // Anthropic's /v1/messages
void add_embeddings_checks(std::vector<Check>& checks);
void add_sampling_checks(std::vector<Check>& checks);  // repetition_penalty, min_tokens

// Shared assertions.
// OpenAI's error answer: `status`, a JSON body {"error": {"message": non-empty string, "type":
// string, "param", "code"}} (param and code may be null, but are there).
void require_error(const Answer& answer, long status);
// A usage object: integer prompt/completion/total tokens, total = prompt + completion.
void require_usage(const json& usage, const std::string& where);
// The choice items of a chat answer's choices[0]; fails when there are none.
const json& first_choice(const Answer& answer);

}  // namespace inferlab::lab::conform
