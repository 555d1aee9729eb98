// Tool-call format selection, shared helpers and the streaming splitter (tool_call_format.h).
#include "server/tool_call_format.h"

#include <algorithm>
#include <random>

#include "inferlab/grammar/json_schema.h"

namespace inferlab::api {

std::unique_ptr<ToolCallFormat> tool_call_format_for(const std::string& chat_template) {
  if (chat_template.find("<tool_call>") != std::string::npos) return make_hermes_format();
  if (chat_template.find("<|python_tag|>") != std::string::npos || chat_template.find("ipython") != std::string::npos)
    return make_llama3_format();
  return make_hermes_format();
}

std::string new_tool_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("call_{:016x}", rng());
}

std::optional<ToolCall> tool_call_from_json(const json& object, const char* arguments_key) {
  if (!object.is_object() || !object.contains("name") || !object["name"].is_string()) return std::nullopt;
  ToolCall call;
  call.id = new_tool_call_id();
  call.name = object["name"].get<std::string>();
  const json* args = nullptr;
  for (const char* key : {arguments_key, "arguments", "parameters"})
    if (object.contains(key)) {
      args = &object[key];
      break;
    }
  // A tool without parameters still gets "{}": clients parse the arguments as JSON.
  if (!args || args->is_null()) call.arguments = "{}";
  else if (args->is_string()) call.arguments = args->get<std::string>().empty() ? "{}" : args->get<std::string>();
  else call.arguments = dump(*args);
  return call;
}

std::string tool_arguments_rules(const ToolDefinition& tool, const std::string& rule, const GrammarLimits& limits) {
  json schema = tool.parameters;
  // No parameters: the arguments are {} (an empty object, not any object).
  if (schema.is_object() && schema.empty())
    schema = {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}};
  return json_schema_rules(schema, rule, limits);
}

void ToolCallStream::emit(std::span<const ToolCall> calls, json& deltas) {
  // A call is announced only once it is whole: a header sent earlier could not be taken back if
  // max_tokens then cut the call short, and clients would finish it with arguments that are not
  // JSON. Header and arguments still go as two entries, as OpenAI streams them.
  for (const ToolCall& call : calls) {
    const std::size_t i = ids_.size();
    ids_.push_back(call.id);
    deltas.push_back({{"index", i}, {"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", ""}}}});
    deltas.push_back({{"index", i}, {"function", {{"arguments", call.arguments}}}});
  }
}

std::string ToolCallStream::feed(const std::string& text, json& deltas) {
  text_ += text;
  std::string shown;
  const std::size_t end = format_.content_prefix(text_, content_sent_);
  if (end > content_sent_) {
    shown = text_.substr(content_sent_, end - content_sent_);
    content_sent_ = end;
  }
  if (!stuck_) {
    ToolCallFormat::FinishedCalls found = format_.finished_calls(text_, std::max(calls_end_, content_sent_));
    if (!found.calls.empty()) calls_end_ = found.end;
    stuck_ = found.stuck;
    emit(found.calls, deltas);
  }
  return shown;
}

std::string ToolCallStream::finish(json& deltas, std::vector<ToolCall>& calls) {
  ParsedOutput parsed = format_.parse(text_);
  calls = parsed.calls;
  if (calls.empty()) {  // no call after all: everything held back is content
    std::string rest = text_.substr(std::min(content_sent_, text_.size()));
    content_sent_ = text_.size();
    return rest;
  }
  // Calls streamed so far keep their ids; the others are announced now.
  for (std::size_t i = 0; i < calls.size() && i < ids_.size(); ++i) calls[i].id = ids_[i];
  emit(std::span<const ToolCall>(calls).subspan(std::min(ids_.size(), calls.size())), deltas);
  // Content beyond what was sent (text the format keeps outside the calls).
  std::string rest;
  if (parsed.content.size() > content_sent_) rest = parsed.content.substr(content_sent_);
  return rest;
}

}  // namespace inferlab::api
