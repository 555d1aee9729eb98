// POST /v1/chat/completions' answer: `chat.completion` with a `message` per choice (tool calls
// split out), `chat.completion.chunk` deltas opening with the assistant role, and logprobs as a
// `content` list with each token's bytes.
#include "server/responses/openai_choices.h"

namespace inferlab::api {
namespace {

// The raw bytes as the integer list OpenAI's logprobs "bytes" carries.
json bytes_of(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

json logprobs_content(const EngineText& text, const std::vector<LogprobEntry>& entries) {
  json content = json::array();
  for (const LogprobEntry& entry : entries) {
    const SampledToken& t = entry.sampled;
    json top = json::array();
    for (const auto& alt : t.top)
      top.push_back({{"token", text.token_text(alt.token)}, {"logprob", alt.logprob}, {"bytes", bytes_of(text.token_bytes(alt.token))}});
    content.push_back({{"token", text.token_text(t.token)}, {"logprob", t.logprob}, {"bytes", bytes_of(text.token_bytes(t.token))},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

bool shows_reasoning(const ParsedRequest& request) { return request.separate_reasoning && request.include_reasoning; }

class ChatCompletionWriter final : public OpenAiChoicesWriter {
 public:
  ChatCompletionWriter(std::string model_name, std::string system_fingerprint)
      : OpenAiChoicesWriter({"chatcmpl-", "chat.completion", "chat.completion.chunk"}, std::move(model_name),
                            std::move(system_fingerprint)) {}

 private:
  json choice_fields(const Completion& completion, const Choice& choice) const override {
    json message = {{"role", "assistant"}, {"content", choice.text}};
    if (!choice.tool_calls.empty()) {
      json calls = json::array();
      for (const auto& call : choice.tool_calls)
        calls.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      message["tool_calls"] = std::move(calls);
      if (choice.text.empty()) message["content"] = nullptr;
    }
    if (shows_reasoning(completion.request()))  // llama.cpp's and vLLM's field (vLLM 0.11+ also names it `reasoning`)
      message["reasoning_content"] = choice.reasoning.empty() ? json(nullptr) : json(choice.reasoning);
    return {{"message", std::move(message)},
            {"logprobs", completion.request().logprobs ? logprobs_content(completion.text(), choice.logprobs) : json(nullptr)}};
  }

  std::optional<json> opening_item(const Completion&, const Choice& choice) const override {
    return json{{"index", choice.index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  }

  std::optional<json> delta_item(const Completion& completion, const Choice& choice, const Delta& delta) const override {
    const bool has_logprobs = !delta.logprobs.empty();
    const bool has_reasoning = !delta.reasoning.empty() && shows_reasoning(completion.request());
    if (delta.text.empty() && !has_logprobs && delta.tool_calls.empty() && !has_reasoning) return std::nullopt;
    json d = json::object();
    if (has_reasoning) d["reasoning_content"] = delta.reasoning;
    if (!delta.text.empty() || (delta.tool_calls.empty() && !has_reasoning)) d["content"] = delta.text;
    if (!delta.tool_calls.empty()) d["tool_calls"] = delta.tool_calls;
    return json{{"index", choice.index}, {"delta", std::move(d)},
                {"logprobs", has_logprobs ? logprobs_content(completion.text(), delta.logprobs) : json(nullptr)},
                {"finish_reason", nullptr}};
  }

  json finish_item(const Choice& choice) const override {
    return {{"index", choice.index}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", choice.finish_reason}};
  }
};

}  // namespace

std::unique_ptr<ResponseWriter> chat_completion_writer(std::string model_name, std::string system_fingerprint) {
  return std::make_unique<ChatCompletionWriter>(std::move(model_name), std::move(system_fingerprint));
}

}  // namespace inferlab::api
