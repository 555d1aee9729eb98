// OpenAI responses: the state of one request's answer while its choices generate (text through
// the stop strings, finish reasons, errors, logprobs, usage) and the JSON built from it, the
// non-streaming body and the chunks a stream sends.
#pragma once
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/generation/engine.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace inferlab::api {

// Streams text through a set of stop strings: returns what is safe to show now, holding back a
// tail that could still become a stop string; `hit` once a stop string appears (not included).
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string feed(const std::string& piece);
  std::string finish();  // the held-back tail when the stream ends without a stop string
  bool hit() const { return hit_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool hit_ = false;
};

// One choice of a response: its request stream plus the text-side state (detokenizer, stop strings).
struct Choice {
  int index = 0;
  int prompt_index = 0;
  std::shared_ptr<RequestStream> stream;
  StreamDecoder decoder;
  StopMatcher stop;
  int completion_tokens = 0;
  bool done = false;
  std::string finish_reason;  // "stop" / "length" once done without error
  std::string error;          // set when it ended with an error or timeout
  bool timed_out = false;
  bool request_error = false;  // the error came from what the request asked for (its grammar): 400
  std::size_t text_length = 0;  // bytes shown so far (completions text_offset)
  std::string text;             // everything shown (non-streaming answer)
  json chat_logprobs = json::array();
  json completion_logprobs;
  std::optional<RequestTimings> timings;  // from the engine's last event
  std::unique_ptr<ToolCallStream> tool_stream;  // with tools: splits the text into content and calls
  std::vector<ToolCall> tool_calls;             // the calls found, once done

  Choice(const EngineText& text, bool skip_special, std::vector<std::string> stops);
};

// What one poll of a choice produced: new visible text and the logprobs of its new tokens.
struct Delta {
  std::string text;
  json tool_calls = json::array();  // chat: tool_calls delta entries
  json chat_logprobs = json::array();
  json completion_logprobs;
  bool finished = false;
};

// One request's answer: a Choice per prompt and n, fed from their streams. Going away cancels
// every stream still running, which frees its KV at once.
class Completion {
 public:
  // `timings`: add the engine's RequestTimings to the answer (inferlab serve --no-timings: false).
  // `system_fingerprint`: the served configuration's id, in the body and every chunk.
  Completion(std::shared_ptr<const ParsedRequest> request, const EngineText& text, std::string model_name,
             double request_timeout_s, bool timings, std::string system_fingerprint);
  ~Completion();
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  const ParsedRequest& request() const { return *request_; }
  const std::vector<std::unique_ptr<Choice>>& choices() const { return choices_; }
  void add_choice(int prompt_index, std::shared_ptr<RequestStream> stream);
  void cancel_all();
  // A choice is settled once its text is done and, with timings on, the engine's last event (which
  // carries them) came: a stop string ends the text before the engine has let the sequence go.
  bool settled(const Choice& choice) const;
  bool all_done() const;  // every choice settled

  // Applies one stream event to a choice, adding what it shows to `delta`.
  void absorb(Choice& choice, StreamEvent& event, Delta& delta);
  json usage() const;
  static ApiError error_of(const Choice& choice);  // 504 for a timeout, else 500

  // Calls `notify` (on the engine's thread) whenever a choice has a new event.
  void on_event(const std::function<void()>& notify);
  // Non-streaming, never waits: what the choices produced so far absorbed; once every choice is
  // done, the body (ApiError when a choice failed).
  std::optional<json> poll_body();

  // Streaming: the chunk objects (a chunk holding `choice_items`) and their choice items.
  json chunk(json choice_items) const;
  std::optional<json> opening_item(const Choice& choice) const;  // the role (chat) or the echoed prompt
  std::optional<json> delta_item(const Choice& choice, const Delta& delta) const;  // none: nothing new
  json finish_item(const Choice& choice) const;
  json finish_chunk(const Choice& choice) const;  // the finish item, with the choice's timings
  json usage_chunk() const;

 private:
  void absorb_text(Choice& choice, StreamEvent& event, Delta& delta);
  void end_text(Choice& choice, std::string tail, Delta& delta, bool stopped);
  void add_logprobs(Choice& choice, const SampledToken& token, Delta& delta);

  std::shared_ptr<const ParsedRequest> request_;
  const EngineText& text_;
  std::string model_name_;
  std::string system_fingerprint_;
  double request_timeout_s_;
  bool timings_;
  std::string id_;
  std::time_t created_;
  std::vector<std::unique_ptr<Choice>> choices_;
};

// The `timings` object (llama.cpp's names where they overlap; docs/measurement.md).
json timings_json(const RequestTimings& timings);

}  // namespace inferlab::api
