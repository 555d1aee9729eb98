// One request's generation as the server follows it, whatever API shape answers it: a Choice per
// prompt and n, fed from its engine stream (text through the detokenizer and the stop strings, tool
// calls, finish reasons, errors, logprobs, token counts, timings). How it is written out — the
// body, a stream's events — is a ResponseWriter's (response_writer.h), one per API shape.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/generation/engine.h"
#include "server/api_error.h"
#include "server/harmony.h"
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
  const std::string& matched() const { return matched_; }  // the stop string that was hit (Anthropic's stop_sequence)

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool hit_ = false;
  std::string matched_;
};

// One sampled token with its logprobs as the engine gave them, and where its text starts among the
// choice's tokens (completions' text_offset). Each API shape writes these in its own layout.
struct LogprobEntry {
  SampledToken sampled;
  std::size_t text_offset = 0;
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
  std::size_t logprob_text_bytes = 0;  // the text of the tokens logged so far (the next text_offset)
  std::string text;                    // everything shown (non-streaming answer)
  std::vector<LogprobEntry> logprobs;  // every token's, when the request asked for logprobs
  std::optional<RequestTimings> timings;  // from the engine's last event
  std::unique_ptr<ToolCallStream> tool_stream;  // with tools: splits the text into content and calls
  std::vector<ToolCall> tool_calls;             // the calls found, once done
  std::unique_ptr<ReasoningSplitter> reasoning_splitter;  // a thinking model: splits thoughts from the answer
  std::unique_ptr<HarmonySplitter> harmony;               // a harmony model (gpt-oss): channels, thoughts and calls
  std::string reasoning;                                  // the thoughts shown (non-streaming answer)
  int reasoning_tokens = 0;                               // tokens of the thoughts, their markers included

  Choice(const EngineText& text, bool skip_special, std::vector<std::string> stops);
};

// What one poll of a choice produced: new visible text and the logprobs of its new tokens.
struct Delta {
  std::string text;
  std::string reasoning;  // new thoughts (a thinking model's, split from the text)
  json tool_calls = json::array();  // tool_calls delta entries (OpenAI's layout, the tool-call stream's)
  std::vector<LogprobEntry> logprobs;  // the new tokens' (with logprobs asked)
  bool finished = false;
};

// The token counts of a whole request (prompts counted once, not per choice).
struct TokenUsage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_prompt_tokens = 0;
  int reasoning_tokens = 0;
};

// One request's answer: a Choice per prompt and n, fed from their streams. Going away cancels
// every stream still running, which frees its KV at once.
class Completion {
 public:
  // `timings`: add the engine's RequestTimings to the answer (inferlab serve --no-timings: false),
  // so a choice is settled only once they came.
  Completion(std::shared_ptr<const ParsedRequest> request, const EngineText& text, double request_timeout_s, bool timings);
  ~Completion();
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  const ParsedRequest& request() const { return *request_; }
  const EngineText& text() const { return text_; }  // token text and bytes, for the logprobs
  bool timings() const { return timings_; }
  const std::vector<std::unique_ptr<Choice>>& choices() const { return choices_; }
  void add_choice(int prompt_index, std::shared_ptr<RequestStream> stream);
  // Submits the request's n choices per prompt to `engine`, each its own sequence added here (a failed
  // submit throws; the choices already running are cancelled when the completion goes away).
  void submit_choices(Engine& engine, std::optional<Clock::time_point> deadline);
  void cancel_all();
  // A choice is settled once its text is done and, with timings on, the engine's last event (which
  // carries them) came: a stop string ends the text before the engine has let the sequence go.
  bool settled(const Choice& choice) const;
  bool all_done() const;  // every choice settled

  // Applies one stream event to a choice, adding what it shows to `delta`.
  void absorb(Choice& choice, StreamEvent& event, Delta& delta);
  TokenUsage usage() const;
  static ApiError error_of(const Choice& choice);  // 504 for a timeout, 400 for the request's grammar, else 500

  // Calls `notify` (on the engine's thread) whenever a choice has a new event.
  void on_event(const std::function<void()>& notify);
  // Non-streaming, never waits: absorbs what the choices produced so far; true once every choice
  // is settled, and then throws the ApiError of the first that failed.
  bool poll_settled();

 private:
  void absorb_text(Choice& choice, StreamEvent& event, Delta& delta);
  void end_text(Choice& choice, std::string tail, Delta& delta, bool stopped);
  void show(Choice& choice, const std::string& text, Delta& delta);  // through the reasoning split and the tool calls
  void add_logprobs(Choice& choice, const SampledToken& token, Delta& delta);

  std::shared_ptr<const ParsedRequest> request_;
  const EngineText& text_;
  double request_timeout_s_;
  bool timings_;
  std::vector<std::unique_ptr<Choice>> choices_;
};

// The `timings` object (llama.cpp's names where they overlap; docs/measurement.md).
json timings_json(const RequestTimings& timings);

}  // namespace inferlab::api
