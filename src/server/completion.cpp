// One request's generation (see completion.h): stop strings, the per-choice state fed from the
// engine's events, logprobs as the engine gave them, token counts, the timings object.
#include "server/completion.h"

#include <fmt/format.h>

#include <cmath>

namespace inferlab::api {
namespace {

// Milliseconds to the microsecond: enough for any stage, short on the wire.
double round_ms(double ms) { return std::round(ms * 1000) / 1000; }

double per_second(int tokens, double ms) { return ms > 0 ? round_ms(tokens * 1000.0 / ms) : 0.0; }

}  // namespace

json timings_json(const RequestTimings& t) {
  const int computed = t.prompt_tokens - t.cached_tokens;
  json token_ms = json::array();
  for (double ms : t.token_ms) token_ms.push_back(round_ms(ms));
  return {{"cache_n", t.cached_tokens},
          {"prompt_n", computed},
          {"prompt_ms", round_ms(t.prefill_ms)},
          {"prompt_per_second", per_second(computed, t.prefill_ms)},
          {"predicted_n", t.generated_tokens},
          {"predicted_ms", round_ms(t.decode_ms)},
          {"predicted_per_second", per_second(t.generated_tokens, t.decode_ms)},
          {"queue_ms", round_ms(t.queue_ms)},
          {"prefill_ms", round_ms(t.prefill_ms)},
          {"decode_ms", round_ms(t.decode_ms)},
          {"ttft_ms", round_ms(t.ttft_ms())},
          {"e2e_ms", round_ms(t.e2e_ms())},
          {"preemptions", t.preemptions},
          {"draft_n", t.draft_tokens},
          {"draft_n_accepted", t.accepted_draft_tokens},
          {"arrival_unix_ms", t.arrival_unix_ms},
          {"token_ms", std::move(token_ms)}};
}

std::string StopMatcher::feed(const std::string& piece) {
  if (hit_) return "";
  held_ += piece;
  std::size_t first = std::string::npos;
  for (const auto& stop : stops_)
    if (std::size_t at = held_.find(stop); at < first) {
      first = at;
      matched_ = stop;
    }
  if (first != std::string::npos) {
    hit_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is the beginning of some stop string.
  std::size_t keep = 0;
  for (const auto& stop : stops_) {
    for (std::size_t len = std::min(stop.size() - 1, held_.size()); len > keep; --len)
      if (held_.compare(held_.size() - len, len, stop, 0, len) == 0) {
        keep = len;
        break;
      }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::finish() {
  std::string out = hit_ ? "" : held_;
  held_.clear();
  return out;
}

Choice::Choice(const EngineText& text, bool skip_special, std::vector<std::string> stops)
    : decoder(text.stream_decoder(skip_special)), stop(std::move(stops)) {}

Completion::Completion(std::shared_ptr<const ParsedRequest> request, const EngineText& text, double request_timeout_s,
                       bool timings)
    : request_(std::move(request)), text_(text), request_timeout_s_(request_timeout_s), timings_(timings) {}

Completion::~Completion() { cancel_all(); }

void Completion::submit_choices(Engine& engine, std::optional<Clock::time_point> deadline) {
  const ParsedRequest& r = *request_;
  for (std::size_t p = 0; p < r.prompts.size(); ++p) {
    for (int j = 0; j < r.n; ++j) {
      ChoiceRequest choice;
      choice.generation.prompt = r.prompts[p];
      choice.generation.max_tokens = r.max_tokens[p];
      choice.generation.sampling = r.sampling;
      choice.generation.sampling.logprobs = r.logprobs;
      choice.generation.stop_token_ids = r.stop_token_ids;
      choice.generation.deadline = deadline;
      choice.generation.grammar = r.grammar;
      choice.generation.grammar_trigger = r.grammar_trigger;
      choice.generation.reasoning = r.reasoning_span;
      choice.ignore_eos = r.ignore_eos;
      choice.choice_index = static_cast<int>(choices_.size());
      add_choice(static_cast<int>(p), engine.submit(std::move(choice)));
    }
  }
}

void Completion::add_choice(int prompt_index, std::shared_ptr<RequestStream> stream) {
  // A harmony answer is read with its special tokens' text: they are the markers of its channels.
  const bool harmony = request_->reasoning && request_->reasoning->harmony;
  auto choice = std::make_unique<Choice>(text_, request_->skip_special_tokens && !harmony, request_->stop);
  choice->index = static_cast<int>(choices_.size());
  choice->prompt_index = prompt_index;
  choice->stream = std::move(stream);
  if (harmony) {
    choice->harmony = std::make_unique<HarmonySplitter>(request_->harmony_calls, request_->separate_reasoning,
                                                        request_->reasoning_start == ReasoningStart::closed);
  } else {
    if (request_->tool_format) choice->tool_stream = std::make_unique<ToolCallStream>(*request_->tool_format);
    if (request_->reasoning && request_->separate_reasoning)
      choice->reasoning_splitter = std::make_unique<ReasoningSplitter>(*request_->reasoning, request_->reasoning_start);
  }
  choices_.push_back(std::move(choice));
}

void Completion::cancel_all() {
  for (auto& c : choices_) c->stream->cancel();  // a no-op for finished ones
}

bool Completion::settled(const Choice& choice) const { return choice.done && (!timings_ || choice.timings); }

bool Completion::all_done() const {
  for (auto& c : choices_)
    if (!settled(*c)) return false;
  return true;
}

void Completion::absorb(Choice& choice, StreamEvent& event, Delta& delta) {
  if (event.timings) choice.timings = std::move(event.timings);
  if (!choice.done) absorb_text(choice, event, delta);
  delta.finished = settled(choice);
}

void Completion::absorb_text(Choice& choice, StreamEvent& event, Delta& delta) {
  if (event.token) {
    const SampledToken& t = *event.token;
    ++choice.completion_tokens;
    std::string shown = choice.stop.feed(choice.decoder.push(t.token));
    if (request_->logprobs) add_logprobs(choice, t, delta);
    if (choice.stop.hit()) {
      choice.stream->stop();  // we have what we need: free the sequence now (counted as a stop)
      end_text(choice, std::move(shown), delta, true);
      choice.done = true;
    } else if (choice.reasoning_splitter) {
      const bool was_inside = choice.reasoning_splitter->inside();
      show(choice, shown, delta);
      if (was_inside || choice.reasoning_splitter->inside()) ++choice.reasoning_tokens;
    } else if (choice.harmony) {
      // An analysis message's tokens, its <|message|> and <|end|> included.
      const bool was_inside = choice.harmony->in_reasoning();
      show(choice, shown, delta);
      if (was_inside || choice.harmony->in_reasoning()) ++choice.reasoning_tokens;
    } else {
      show(choice, shown, delta);
    }
  }
  if (event.finish && !choice.done) {
    switch (*event.finish) {
      case FinishReason::stop:
      case FinishReason::length: {
        std::string tail = choice.stop.feed(choice.decoder.flush());
        tail += choice.stop.finish();
        end_text(choice, std::move(tail), delta, choice.stop.hit() || *event.finish == FinishReason::stop);
        break;
      }
      case FinishReason::timeout:
        choice.timed_out = true;
        choice.error = fmt::format("the request timed out after {} s (inferlab serve --timeout)", request_timeout_s_);
        break;
      case FinishReason::cancelled:
        choice.error = "the request was cancelled";
        break;
      case FinishReason::error:
        choice.error = event.error.empty() ? "generation failed" : event.error;
        choice.request_error = event.request_error;
        break;
    }
    choice.done = true;
  }
  choice.text += delta.text;
  choice.reasoning += delta.reasoning;
}

// Text the stop strings let through: the thoughts split off, the rest through the tool calls.
void Completion::show(Choice& choice, const std::string& text, Delta& delta) {
  if (choice.harmony) {
    delta.text += choice.harmony->feed(text, delta.reasoning, delta.tool_calls);
    return;
  }
  const std::string content = choice.reasoning_splitter ? choice.reasoning_splitter->feed(text, delta.reasoning) : text;
  delta.text += choice.tool_stream ? choice.tool_stream->feed(content, delta.tool_calls) : content;
}

// The last text of a choice; with tools, the calls it holds decide the finish reason.
void Completion::end_text(Choice& choice, std::string tail, Delta& delta, bool stopped) {
  if (choice.harmony) {
    tail = choice.harmony->feed(tail, delta.reasoning, delta.tool_calls);
    tail += choice.harmony->finish(delta.reasoning, choice.tool_calls);
  } else if (choice.reasoning_splitter) {
    tail = choice.reasoning_splitter->feed(tail, delta.reasoning);
    tail += choice.reasoning_splitter->finish(delta.reasoning);
  }
  if (choice.tool_stream) {
    delta.text += choice.tool_stream->feed(tail, delta.tool_calls);
    delta.text += choice.tool_stream->finish(delta.tool_calls, choice.tool_calls);
  } else {
    delta.text += tail;
  }
  choice.finish_reason = !choice.tool_calls.empty() && stopped ? "tool_calls" : stopped ? "stop" : "length";
}

void Completion::add_logprobs(Choice& choice, const SampledToken& t, Delta& delta) {
  LogprobEntry entry{t, choice.logprob_text_bytes};
  choice.logprob_text_bytes += text_.token_text(t.token).size();
  choice.logprobs.push_back(entry);
  delta.logprobs.push_back(std::move(entry));
}

TokenUsage Completion::usage() const {
  TokenUsage usage;
  for (const auto& prompt : request_->prompts) usage.prompt_tokens += static_cast<int>(prompt.size());
  for (auto& c : choices_) usage.completion_tokens += c->completion_tokens;
  for (auto& c : choices_) usage.reasoning_tokens += c->reasoning_tokens;
  for (auto& c : choices_)
    if (c->index % request_->n == 0) usage.cached_prompt_tokens += c->stream->cached_prompt_tokens();  // prompts count once, not per choice
  return usage;
}

ApiError Completion::error_of(const Choice& c) {
  if (c.timed_out) return ApiError(504, c.error, "", "timeout", "timeout_error");
  if (c.request_error) return ApiError(400, c.error, "", "invalid_grammar", "invalid_request_error");
  return ApiError(500, c.error, "", "", "server_error");
}

void Completion::on_event(const std::function<void()>& notify) {
  for (auto& choice : choices_) choice->stream->on_event(notify);
}

bool Completion::poll_settled() {
  for (auto& choice : choices_) {
    if (settled(*choice)) continue;
    for (auto& event : choice->stream->wait(std::chrono::milliseconds(0))) {
      Delta delta;
      absorb(*choice, event, delta);
    }
  }
  if (!all_done()) return false;
  for (auto& choice : choices_)
    if (!choice->error.empty()) throw error_of(*choice);
  return true;
}

}  // namespace inferlab::api
