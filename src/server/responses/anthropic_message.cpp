// POST /v1/messages' answer in Anthropic's shape: a `message` with thinking (a thinking model's
// thoughts), text and tool_use content blocks, stop_reason / stop_sequence and usage; streamed as
// Anthropic's named events (message_start, ping, content_block_start / _delta / _stop,
// message_delta, message_stop; an error past the headers as `event: error`). One choice: the
// Messages API has no n.
#include <fmt/format.h>

#include <random>

#include "server/response_writer.h"
#include "server/sse_stream.h"

namespace inferlab::api {
namespace {

std::string new_message_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("msg_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

// A call's id with Anthropic's prefix: the same in the body and in the stream, and what the
// client sends back as a tool_result's tool_use_id.
std::string tool_use_id(const std::string& call_id) {
  const std::string_view prefix = "call_";
  return "toolu_" + (call_id.rfind(prefix, 0) == 0 ? call_id.substr(prefix.size()) : call_id);
}

json tool_input(const std::string& arguments) {
  json input = json::parse(arguments, nullptr, false);
  return input.is_object() ? input : json::object();
}

// Anthropic's stop reasons from the shared finish reason: a stop string is its stop_sequence.
std::string stop_reason(const Choice& choice) {
  if (choice.finish_reason == "tool_calls") return "tool_use";
  if (choice.finish_reason == "length") return "max_tokens";
  return choice.stop.hit() ? "stop_sequence" : "end_turn";
}

json stop_sequence(const Choice& choice) {
  return choice.finish_reason == "stop" && choice.stop.hit() ? json(choice.stop.matched()) : json(nullptr);
}

// Anthropic signs its thinking blocks so that it can check them when they come back; this server
// has nothing to sign and checks nothing, so the signature is empty (a thinking block still carries
// one, and a stream still sends the signature_delta before the block stops, as clients expect).
constexpr const char* kThinkingSignature = "";

json usage_json(const Completion& completion) {
  const TokenUsage usage = completion.usage();
  json out = {{"input_tokens", usage.prompt_tokens}, {"output_tokens", usage.completion_tokens}};
  // output_tokens counts the thoughts too (as Anthropic bills them); the details say how many.
  if (completion.request().reasoning) out["output_tokens_details"] = {{"thinking_tokens", usage.reasoning_tokens}};
  return out;
}

std::string error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

class AnthropicMessageWriter final : public ResponseWriter {
 public:
  explicit AnthropicMessageWriter(std::string model_name) : model_name_(std::move(model_name)), id_(new_message_id()) {}

  json body(const Completion& completion) const override {
    const Choice& choice = *completion.choices().front();
    json content = json::array();
    if (!choice.reasoning.empty())
      content.push_back({{"type", "thinking"}, {"thinking", choice.reasoning}, {"signature", kThinkingSignature}});
    if (!choice.text.empty()) content.push_back({{"type", "text"}, {"text", choice.text}});
    for (const ToolCall& call : choice.tool_calls)
      content.push_back({{"type", "tool_use"}, {"id", tool_use_id(call.id)}, {"name", call.name}, {"input", tool_input(call.arguments)}});
    json out = envelope(std::move(content), stop_reason(choice), stop_sequence(choice));
    out["usage"] = usage_json(completion);
    if (completion.timings() && choice.timings) out["timings"] = timings_json(*choice.timings);
    return out;
  }

  void stream_start(const Completion& completion, std::string& out) override {
    json message = envelope(json::array(), nullptr, nullptr);
    message["usage"] = {{"input_tokens", completion.usage().prompt_tokens}, {"output_tokens", 0}};
    out += sse_event("message_start", {{"type", "message_start"}, {"message", std::move(message)}});
    out += sse_event("ping", {{"type", "ping"}});
  }

  void stream_delta(const Completion&, const Choice&, const Delta& delta, std::string& out) override {
    if (!delta.reasoning.empty()) {
      if (open_ != Block::thinking)
        start_block(Block::thinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, out);
      block_delta({{"type", "thinking_delta"}, {"thinking", delta.reasoning}}, out);
    }
    if (!delta.text.empty()) {
      if (open_ != Block::text) start_block(Block::text, {{"type", "text"}, {"text", ""}}, out);
      block_delta({{"type", "text_delta"}, {"text", delta.text}}, out);
    }
    // The tool-call stream sends each call whole: a header entry (id, name), then its arguments.
    for (const json& entry : delta.tool_calls) {
      if (entry.contains("id"))
        start_block(Block::tool_use,
                    {{"type", "tool_use"}, {"id", tool_use_id(entry["id"].get<std::string>())},
                     {"name", entry["function"]["name"]}, {"input", json::object()}},
                    out);
      const std::string arguments = entry["function"].value("arguments", "");
      if (!arguments.empty()) block_delta({{"type", "input_json_delta"}, {"partial_json", arguments}}, out);
      if (!entry.contains("id")) stop_block(out);
    }
  }

  void stream_finish(const Completion& completion, const Choice& choice, std::string& out) override {
    stop_block(out);
    json event = {{"type", "message_delta"},
                  {"delta", {{"stop_reason", stop_reason(choice)}, {"stop_sequence", stop_sequence(choice)}}},
                  {"usage", usage_json(completion)}};
    if (completion.timings() && choice.timings) event["timings"] = timings_json(*choice.timings);
    out += sse_event("message_delta", event);
  }

  void stream_end(const Completion&, std::string& out) override { out += sse_event("message_stop", {{"type", "message_stop"}}); }

  void stream_error(const ApiError& error, std::string& out) override { out += sse_event("error", anthropic_error_body(error)); }

 private:
  enum class Block { none, thinking, text, tool_use };

  json envelope(json content, json stop_reason, json stop_sequence) const {
    return {{"id", id_},           {"type", "message"},          {"role", "assistant"},          {"model", model_name_},
            {"content", content}, {"stop_reason", stop_reason}, {"stop_sequence", stop_sequence}};
  }

  void start_block(Block kind, json block, std::string& out) {
    stop_block(out);
    out += sse_event("content_block_start", {{"type", "content_block_start"}, {"index", next_index_}, {"content_block", std::move(block)}});
    open_ = kind;
  }
  void block_delta(json delta, std::string& out) {
    out += sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", next_index_}, {"delta", std::move(delta)}});
  }
  void stop_block(std::string& out) {
    if (open_ == Block::none) return;
    if (open_ == Block::thinking) block_delta({{"type", "signature_delta"}, {"signature", kThinkingSignature}}, out);
    out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", next_index_}});
    open_ = Block::none;
    ++next_index_;
  }

  std::string model_name_;
  std::string id_;
  Block open_ = Block::none;
  int next_index_ = 0;  // the open block's index, else the next one's
};

}  // namespace

json anthropic_error_body(const ApiError& error) {
  return {{"type", "error"}, {"error", {{"type", error_type(error.status)}, {"message", error.message}}}};
}

std::unique_ptr<ResponseWriter> anthropic_message_writer(std::string model_name) {
  return std::make_unique<AnthropicMessageWriter>(std::move(model_name));
}

}  // namespace inferlab::api
