// OpenAI's choices-shaped answers (see openai_choices.h): the envelope, usage, timings placement
// and the stream's chunk sequence, shared by chat.completion and text_completion.
#include "server/responses/openai_choices.h"

#include <fmt/format.h>

#include <random>

#include "server/sse_stream.h"

namespace inferlab::api {
namespace {

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

// The details OpenAI's clients read: no audio, no predicted outputs.
json usage_json(const TokenUsage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}, {"audio_tokens", 0}}},
              {"completion_tokens_details",
               {{"reasoning_tokens", u.reasoning_tokens}, {"audio_tokens", 0}, {"accepted_prediction_tokens", 0}, {"rejected_prediction_tokens", 0}}}};
}

const std::string kDone = "data: [DONE]\n\n";

}  // namespace

OpenAiChoicesWriter::OpenAiChoicesWriter(Names names, std::string model_name, std::string system_fingerprint)
    : names_(names),
      model_name_(std::move(model_name)),
      system_fingerprint_(std::move(system_fingerprint)),
      id_(random_id(names.id_prefix)),
      created_(std::time(nullptr)) {}

json OpenAiChoicesWriter::body(const Completion& completion) const {
  const auto& choices = completion.choices();
  json out_choices = json::array();
  for (auto& choice : choices) {
    json c = choice_fields(completion, *choice);
    c["index"] = choice->index;
    c["finish_reason"] = choice->finish_reason;
    // Several choices: each carries its own timings; one: at the top, where llama.cpp puts them.
    if (completion.timings() && choices.size() > 1) c["timings"] = timings_json(*choice->timings);
    out_choices.push_back(std::move(c));
  }
  json body = {{"id", id_}, {"object", names_.object}, {"created", created_}, {"model", model_name_},
               {"system_fingerprint", system_fingerprint_}, {"choices", out_choices}, {"usage", usage_json(completion.usage())}};
  if (completion.timings() && choices.size() == 1) body["timings"] = timings_json(*choices.front()->timings);
  return body;
}

json OpenAiChoicesWriter::chunk(const Completion& completion, json choice_items) const {
  json c = {{"id", id_}, {"object", names_.chunk_object}, {"created", created_}, {"model", model_name_},
            {"system_fingerprint", system_fingerprint_}, {"choices", std::move(choice_items)}};
  if (completion.request().include_usage) c["usage"] = nullptr;
  return c;
}

// Nothing yet: the opening item (chat's role chunk) goes out with the choice's first token, as
// vLLM's server sends it. Sent on arrival, before the prompt is computed, it made
// the TTFT of a client that times the first chunk (`vllm bench serve --backend openai-chat`) the
// connection's time instead of queue + prefill (docs/measurement.md, "Checked against the peers'
// tools").
void OpenAiChoicesWriter::stream_start(const Completion&, std::string&) {}

void OpenAiChoicesWriter::open(const Completion& completion, const Choice& choice, std::string& out) {
  if (!opened_.insert(choice.index).second) return;
  if (auto item = opening_item(completion, choice)) out += sse_data(chunk(completion, json::array({*item})));
}

void OpenAiChoicesWriter::stream_delta(const Completion& completion, const Choice& choice, const Delta& delta, std::string& out) {
  open(completion, choice, out);
  if (auto item = delta_item(completion, choice, delta)) out += sse_data(chunk(completion, json::array({*item})));
}

void OpenAiChoicesWriter::stream_finish(const Completion& completion, const Choice& choice, std::string& out) {
  open(completion, choice, out);
  json finish = chunk(completion, json::array({finish_item(choice)}));
  if (completion.timings()) finish["timings"] = timings_json(*choice.timings);  // the chunk holds this one choice
  out += sse_data(finish);
}

void OpenAiChoicesWriter::stream_end(const Completion& completion, std::string& out) {
  if (completion.request().include_usage) {
    json usage = chunk(completion, json::array());
    usage["usage"] = usage_json(completion.usage());
    if (completion.timings() && completion.choices().size() == 1) usage["timings"] = timings_json(*completion.choices().front()->timings);
    out += sse_data(usage);
  }
  out += kDone;
}

void OpenAiChoicesWriter::stream_error(const ApiError& error, std::string& out) { out += sse_data(error.body()) + kDone; }

}  // namespace inferlab::api
