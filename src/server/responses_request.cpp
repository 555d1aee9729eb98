// The Responses request as the chat request it amounts to (see responses_request.h).
#include "server/responses_request.h"

#include <fmt/format.h>

#include <charconv>
#include <set>

namespace inferlab::api {
namespace {

template <typename... Args>
[[noreturn]] void bad(const std::string& param, fmt::format_string<Args...> format, Args&&... args) {
  throw ApiError(400, fmt::format(format, std::forward<Args>(args)...), param);
}

const json* field(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string string_field(const json& object, const char* name, const std::string& param, const std::string& where) {
  const json* v = field(object, name);
  if (!v || !v->is_string()) bad(param, "{} needs a string '{}'", where, name);
  return v->get<std::string>();
}

// A message's or a function_call_output's content: a string, or text parts (input_text for what
// the user side sends, output_text / refusal for what an assistant said).
std::string content_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad("input", "{}.content must be a string or an array of content parts", where);
  std::string text;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad("input", "{}.content[{}] must be an object with a string 'type'", where, i);
    const std::string type = part["type"].get<std::string>();
    const char* key = type == "refusal" ? "refusal" : "text";
    if (type != "input_text" && type != "output_text" && type != "refusal")
      bad("input", "{}.content[{}] is an '{}' part; this server accepts only text (input_text, output_text)", where, i, type);
    text += string_field(part, key, "input", fmt::format("{}.content[{}]", where, i));
  }
  return text;
}

// A reasoning item's thoughts: its reasoning_text parts (what this server and vLLM write). A summary
// is not the thoughts, and encrypted_content is OpenAI's own: neither is read.
std::string reasoning_text(const json& item, const std::string& where) {
  if (const json* summary = field(item, "summary"); summary && !summary->is_array())
    bad("input", "{}.summary must be an array", where);
  const json* content = field(item, "content");
  if (!content) return "";
  if (!content->is_array()) bad("input", "{}.content must be an array of reasoning_text parts", where);
  std::string text;
  for (std::size_t i = 0; i < content->size(); ++i) {
    const json& part = (*content)[i];
    const std::string at = fmt::format("{}.content[{}]", where, i);
    if (!part.is_object() || part.value("type", json()) != "reasoning_text")
      bad("input", "{} must be a reasoning_text part", at);
    text += string_field(part, "text", "input", at);
  }
  return text;
}

// The conversation's items as chat messages: a message as itself (developer as system), a run of
// function_call items as one assistant turn's tool_calls, a function_call_output as a tool message
// answering a call made earlier, a reasoning item's thoughts as the reasoning_content of the
// assistant turn after it (a thinking template renders them). `first_new` is where the request's
// own items start (errors count from there; earlier ones came from the store).
json items_to_messages(const json& items, std::size_t first_new, const std::string& instructions) {
  json messages = json::array();
  if (!instructions.empty()) messages.push_back({{"role", "system"}, {"content", instructions}});
  std::set<std::string> call_ids;
  std::string thoughts;  // of reasoning items not yet given to an assistant turn
  // Thoughts with no assistant words or calls after them are a turn of their own.
  auto flush_thoughts = [&] {
    if (thoughts.empty()) return;
    messages.push_back({{"role", "assistant"}, {"content", ""}, {"reasoning_content", std::move(thoughts)}});
    thoughts.clear();
  };
  for (std::size_t i = 0; i < items.size(); ++i) {
    const json& item = items[i];
    const std::string where = i >= first_new ? fmt::format("input[{}]", i - first_new) : fmt::format("the stored item {}", i);
    if (!item.is_object()) bad("input", "{} must be an object", where);
    std::string type = "message";  // an EasyInputMessage has a role and no type
    if (const json* t = field(item, "type")) {
      if (!t->is_string()) bad("input", "{}.type must be a string", where);
      type = t->get<std::string>();
    }
    if (type == "message") {
      const std::string role = string_field(item, "role", "input", where);
      if (role != "user" && role != "system" && role != "developer" && role != "assistant")
        bad("input", "{}.role '{}' is not one of user, system, developer, assistant", where, role);
      const json* content = field(item, "content");
      if (!content) bad("input", "{} needs 'content'", where);
      json message = {{"role", role == "developer" ? "system" : role}, {"content", content_text(*content, where)}};
      if (role == "assistant" && !thoughts.empty()) {
        message["reasoning_content"] = std::move(thoughts);
        thoughts.clear();
      }
      flush_thoughts();
      messages.push_back(std::move(message));
    } else if (type == "function_call") {
      const std::string call_id = string_field(item, "call_id", "input", where);
      if (call_id.empty()) bad("input", "{}.call_id must not be empty", where);
      json call = {{"id", call_id}, {"type", "function"},
                   {"function", {{"name", string_field(item, "name", "input", where)},
                                 {"arguments", string_field(item, "arguments", "input", where)}}}};
      call_ids.insert(call_id);
      // Calls right after an assistant's words (or each other) are that same assistant turn;
      // thoughts before them open a turn of their own.
      if (messages.empty() || messages.back()["role"] != "assistant" || !thoughts.empty()) {
        messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array()}});
        if (!thoughts.empty()) messages.back()["reasoning_content"] = std::move(thoughts);
        thoughts.clear();
      }
      json& turn = messages.back();
      if (!turn.contains("tool_calls")) turn["tool_calls"] = json::array();
      turn["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      const std::string call_id = string_field(item, "call_id", "input", where);
      if (!call_ids.count(call_id))
        bad("input", "{} is the output of call_id '{}', but no function_call item before it has that call_id", where, call_id);
      const json* output = field(item, "output");
      if (!output) bad("input", "{} needs 'output'", where);
      flush_thoughts();
      messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", content_text(*output, where + ".output")}});
    } else if (type == "reasoning") {
      thoughts += reasoning_text(item, where);
    } else {
      bad("input", "{} has type '{}'; this server accepts message, function_call, function_call_output and reasoning items",
          where, type);
    }
  }
  flush_thoughts();
  return messages;
}

// Function tools in the chat layout; any other tool type (the hosted ones) is refused by name.
json chat_tools(const json& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be an array");
  json out = json::array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const json& tool = tools[i];
    if (!tool.is_object() || !tool.contains("type") || !tool["type"].is_string())
      bad("tools", "tools[{}] must be an object with a string 'type'", i);
    const std::string type = tool["type"].get<std::string>();
    if (type != "function")
      bad("tools", "tools[{}] has type '{}'; this server runs only function tools (the hosted tools are OpenAI's)", i, type);
    json function = {{"name", string_field(tool, "name", "tools", fmt::format("tools[{}]", i))}};
    for (const char* key : {"description", "parameters", "strict"})
      if (const json* v = field(tool, key)) function[key] = *v;
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

json chat_tool_choice(const json& choice) {
  if (choice.is_string()) return choice;  // none / auto / required: the chat parser checks which
  if (choice.is_object() && choice.contains("type") && choice["type"].is_string()) {
    const std::string type = choice["type"].get<std::string>();
    if (type == "function") return {{"type", "function"}, {"function", {{"name", string_field(choice, "name", "tool_choice", "tool_choice")}}}};
    bad("tool_choice", "tool_choice of type '{}' is not supported (none, auto, required or {{\"type\": \"function\", \"name\": ...}})", type);
  }
  bad("tool_choice", "tool_choice must be none, auto, required or {{\"type\": \"function\", \"name\": ...}}");
}

json chat_response_format(const json& text) {
  if (!text.is_object()) bad("text", "'text' must be an object");
  const json* format = field(text, "format");
  if (!format) return nullptr;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
    bad("text.format", "'text.format' must be an object with a string 'type'");
  const std::string type = (*format)["type"].get<std::string>();
  if (type == "text" || type == "json_object") return {{"type", type}};
  if (type != "json_schema") bad("text.format", "text.format type '{}' is not one of text, json_object, json_schema", type);
  const json* schema = field(*format, "schema");
  if (!schema || !(schema->is_object() || schema->is_boolean()))
    bad("text.format", "text.format json_schema needs a 'schema' (a JSON Schema object)");
  json spec = {{"name", format->value("name", "response")}, {"schema", *schema}};
  if (const json* strict = field(*format, "strict")) spec["strict"] = *strict;
  return {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
}

// `reasoning`: {effort, summary}. The effort goes to the template (responses_to_chat); no
// summary is written (the thoughts come whole, as reasoning_text), so `summary` is only checked.
void check_reasoning(const json& reasoning) {
  if (!reasoning.is_object()) bad("reasoning", "'reasoning' must be an object");
  if (const json* effort = field(reasoning, "effort")) {
    static const std::set<std::string> efforts = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    if (!effort->is_string() || !efforts.count(effort->get<std::string>()))
      bad("reasoning.effort", "reasoning.effort must be one of none, minimal, low, medium, high, xhigh, max, got {}", effort->dump());
  }
  for (const char* key : {"summary", "generate_summary"})
    if (const json* summary = field(reasoning, key);
        summary && *summary != "auto" && *summary != "concise" && *summary != "detailed")
      bad("reasoning.summary", "reasoning.{} must be one of auto, concise, detailed, got {}", key, summary->dump());
}

// What the chat parser names, said as the Responses field it came from.
std::string responses_param(const std::string& chat_param) {
  if (chat_param == "messages") return "input";
  if (chat_param == "response_format") return "text.format";
  if (chat_param == "max_completion_tokens" || chat_param == "max_tokens") return "max_output_tokens";
  if (chat_param == "reasoning_effort") return "reasoning.effort";
  return chat_param;
}

}  // namespace

json responses_to_chat(const json& body, const StoredLookup& lookup, json& conversation) {
  // Refused by name: what would change the answer in a way this server does not do.
  for (const char* name : {"background", "conversation", "prompt", "max_tool_calls"})
    if (const json* v = field(body, name); v && *v != false)
      bad(name, "'{}' is not supported by this server", name);
  if (const json* top = field(body, "top_logprobs"); top && *top != 0) bad("top_logprobs", "'top_logprobs' is not supported");
  if (const json* truncation = field(body, "truncation"); truncation && *truncation != "disabled")
    bad("truncation", "truncation {} is not supported (only \"disabled\": a prompt over the context is a 400)", truncation->dump());
  if (const json* include = field(body, "include")) {
    if (!include->is_array()) bad("include", "'include' must be an array");
    for (const json& what : *include)
      if (what != "reasoning.encrypted_content")  // reasoning items carry their thoughts in plain text, none encrypted
        bad("include", "include {} is not supported", what.dump());
  }
  if (const json* metadata = field(body, "metadata")) {
    if (!metadata->is_object() || metadata->size() > 16) bad("metadata", "'metadata' must be an object of at most 16 keys");
    for (const auto& [key, value] : metadata->items())
      if (!value.is_string() || key.size() > 64 || value.get<std::string>().size() > 512)
        bad("metadata", "'metadata' values must be strings (keys up to 64 characters, values up to 512)");
  }
  for (const char* name : {"store", "stream", "parallel_tool_calls"})
    if (const json* v = field(body, name); v && !v->is_boolean()) bad(name, "'{}' must be a boolean", name);
  const json* reasoning = field(body, "reasoning");
  if (reasoning) check_reasoning(*reasoning);

  std::string instructions;
  if (const json* v = field(body, "instructions")) {
    if (!v->is_string()) bad("instructions", "'instructions' must be a string (a list of input items is not supported here)");
    instructions = v->get<std::string>();
  }

  conversation = json::array();
  if (const json* previous = field(body, "previous_response_id")) {
    if (!previous->is_string()) bad("previous_response_id", "'previous_response_id' must be a string");
    auto stored = lookup ? lookup(previous->get<std::string>()) : std::nullopt;
    if (!stored)
      throw ApiError(404, fmt::format("Previous response with id '{}' not found.", previous->get<std::string>()),
                     "previous_response_id", "previous_response_not_found");
    conversation = stored->conversation;
  }
  const std::size_t first_new = conversation.size();
  const json* input = field(body, "input");
  if (!input) bad("input", "'input' is required");
  if (input->is_string()) {
    if (input->get<std::string>().empty()) bad("input", "'input' must not be empty");
    conversation.push_back({{"type", "message"}, {"role", "user"},
                            {"content", json::array({{{"type", "input_text"}, {"text", *input}}})}});
  } else if (input->is_array()) {
    if (input->empty()) bad("input", "'input' must contain at least one item");
    for (const json& item : *input) conversation.push_back(item);
  } else {
    bad("input", "'input' must be a string or an array of input items");
  }

  json chat = {{"messages", items_to_messages(conversation, first_new, instructions)}};
  for (const char* name : {"model", "temperature", "top_p", "stream", "parallel_tool_calls"})
    if (const json* v = field(body, name)) chat[name] = *v;
  if (const json* v = field(body, "max_output_tokens")) chat["max_completion_tokens"] = *v;
  if (const json* v = field(body, "tools")) chat["tools"] = chat_tools(*v);
  if (const json* v = field(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*v);
  if (const json* v = field(body, "text"))
    if (json format = chat_response_format(*v); !format.is_null()) chat["response_format"] = std::move(format);
  // The effort as chat's reasoning_effort, which the chat parser gives the template as it takes it
  // (reasoning_effort.h: gpt-oss's Reasoning line, or Qwen3's thinking off for none / minimal).
  if (const json* effort = reasoning ? field(*reasoning, "effort") : nullptr) chat["reasoning_effort"] = *effort;
  if (const json* v = field(body, "test_forced_output")) chat["test_forced_output"] = *v;  // --test-hooks
  return chat;
}

ResponsesRequest parse_responses_request(const json& body, const ModelContext& model, const StoredLookup& lookup) {
  ResponsesRequest out;
  json chat = responses_to_chat(body, lookup, out.conversation);
  try {
    out.parsed = parse_chat_request(chat, model);
  } catch (ApiError& e) {
    e.param = responses_param(e.param);
    throw;
  }
  out.store = body.value("store", true);
  auto given = [&](const char* name, json fallback) {
    const json* v = field(body, name);
    return v ? *v : fallback;
  };
  json reasoning_echo = {{"effort", nullptr}, {"summary", nullptr}};  // as asked, over OpenAI's defaults
  if (const json* reasoning = field(body, "reasoning"))
    for (const auto& [key, value] : reasoning->items()) reasoning_echo[key] = value;
  out.echo = {
      {"instructions", given("instructions", nullptr)},
      {"tools", given("tools", json::array())},
      {"tool_choice", given("tool_choice", "auto")},
      {"temperature", given("temperature", 1.0)},
      {"top_p", given("top_p", 1.0)},
      {"text", given("text", {{"format", {{"type", "text"}}}})},
      {"parallel_tool_calls", given("parallel_tool_calls", true)},
      {"previous_response_id", given("previous_response_id", nullptr)},
      {"metadata", given("metadata", json::object())},
      {"max_output_tokens", given("max_output_tokens", nullptr)},
      {"reasoning", reasoning_echo},
      {"truncation", "disabled"},
      {"store", out.store},
      {"background", false},
      {"user", given("user", nullptr)},
      {"top_logprobs", 0},
      {"service_tier", "default"},
  };
  return out;
}

InputItemsQuery parse_input_items_query(const QueryParams& query) {
  auto last = [&](std::string_view name) -> std::optional<std::string> {
    std::optional<std::string> value;
    for (const auto& [key, given] : query)
      if (key == name) value = given;
    return value;
  };
  InputItemsQuery out;
  if (auto text = last("limit")) {
    int limit = 0;
    auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), limit);
    if (error != std::errc() || end != text->data() + text->size() || limit < 1 || limit > 100)
      throw ApiError(400, fmt::format("limit must be an integer from 1 to 100, got '{}'", *text), "limit");
    out.limit = limit;
  }
  const std::string order = last("order").value_or("desc");
  if (order != "asc" && order != "desc") throw ApiError(400, fmt::format("order must be asc or desc, got '{}'", order), "order");
  out.ascending = order == "asc";
  for (const auto& [key, what] : query)
    if ((key == "include" || key == "include[]") && what != "reasoning.encrypted_content")
      throw ApiError(400, fmt::format("include '{}' is not supported", what), "include");
  out.after = last("after");
  out.before = last("before");
  return out;
}

}  // namespace inferlab::api
