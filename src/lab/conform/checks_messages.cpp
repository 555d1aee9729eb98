// Conformance checks: Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) as
// Anthropic defines it — the message body, the named stream events in their order, the error
// shape {"type":"error","error":{"type","message"}}, count_tokens, and with --api-key the
// x-api-key header. A server without the route (404 in any shape) skips them all.
#include "lab/conform/probe.h"

namespace inferlab::lab::conform {
namespace {

// What Anthropic's clients send: its version header, and the key as x-api-key (the suite's
// Authorization header goes too, for servers that read only that).
RequestOptions anthropic_headers(const Probe& p, std::optional<std::string> key = std::nullopt) {
  RequestOptions options;
  options.headers = {"anthropic-version: 2023-06-01"};
  if (key || p.has_api_key()) options.headers.push_back("x-api-key: " + key.value_or(p.options().api_key));
  return options;
}

json message_body(const Probe& p, const json& extra = json::object()) {
  json body = {{"model", p.model()}, {"max_tokens", 8}, {"messages", {{{"role", "user"}, {"content", "Tell me about caches."}}}}};
  body.update(extra);
  return body;
}

Answer post_messages(Probe& p, const json& body, const std::string& path = "/v1/messages") {
  Answer a = p.post(path, body, anthropic_headers(p));
  if (a.status == 404 && !(a.is_json_object() && a.parsed.value("type", "") == "error" && a.parsed.contains("error") &&
                           a.parsed["error"].is_object() && a.parsed["error"].value("type", "") == "not_found_error"))
    skip_check("the server has no " + path + " route (404)");
  return a;
}

// Anthropic's error answer: `status`, {"type":"error","error":{"type": `type`, "message": non-empty}}.
void require_anthropic_error(const Answer& a, long status, const std::string& type) {
  if (a.status != status) fail_check(fmt::format("status {} (expected {})", a.status, status));
  if (!a.is_json_object() || a.parsed.value("type", "") != "error" || !a.parsed.contains("error") || !a.parsed["error"].is_object())
    fail_check("not Anthropic's error shape {\"type\":\"error\",\"error\":{\"type\",\"message\"}}");
  const json& e = a.parsed["error"];
  if (!e.contains("message") || !e["message"].is_string() || e["message"].get<std::string>().empty())
    fail_check("error.message is missing or not a non-empty string");
  if (e.value("type", "") != type) fail_check(fmt::format("error.type is {} (Anthropic: \"{}\")", e.contains("type") ? e["type"].dump() : "missing", type));
}

void require_message(const json& m, int max_tokens) {
  if (!m.is_object()) fail_check("the body is not a JSON object");
  require(m.value("type", "") == "message", "type is not \"message\"");
  require(m.value("role", "") == "assistant", "role is not \"assistant\"");
  require(m.contains("id") && m["id"].is_string() && !m["id"].get<std::string>().empty(), "id is missing or not a string");
  require(m.contains("model") && m["model"].is_string(), "model is missing or not a string");
  require(m.contains("content") && m["content"].is_array(), "content is not an array of blocks");
  for (const json& block : m["content"]) {
    const std::string type = block.is_object() ? block.value("type", "") : "";
    if (type == "text") require(block.contains("text") && block["text"].is_string(), "a text block without a string text");
    else if (type == "thinking")  // a thinking model's thoughts: Anthropic's SDKs read both fields
      require(block.contains("thinking") && block["thinking"].is_string() && block.contains("signature") && block["signature"].is_string(),
              "a thinking block without a string thinking and signature");
    else if (type != "tool_use") fail_check(fmt::format("a content block of type {} (text, thinking or tool_use expected)", block.dump()));
  }
  const std::string reason = m.contains("stop_reason") && m["stop_reason"].is_string() ? m["stop_reason"].get<std::string>() : "";
  require(reason == "end_turn" || reason == "max_tokens" || reason == "stop_sequence" || reason == "tool_use",
          fmt::format("stop_reason {} is not end_turn, max_tokens, stop_sequence or tool_use", m.value("stop_reason", json()).dump()));
  require(m.contains("stop_sequence"), "stop_sequence is missing (null when no stop sequence ended it)");
  const json usage = m.value("usage", json());
  require(usage.is_object() && usage.contains("input_tokens") && usage["input_tokens"].is_number_integer() &&
              usage.contains("output_tokens") && usage["output_tokens"].is_number_integer(),
          "usage needs integer input_tokens and output_tokens");
  const int output = usage["output_tokens"].get<int>();
  require(output <= max_tokens, fmt::format("usage.output_tokens {} exceeds max_tokens {}", output, max_tokens));
  if (reason == "max_tokens") require(output == max_tokens, fmt::format("stop_reason max_tokens after {} of {} tokens", output, max_tokens));
}

std::string plain(Probe& p) {
  Answer a = post_messages(p, message_body(p, {{"max_tokens", 8}}));
  require(a.status == 200, fmt::format("status {}", a.status));
  require(a.header("content-type").rfind("application/json", 0) == 0, "content-type is not application/json");
  require_message(a.parsed, 8);
  return fmt::format("stop_reason {}, {} output tokens", a.parsed["stop_reason"].get<std::string>(), a.parsed["usage"]["output_tokens"].get<int>());
}

// The events of an Anthropic stream: (event name, data), reading `event:` and `data:` lines.
std::vector<std::pair<std::string, json>> named_events(const std::string& body) {
  std::vector<std::pair<std::string, json>> events;
  std::size_t at = 0;
  while (at < body.size()) {
    std::size_t end = body.find("\n\n", at);
    if (end == std::string::npos) end = body.size();
    std::string name, data;
    std::size_t line = at;
    while (line < end) {
      std::size_t eol = std::min(body.find('\n', line), end);
      const std::string text = body.substr(line, eol - line);
      if (text.rfind("event:", 0) == 0) name = text.substr(text.size() > 6 && text[6] == ' ' ? 7 : 6);
      else if (text.rfind("data:", 0) == 0) data += text.substr(text.size() > 5 && text[5] == ' ' ? 6 : 5);
      line = eol + 1;
    }
    if (!name.empty() || !data.empty()) events.emplace_back(name, json::parse(data, nullptr, false));
    at = end + 2;
  }
  return events;
}

std::string stream_events(Probe& p) {
  const json body = message_body(p, {{"max_tokens", 8}, {"stream", true}, {"temperature", 0}});
  Stream s = p.stream("/v1/messages", body, anthropic_headers(p));
  if (s.status == 404) skip_check("the server has no /v1/messages route (404)");
  require(s.status == 200, fmt::format("status {}", s.status));
  require(s.header("content-type").rfind("text/event-stream", 0) == 0, "content-type is not text/event-stream");
  const auto events = named_events(s.body);
  require(!events.empty(), "no events");
  std::vector<std::string> order;
  int open = -1, next = 0;
  std::string text;
  for (const auto& [name, data] : events) {
    require(!name.empty(), "an event without an `event:` line (Anthropic names every event)");
    require(data.is_object() && data.value("type", "") == name, fmt::format("event {}: its data's type is not \"{}\"", name, name));
    if (name == "ping") continue;
    order.push_back(name);
    if (name == "content_block_start") {
      require(open < 0 && data.value("index", -1) == next, fmt::format("content_block_start index {} (expected {}, none open)", data.value("index", -1), next));
      open = next;
    } else if (name == "content_block_delta") {
      require(data.value("index", -1) == open, "content_block_delta for a block that is not open");
      if (data["delta"].value("type", "") == "text_delta") text += data["delta"].value("text", "");
    } else if (name == "content_block_stop") {
      require(data.value("index", -1) == open, "content_block_stop for a block that is not open");
      open = -1;
      ++next;
    }
  }
  require(order.front() == "message_start", "the first event is not message_start");
  require(order.back() == "message_stop", "the last event is not message_stop");
  require(order.size() >= 2 && order[order.size() - 2] == "message_delta", "message_delta does not come just before message_stop");
  require(open < 0, "a content block is never stopped");
  const json& delta = events[events.size() - 2].second;
  require(delta.contains("delta") && delta["delta"].contains("stop_reason") && delta.contains("usage") &&
              delta["usage"].contains("output_tokens"),
          "message_delta needs delta.stop_reason and usage.output_tokens");
  // The same request whole: the same text at temperature 0.
  json whole_body = body;
  whole_body.erase("stream");
  Answer whole = post_messages(p, whole_body);
  std::string whole_text;
  if (whole.is_json_object() && whole.parsed.contains("content") && whole.parsed["content"].is_array())
    for (const json& block : whole.parsed["content"])
      if (block.is_object() && block.value("type", "") == "text") whole_text += block.value("text", "");
  require(text == whole_text, fmt::format("the streamed text {} differs from the whole answer's {}", json(text).dump(), json(whole_text).dump()));
  return fmt::format("{} events in order, {} blocks", events.size(), next);
}

// thinking {"type": "disabled"} is Anthropic's way to say no thinking: accepted, and no thinking block.
std::string thinking_disabled(Probe& p) {
  Answer a = post_messages(p, message_body(p, {{"max_tokens", 8}, {"thinking", {{"type", "disabled"}}}}));
  require(a.status == 200, fmt::format("status {} for thinking {{\"type\": \"disabled\"}}", a.status));
  require_message(a.parsed, 8);
  for (const json& block : a.parsed["content"])
    require(block.value("type", "") != "thinking", "a thinking block although thinking was disabled");
  return fmt::format("{} block(s), none thinking", a.parsed["content"].size());
}

std::string missing_max_tokens(Probe& p) {
  json body = message_body(p);
  body.erase("max_tokens");
  Answer a = post_messages(p, body);
  require_anthropic_error(a, 400, "invalid_request_error");
  return "400 invalid_request_error";
}

std::string unknown_model(Probe& p) {
  Answer a = post_messages(p, message_body(p, {{"model", "no-such-model-conform"}}));
  if (a.status == 200) fail_check("200: a request for an unknown model was answered (by the model served)");
  require_anthropic_error(a, 404, "not_found_error");
  return "404 not_found_error";
}

std::string count_tokens(Probe& p) {
  json body = message_body(p);
  Answer created = post_messages(p, body);
  require(created.status == 200, fmt::format("/v1/messages: status {}", created.status));
  body.erase("max_tokens");
  Answer a = post_messages(p, body, "/v1/messages/count_tokens");
  require(a.status == 200, fmt::format("status {}", a.status));
  require(a.is_json_object() && a.parsed.contains("input_tokens") && a.parsed["input_tokens"].is_number_integer(),
          "the body is not {\"input_tokens\": integer}");
  // Anthropic's usage counts the prompt in three parts: input_tokens (not from a cache),
  // cache_read_input_tokens and cache_creation_input_tokens; count_tokens is their sum.
  const json usage = created.parsed.value("usage", json::object());
  long used = 0;
  std::string parts;
  for (const char* key : {"input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}) {
    const json part = usage.is_object() ? usage.value(key, json()) : json();
    if (part.is_null()) continue;
    require(part.is_number_integer(), fmt::format("/v1/messages' usage.{} is not an integer", key));
    used += part.get<long>();
    parts += fmt::format("{}{} {}", parts.empty() ? "" : " + ", key, part.get<long>());
  }
  require(a.parsed["input_tokens"] == used,
          fmt::format("input_tokens {} differs from /v1/messages' prompt of {} ({})", a.parsed["input_tokens"].dump(), used, parts));
  return fmt::format("input_tokens {} = {}", a.parsed["input_tokens"].dump(), parts);
}

std::string x_api_key(Probe& p) {
  if (!p.has_api_key()) skip_check("no --api-key given");
  RequestOptions only_header = anthropic_headers(p);
  only_header.authorization = false;
  Answer a = p.post("/v1/messages", message_body(p, {{"max_tokens", 2}}), only_header);
  if (a.status == 404) skip_check("the server has no /v1/messages route (404)");
  require(a.status == 200, fmt::format("status {} with the key as x-api-key only", a.status));
  RequestOptions wrong = anthropic_headers(p, p.options().api_key + "-wrong");
  wrong.authorization = false;
  Answer b = p.post("/v1/messages", message_body(p, {{"max_tokens", 2}}), wrong);
  require_anthropic_error(b, 401, "authentication_error");
  return "200 with x-api-key, 401 authentication_error with a wrong one";
}

}  // namespace

void add_messages_checks(std::vector<Check>& checks) {
  checks.push_back({"messages.plain", "POST /v1/messages: a message (content blocks, stop_reason, usage) within max_tokens", plain});
  checks.push_back({"messages.stream_events", "a streamed message: named events in Anthropic's order, block indices, the text of the whole answer", stream_events});
  checks.push_back({"messages.thinking_disabled", "thinking {\"type\": \"disabled\"}: a message with no thinking block", thinking_disabled});
  checks.push_back({"messages.missing_max_tokens", "no max_tokens: 400 invalid_request_error in Anthropic's error shape", missing_max_tokens});
  checks.push_back({"messages.unknown_model", "an unknown model: 404 not_found_error in Anthropic's error shape", unknown_model});
  checks.push_back({"messages.count_tokens", "POST /v1/messages/count_tokens: input_tokens equal to the message's prompt (usage's input + cache read + cache creation tokens)", count_tokens});
  checks.push_back({"messages.x_api_key", "with --api-key: the key as x-api-key is accepted, a wrong one is 401 authentication_error", x_api_key});
}

}  // namespace inferlab::lab::conform
