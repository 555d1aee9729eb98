// POST /v1/completions' answer: `text_completion` with a `text` per choice (after the prompt when
// echo asks), the same object for chunks, and logprobs as the legacy parallel lists (tokens,
// token_logprobs, top_logprobs as token -> logprob, text_offset).
#include "server/responses/openai_choices.h"

namespace inferlab::api {
namespace {

json legacy_logprobs(const EngineText& text, const std::vector<LogprobEntry>& entries) {
  json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}, {"text_offset", json::array()}};
  for (const LogprobEntry& entry : entries) {
    const SampledToken& t = entry.sampled;
    json top = json::object();
    for (const auto& alt : t.top) top[text.token_text(alt.token)] = alt.logprob;
    out["tokens"].push_back(text.token_text(t.token));
    out["token_logprobs"].push_back(t.logprob);
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(entry.text_offset);
  }
  return out;
}

class TextCompletionWriter final : public OpenAiChoicesWriter {
 public:
  TextCompletionWriter(std::string model_name, std::string system_fingerprint)
      : OpenAiChoicesWriter({"cmpl-", "text_completion", "text_completion"}, std::move(model_name), std::move(system_fingerprint)) {}

 private:
  json choice_fields(const Completion& completion, const Choice& choice) const override {
    const ParsedRequest& request = completion.request();
    return {{"text", request.echo ? request.prompt_texts[choice.prompt_index] + choice.text : choice.text},
            {"logprobs", request.logprobs ? legacy_logprobs(completion.text(), choice.logprobs) : json(nullptr)}};
  }

  // With echo the prompt comes first.
  std::optional<json> opening_item(const Completion& completion, const Choice& choice) const override {
    const ParsedRequest& request = completion.request();
    if (!request.echo) return std::nullopt;
    return json{{"index", choice.index}, {"text", request.prompt_texts[choice.prompt_index]}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  }

  std::optional<json> delta_item(const Completion& completion, const Choice& choice, const Delta& delta) const override {
    const bool has_logprobs = !delta.logprobs.empty();
    if (delta.text.empty() && !has_logprobs && delta.tool_calls.empty()) return std::nullopt;
    return json{{"index", choice.index}, {"text", delta.text},
                {"logprobs", has_logprobs ? legacy_logprobs(completion.text(), delta.logprobs) : json(nullptr)},
                {"finish_reason", nullptr}};
  }

  json finish_item(const Choice& choice) const override {
    return {{"index", choice.index}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", choice.finish_reason}};
  }
};

}  // namespace

std::unique_ptr<ResponseWriter> text_completion_writer(std::string model_name, std::string system_fingerprint) {
  return std::make_unique<TextCompletionWriter>(std::move(model_name), std::move(system_fingerprint));
}

}  // namespace inferlab::api
