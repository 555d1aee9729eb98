// POST /v1/responses' answer (OpenAI's Responses API): a `response` object whose output is a
// reasoning item (a thinking model's thoughts as reasoning_text), a message item (output_text) and
// function_call items, and the stream as named events (`event: <type>` + `data:`), each with its
// sequence_number: response.created, .in_progress, per item output_item.added, content_part.added,
// reasoning_text.delta / output_text.delta / function_call_arguments.delta, their .done events and
// output_item.done, then response.completed or response.incomplete (error + response.failed when
// it fails past the headers). A finished response goes into the store when the request asked for that.
#include <fmt/format.h>

#include <ctime>
#include <random>

#include "server/response_store.h"
#include "server/response_writer.h"

namespace inferlab::api {
namespace {

std::string new_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:016x}", prefix, rng(), rng());
}

bool blank(const std::string& text) { return text.find_first_not_of(" \t\r\n") == std::string::npos; }

json message_item(const std::string& id, const std::string& text, const std::string& status) {
  return {{"type", "message"}, {"id", id}, {"role", "assistant"}, {"status", status},
          {"content", json::array({{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}}})}};
}

// The thoughts whole, as reasoning_text (vLLM's layout; OpenAI's own models return only a summary).
json reasoning_item(const std::string& id, const std::string& text, const std::string& status) {
  return {{"type", "reasoning"}, {"id", id}, {"summary", json::array()},
          {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}, {"status", status}};
}

json function_call_item(const std::string& id, const ToolCall& call, const std::string& status) {
  return {{"type", "function_call"}, {"id", id}, {"call_id", call.id}, {"name", call.name}, {"arguments", call.arguments},
          {"status", status}};
}

// An input item as the store keeps it and GET /v1/responses/{id}/input_items lists it, in OpenAI's
// layout: an id of its own (clients page by them), a type, a status, a message's content as parts.
// Items that came from the store (a previous response's) already are so.
json stored_input_item(json item) {
  if (!item.contains("type")) item["type"] = "message";  // an EasyInputMessage
  const std::string type = item["type"].get<std::string>();
  if (!item.contains("id") || !item["id"].is_string()) {
    const char* prefix = type == "message" ? "msg_" : type == "function_call" ? "fc_" : type == "reasoning" ? "rs_" : "fco_";
    item["id"] = new_id(prefix);
  }
  if (type == "message" && item.contains("content") && item["content"].is_string()) {
    const bool assistant = item.value("role", "") == "assistant";
    json part = {{"type", assistant ? "output_text" : "input_text"}, {"text", item["content"]}};
    if (assistant) part["annotations"] = json::array();
    item["content"] = json::array({std::move(part)});
  }
  if (!item.contains("status") || item["status"].is_null()) item["status"] = "completed";
  return item;
}

class OpenAiResponseWriter final : public ResponseWriter {
 public:
  OpenAiResponseWriter(std::string model_name, json echo, json conversation, std::shared_ptr<ResponseStore> store)
      : model_name_(std::move(model_name)),
        echo_(std::move(echo)),
        conversation_(std::move(conversation)),
        store_(std::move(store)),
        id_(new_id("resp_")),
        created_at_(std::time(nullptr)) {
    if (store_)
      for (json& item : conversation_) item = stored_input_item(std::move(item));
  }

  json body(const Completion& completion) const override {
    const Choice& choice = *completion.choices().front();
    const bool cut = choice.finish_reason == "length";
    json output = json::array();
    const bool thought = !choice.reasoning.empty();
    // Cut short while thinking (no answer after the thoughts): the reasoning item is what was cut.
    if (thought) output.push_back(reasoning_item(new_id("rs_"), choice.reasoning, cut && blank(choice.text) ? "incomplete" : "completed"));
    // With calls or thoughts, whitespace beside them is not a message of its own.
    if ((choice.tool_calls.empty() && !thought) || !blank(choice.text))
      output.push_back(message_item(new_id("msg_"), choice.text, cut ? "incomplete" : "completed"));
    for (const ToolCall& call : choice.tool_calls) output.push_back(function_call_item(new_id("fc_"), call, "completed"));
    return finished(completion, std::move(output));
  }

  void stream_start(const Completion&, std::string& out) override {
    json response = envelope("in_progress", json::array());
    event(out, {{"type", "response.created"}, {"response", response}});
    event(out, {{"type", "response.in_progress"}, {"response", response}});
  }

  void stream_delta(const Completion&, const Choice&, const Delta& delta, std::string& out) override {
    if (!delta.reasoning.empty()) add_reasoning(delta.reasoning, out);
    if (!delta.text.empty()) add_text(delta.text, out);
    for (const json& entry : delta.tool_calls) {
      if (entry.contains("id")) {  // a call's header: a new function_call item
        held_text_.clear();
        close_item(out, "completed");
        ToolCall call{entry["id"].get<std::string>(), entry["function"].value("name", ""), ""};
        open_ = Open::call;
        open_item_ = function_call_item(new_id("fc_"), call, "in_progress");
        event(out, {{"type", "response.output_item.added"}, {"output_index", output_.size()}, {"item", open_item_}});
      }
      const std::string arguments = entry.contains("function") ? entry["function"].value("arguments", "") : "";
      if (open_ == Open::call && !arguments.empty()) {
        open_item_["arguments"] = open_item_["arguments"].get<std::string>() + arguments;
        event(out, {{"type", "response.function_call_arguments.delta"}, {"item_id", open_item_["id"]},
                    {"output_index", output_.size()}, {"delta", arguments}});
      }
    }
  }

  void stream_finish(const Completion&, const Choice& choice, std::string& out) override {
    // An answer of nothing but whitespace is still a message; whitespace beside calls or thoughts is not.
    if (output_.empty() && open_ == Open::none) open_message(out);
    if (open_ == Open::message && !held_text_.empty()) text_delta(held_text_, out);
    held_text_.clear();
    close_item(out, choice.finish_reason == "length" ? "incomplete" : "completed");
  }

  void stream_end(const Completion& completion, std::string& out) override {
    json response = finished(completion, output_);
    const std::string type = response["status"] == "incomplete" ? "response.incomplete" : "response.completed";
    event(out, {{"type", type}, {"response", std::move(response)}});
  }

  void stream_error(const ApiError& error, std::string& out) override {
    const json code = error.code.empty() ? json(error.type) : json(error.code);
    event(out, {{"type", "error"}, {"code", code}, {"message", error.message},
                {"param", error.param.empty() ? json(nullptr) : json(error.param)}});
    json response = envelope("failed", output_);
    response["error"] = {{"code", code}, {"message", error.message}};
    event(out, {{"type", "response.failed"}, {"response", std::move(response)}});
  }

 private:
  enum class Open { none, reasoning, message, call };

  // The response object around `output` (usage and the outcome are added once it is finished).
  json envelope(const std::string& status, json output) const {
    json response = {{"id", id_}, {"object", "response"}, {"created_at", created_at_}, {"status", status},
                     {"model", model_name_}, {"output", std::move(output)}, {"error", nullptr},
                     {"incomplete_details", nullptr}, {"usage", nullptr}};
    for (const auto& [key, value] : echo_.items()) response[key] = value;
    return response;
  }

  json finished(const Completion& completion, json output) const {
    const Choice& choice = *completion.choices().front();
    const bool cut = choice.finish_reason == "length";
    json response = envelope(cut ? "incomplete" : "completed", std::move(output));
    if (cut) response["incomplete_details"] = {{"reason", "max_output_tokens"}};
    const TokenUsage usage = completion.usage();
    response["usage"] = {{"input_tokens", usage.prompt_tokens},
                         {"input_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens}}},
                         {"output_tokens", usage.completion_tokens},
                         {"output_tokens_details", {{"reasoning_tokens", usage.reasoning_tokens}}},
                         {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
    if (completion.timings() && choice.timings) response["timings"] = timings_json(*choice.timings);
    if (store_) {
      json conversation = conversation_;
      for (const json& item : response["output"]) conversation.push_back(item);
      store_->put(id_, {response, std::move(conversation), conversation_.size()});
    }
    return response;
  }

  void event(std::string& out, json data) {
    data["sequence_number"] = sequence_++;
    const std::string type = data["type"].get<std::string>();
    out += "event: " + type + "\ndata: " + dump(data) + "\n\n";
  }

  // Text opens a message item once it is more than whitespace (whitespace beside a call is no message).
  void add_text(const std::string& text, std::string& out) {
    if (open_ == Open::message) return text_delta(text, out);
    held_text_ += text;
    if (blank(held_text_)) return;
    close_item(out, "completed");
    open_message(out);
    std::string held = std::move(held_text_);
    held_text_.clear();
    text_delta(held, out);
  }

  // Thoughts come first: the first opens the reasoning item, which the answer or a call closes.
  void add_reasoning(const std::string& text, std::string& out) {
    if (open_ != Open::reasoning) {
      close_item(out, "completed");
      open_ = Open::reasoning;
      open_item_ = reasoning_item(new_id("rs_"), "", "in_progress");
      open_item_["content"] = json::array();
      event(out, {{"type", "response.output_item.added"}, {"output_index", output_.size()}, {"item", open_item_}});
      event(out, {{"type", "response.content_part.added"}, {"item_id", open_item_["id"]}, {"output_index", output_.size()},
                  {"content_index", 0}, {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
      open_text_.clear();
    }
    open_text_ += text;
    event(out, {{"type", "response.reasoning_text.delta"}, {"item_id", open_item_["id"]}, {"output_index", output_.size()},
                {"content_index", 0}, {"delta", text}});
  }

  void open_message(std::string& out) {
    open_ = Open::message;
    open_item_ = message_item(new_id("msg_"), "", "in_progress");
    open_item_["content"] = json::array();
    event(out, {{"type", "response.output_item.added"}, {"output_index", output_.size()}, {"item", open_item_}});
    event(out, {{"type", "response.content_part.added"}, {"item_id", open_item_["id"]}, {"output_index", output_.size()},
                {"content_index", 0}, {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
    open_text_.clear();
  }

  void text_delta(const std::string& text, std::string& out) {
    open_text_ += text;
    event(out, {{"type", "response.output_text.delta"}, {"item_id", open_item_["id"]}, {"output_index", output_.size()},
                {"content_index", 0}, {"delta", text}, {"logprobs", json::array()}});
  }

  void close_item(std::string& out, const std::string& status) {
    if (open_ == Open::none) return;
    const json item_id = open_item_["id"];
    const std::size_t index = output_.size();
    json item;
    if (open_ == Open::reasoning) {
      item = reasoning_item(item_id.get<std::string>(), open_text_, status);
      event(out, {{"type", "response.reasoning_text.done"}, {"item_id", item_id}, {"output_index", index}, {"content_index", 0},
                  {"text", open_text_}});
      event(out, {{"type", "response.content_part.done"}, {"item_id", item_id}, {"output_index", index}, {"content_index", 0},
                  {"part", item["content"][0]}});
    } else if (open_ == Open::message) {
      item = message_item(item_id.get<std::string>(), open_text_, status);
      const json& part = item["content"][0];
      event(out, {{"type", "response.output_text.done"}, {"item_id", item_id}, {"output_index", index}, {"content_index", 0},
                  {"text", open_text_}, {"logprobs", json::array()}});
      event(out, {{"type", "response.content_part.done"}, {"item_id", item_id}, {"output_index", index}, {"content_index", 0},
                  {"part", part}});
    } else {
      item = open_item_;
      item["status"] = "completed";
      event(out, {{"type", "response.function_call_arguments.done"}, {"item_id", item_id}, {"output_index", index},
                  {"name", item["name"]}, {"arguments", item["arguments"]}});
    }
    event(out, {{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}});
    output_.push_back(std::move(item));
    open_ = Open::none;
  }

  std::string model_name_;
  json echo_;
  json conversation_;
  std::shared_ptr<ResponseStore> store_;  // null: store false
  std::string id_;
  std::time_t created_at_;
  // Streaming: the items done so far, the one open and the text held back while it is whitespace.
  int sequence_ = 0;
  json output_ = json::array();
  Open open_ = Open::none;
  json open_item_;
  std::string open_text_;
  std::string held_text_;
};

}  // namespace

std::unique_ptr<ResponseWriter> openai_response_writer(std::string model_name, json echo, json conversation,
                                                       std::shared_ptr<ResponseStore> store) {
  return std::make_unique<OpenAiResponseWriter>(std::move(model_name), std::move(echo), std::move(conversation), std::move(store));
}

}  // namespace inferlab::api
