// OpenAI responses (see openai_response.h): stop strings, the per-choice state, logprobs in the
// chat and completions shapes, usage, and the non-streaming body and streaming chunks.
#include "server/openai_response.h"

#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <random>

namespace inferlab::api {
namespace {

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

json empty_completion_logprobs() {
  return {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}, {"text_offset", json::array()}};
}

// The raw bytes as the integer list OpenAI's logprobs "bytes" carries.
json bytes_of(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

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
  for (const auto& stop : stops_) first = std::min(first, held_.find(stop));
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
    : decoder(text.stream_decoder(skip_special)), stop(std::move(stops)), completion_logprobs(empty_completion_logprobs()) {}

Completion::Completion(std::shared_ptr<const ParsedRequest> request, const EngineText& text, std::string model_name,
                       double request_timeout_s, bool timings, std::string system_fingerprint)
    : request_(std::move(request)),
      text_(text),
      model_name_(std::move(model_name)),
      system_fingerprint_(std::move(system_fingerprint)),
      request_timeout_s_(request_timeout_s),
      timings_(timings),
      id_(random_id(request_->chat ? "chatcmpl-" : "cmpl-")),
      created_(std::time(nullptr)) {}

Completion::~Completion() { cancel_all(); }

void Completion::add_choice(int prompt_index, std::shared_ptr<RequestStream> stream) {
  auto choice = std::make_unique<Choice>(text_, request_->skip_special_tokens, request_->stop);
  choice->index = static_cast<int>(choices_.size());
  choice->prompt_index = prompt_index;
  choice->stream = std::move(stream);
  if (request_->tool_format) choice->tool_stream = std::make_unique<ToolCallStream>(*request_->tool_format);
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
    } else {
      delta.text += choice.tool_stream ? choice.tool_stream->feed(shown, delta.tool_calls) : shown;
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
}

// The last text of a choice; with tools, the calls it holds decide the finish reason.
void Completion::end_text(Choice& choice, std::string tail, Delta& delta, bool stopped) {
  if (choice.tool_stream) {
    delta.text += choice.tool_stream->feed(tail, delta.tool_calls);
    delta.text += choice.tool_stream->finish(delta.tool_calls, choice.tool_calls);
  } else {
    delta.text += tail;
  }
  choice.finish_reason = !choice.tool_calls.empty() && stopped ? "tool_calls" : stopped ? "stop" : "length";
}

void Completion::add_logprobs(Choice& choice, const SampledToken& t, Delta& delta) {
  std::string piece = text_.token_text(t.token);
  if (request_->chat) {
    json top = json::array();
    for (const auto& alt : t.top)
      top.push_back({{"token", text_.token_text(alt.token)}, {"logprob", alt.logprob}, {"bytes", bytes_of(text_.token_bytes(alt.token))}});
    json entry = {{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(text_.token_bytes(t.token))}, {"top_logprobs", top}};
    choice.chat_logprobs.push_back(entry);
    delta.chat_logprobs.push_back(entry);
  } else {
    if (delta.completion_logprobs.is_null()) delta.completion_logprobs = empty_completion_logprobs();
    json top = json::object();
    for (const auto& alt : t.top) top[text_.token_text(alt.token)] = alt.logprob;
    for (json* target : {&choice.completion_logprobs, &delta.completion_logprobs}) {
      (*target)["tokens"].push_back(piece);
      (*target)["token_logprobs"].push_back(t.logprob);
      (*target)["top_logprobs"].push_back(top);
      (*target)["text_offset"].push_back(choice.text_length);
    }
    choice.text_length += piece.size();
  }
}

json Completion::usage() const {
  int prompt_tokens = 0, completion = 0, cached = 0;
  for (const auto& prompt : request_->prompts) prompt_tokens += static_cast<int>(prompt.size());
  for (auto& c : choices_) completion += c->completion_tokens;
  for (auto& c : choices_)
    if (c->index % request_->n == 0) cached += c->stream->cached_prompt_tokens();  // prompts count once, not per choice
  // The details OpenAI's clients read: no audio, no reasoning model, no predicted outputs.
  return json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion},
              {"total_tokens", prompt_tokens + completion},
              {"prompt_tokens_details", {{"cached_tokens", cached}, {"audio_tokens", 0}}},
              {"completion_tokens_details",
               {{"reasoning_tokens", 0}, {"audio_tokens", 0}, {"accepted_prediction_tokens", 0}, {"rejected_prediction_tokens", 0}}}};
}

ApiError Completion::error_of(const Choice& c) {
  if (c.timed_out) return ApiError(504, c.error, "", "timeout", "timeout_error");
  if (c.request_error) return ApiError(400, c.error, "", "invalid_grammar", "invalid_request_error");
  return ApiError(500, c.error, "", "", "server_error");
}

void Completion::on_event(const std::function<void()>& notify) {
  for (auto& choice : choices_) choice->stream->on_event(notify);
}

std::optional<json> Completion::poll_body() {
  for (auto& choice : choices_) {
    if (settled(*choice)) continue;
    for (auto& event : choice->stream->wait(std::chrono::milliseconds(0))) {
      Delta delta;
      absorb(*choice, event, delta);
    }
  }
  if (!all_done()) return std::nullopt;
  for (auto& choice : choices_)
    if (!choice->error.empty()) throw error_of(*choice);
  const bool chat = request_->chat;
  json out_choices = json::array();
  for (auto& choice : choices_) {
    json c = {{"index", choice->index}, {"finish_reason", choice->finish_reason}};
    if (chat) {
      c["message"] = {{"role", "assistant"}, {"content", choice->text}};
      if (!choice->tool_calls.empty()) {
        json calls = json::array();
        for (const auto& call : choice->tool_calls)
          calls.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        c["message"]["tool_calls"] = std::move(calls);
        if (choice->text.empty()) c["message"]["content"] = nullptr;
      }
      c["logprobs"] = request_->logprobs ? json{{"content", choice->chat_logprobs}} : json(nullptr);
    } else {
      c["text"] = request_->echo ? request_->prompt_texts[choice->prompt_index] + choice->text : choice->text;
      c["logprobs"] = request_->logprobs ? choice->completion_logprobs : json(nullptr);
    }
    // Several choices: each carries its own timings; one: at the top, where llama.cpp puts them.
    if (timings_ && choices_.size() > 1) c["timings"] = timings_json(*choice->timings);
    out_choices.push_back(std::move(c));
  }
  json body = {{"id", id_}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created_},
               {"model", model_name_}, {"system_fingerprint", system_fingerprint_}, {"choices", out_choices},
               {"usage", usage()}};
  if (timings_ && choices_.size() == 1) body["timings"] = timings_json(*choices_.front()->timings);
  return body;
}

json Completion::chunk(json choice_items) const {
  json c = {{"id", id_}, {"object", request_->chat ? "chat.completion.chunk" : "text_completion"}, {"created", created_},
            {"model", model_name_}, {"system_fingerprint", system_fingerprint_}, {"choices", std::move(choice_items)}};
  if (request_->include_usage) c["usage"] = nullptr;
  return c;
}

std::optional<json> Completion::opening_item(const Choice& c) const {
  if (request_->chat)
    return json{{"index", c.index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (request_->echo)  // completions echo: the prompt comes first
    return json{{"index", c.index}, {"text", request_->prompt_texts[c.prompt_index]}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  return std::nullopt;
}

std::optional<json> Completion::delta_item(const Choice& c, const Delta& delta) const {
  const bool has_logprobs = request_->chat ? !delta.chat_logprobs.empty() : !delta.completion_logprobs.is_null();
  if (delta.text.empty() && !has_logprobs && delta.tool_calls.empty()) return std::nullopt;
  if (request_->chat) {
    json d = json::object();
    if (!delta.text.empty() || delta.tool_calls.empty()) d["content"] = delta.text;
    if (!delta.tool_calls.empty()) d["tool_calls"] = delta.tool_calls;
    return json{{"index", c.index}, {"delta", std::move(d)},
                {"logprobs", has_logprobs ? json{{"content", delta.chat_logprobs}} : json(nullptr)}, {"finish_reason", nullptr}};
  }
  return json{{"index", c.index}, {"text", delta.text}, {"logprobs", has_logprobs ? delta.completion_logprobs : json(nullptr)},
              {"finish_reason", nullptr}};
}

json Completion::finish_item(const Choice& c) const {
  if (request_->chat) return {{"index", c.index}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", c.finish_reason}};
  return {{"index", c.index}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", c.finish_reason}};
}

json Completion::finish_chunk(const Choice& c) const {
  json out = chunk(json::array({finish_item(c)}));
  if (timings_) out["timings"] = timings_json(*c.timings);  // the chunk holds this one choice
  return out;
}

json Completion::usage_chunk() const {
  json c = chunk(json::array());
  c["usage"] = usage();
  if (timings_ && choices_.size() == 1) c["timings"] = timings_json(*choices_.front()->timings);
  return c;
}

}  // namespace inferlab::api
