// Parsing Anthropic Messages API requests (see anthropic_request.h).
#include "server/anthropic_request.h"

#include <fmt/format.h>

#include <limits>
#include <map>
#include <set>

#include "server/request_fields.h"

namespace inferlab::api {
namespace {

constexpr std::size_t kMaxStopSequences = 16;

[[noreturn]] void invalid(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

// Anthropic's rule for tool names: ^[a-zA-Z0-9_-]{1,128}$.
bool valid_tool_name(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

// The type of a content block, refusing what is not a block.
std::string block_type(const json& block, const std::string& where, const char* param) {
  if (!block.is_object() || !block.contains("type") || !block["type"].is_string())
    invalid(param, fmt::format("{} must be an object with a string 'type'", where));
  return block["type"].get<std::string>();
}

// A string, or text blocks joined: `system` and a tool_result's content. Any other block (an
// image, a document) is refused by its type: this server reads only text.
std::string text_of(const json& content, const std::string& where, const char* param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) invalid(param, fmt::format("{} must be a string or an array of text blocks, got {}", where, type_of(content)));
  std::string text;
  for (std::size_t j = 0; j < content.size(); ++j) {
    const std::string at = fmt::format("{}[{}]", where, j);
    const std::string type = block_type(content[j], at, param);
    if (type != "text") invalid(param, fmt::format("{} is a '{}' block; this server reads only text blocks here", at, type));
    if (!content[j].contains("text") || !content[j]["text"].is_string()) invalid(param, fmt::format("{} needs a string 'text'", at));
    if (!text.empty()) text += "\n";
    text += content[j]["text"].get<std::string>();
  }
  return text;
}

// Blocks that are Anthropic's but not this server's: refused by name, never skipped silently.
[[noreturn]] void unsupported_block(const std::string& at, const std::string& type) {
  if (type == "redacted_thinking")
    invalid("messages", fmt::format("{} is a 'redacted_thinking' block: its thoughts are encrypted by Anthropic and cannot be "
                                    "read here (give 'thinking' blocks)", at));
  if (type == "thinking")
    invalid("messages", fmt::format("{} is a 'thinking' block; thinking blocks belong to assistant messages", at));
  invalid("messages", fmt::format("{} is a '{}' block; this server reads only text, tool_use (assistant) and tool_result (user) "
                                  "blocks", at, type));
}

// The chat as the template reads it, built message by message.
struct Conversation {
  json messages = json::array();
  std::map<std::string, std::string> tool_names;  // tool_use id -> tool name, for the tool_results after it
};

void add_user(const json& content, std::size_t i, Conversation& chat) {
  const std::string where = fmt::format("messages[{}].content", i);
  if (content.is_string()) {
    chat.messages.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  std::string text;
  bool has_text = false;
  auto flush_text = [&] {
    if (has_text) chat.messages.push_back({{"role", "user"}, {"content", text}});
    text.clear();
    has_text = false;
  };
  for (std::size_t j = 0; j < content.size(); ++j) {
    const json& block = content[j];
    const std::string at = fmt::format("{}[{}]", where, j);
    const std::string type = block_type(block, at, "messages");
    if (type == "text") {
      if (!block.contains("text") || !block["text"].is_string()) invalid("messages", fmt::format("{} needs a string 'text'", at));
      if (has_text) text += "\n";
      text += block["text"].get<std::string>();
      has_text = true;
    } else if (type == "tool_result") {
      const json* id = field(block, "tool_use_id");
      if (!id || !id->is_string()) invalid("messages", fmt::format("{} (tool_result) needs a string 'tool_use_id'", at));
      auto call = chat.tool_names.find(id->get<std::string>());
      if (call == chat.tool_names.end())
        invalid("messages", fmt::format("{}: tool_result's tool_use_id '{}' matches no tool_use block of an earlier assistant "
                                        "message", at, id->get<std::string>()));
      std::string result = field(block, "content") ? text_of(block["content"], at + ".content", "messages") : "";
      // The template has no place for is_error: the model reads it in the result's text.
      if (boolean(block, "is_error", false)) result = "Error: " + result;
      flush_text();
      chat.messages.push_back({{"role", "tool"}, {"tool_call_id", call->first}, {"name", call->second}, {"content", result}});
    } else if (type == "tool_use") {
      invalid("messages", fmt::format("{} is a tool_use block in a user message; tool_use blocks belong to assistant messages", at));
    } else {
      unsupported_block(at, type);
    }
  }
  flush_text();
}

void add_assistant(const json& content, std::size_t i, Conversation& chat) {
  const std::string where = fmt::format("messages[{}].content", i);
  if (content.is_string()) {
    chat.messages.push_back({{"role", "assistant"}, {"content", content}});
    return;
  }
  std::string text;
  std::string thoughts;
  json calls = json::array();
  for (std::size_t j = 0; j < content.size(); ++j) {
    const json& block = content[j];
    const std::string at = fmt::format("{}[{}]", where, j);
    const std::string type = block_type(block, at, "messages");
    if (type == "text") {
      if (!block.contains("text") || !block["text"].is_string()) invalid("messages", fmt::format("{} needs a string 'text'", at));
      text += block["text"].get<std::string>();
    } else if (type == "thinking") {
      // The thoughts go back to the template as the turn's reasoning_content; the signature
      // (empty from this server) is not checked.
      if (!block.contains("thinking") || !block["thinking"].is_string())
        invalid("messages", fmt::format("{} (thinking) needs a string 'thinking'", at));
      if (const json* signature = field(block, "signature"); signature && !signature->is_string())
        invalid("messages", fmt::format("{} (thinking): 'signature' must be a string", at));
      thoughts += block["thinking"].get<std::string>();
    } else if (type == "tool_use") {
      const json* id = field(block, "id");
      const json* name = field(block, "name");
      const json* input = field(block, "input");
      if (!id || !id->is_string() || id->get<std::string>().empty())
        invalid("messages", fmt::format("{} (tool_use) needs a non-empty string 'id'", at));
      if (!name || !name->is_string()) invalid("messages", fmt::format("{} (tool_use) needs a string 'name'", at));
      if (!input || !input->is_object()) invalid("messages", fmt::format("{} (tool_use) needs an object 'input'", at));
      if (!chat.tool_names.emplace(id->get<std::string>(), name->get<std::string>()).second)
        invalid("messages", fmt::format("{}: the tool_use id '{}' is used twice", at, id->get<std::string>()));
      // Arguments as an object: what templates render (chat_request converts OpenAI's strings to this).
      calls.push_back({{"id", *id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", *input}}}});
    } else if (type == "tool_result") {
      invalid("messages", fmt::format("{} is a tool_result block in an assistant message; tool_result blocks belong to user "
                                      "messages", at));
    } else {
      unsupported_block(at, type);
    }
  }
  json message = {{"role", "assistant"}, {"content", text}};
  if (!thoughts.empty()) message["reasoning_content"] = std::move(thoughts);
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  chat.messages.push_back(std::move(message));
}

// `system` and `messages` as the template's chat.
json conversation(const json& body) {
  Conversation chat;
  if (const json* system = field(body, "system")) {
    std::string text = text_of(*system, "system", "system");
    if (!text.empty()) chat.messages.push_back({{"role", "system"}, {"content", text}});
  }
  const json* messages = field(body, "messages");
  if (!messages) invalid("messages", "'messages' is required");
  if (!messages->is_array()) invalid("messages", fmt::format("'messages' must be an array, got {}", type_of(*messages)));
  if (messages->empty()) invalid("messages", "'messages' must contain at least one message");
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    if (!message.is_object()) invalid("messages", fmt::format("messages[{}] must be an object, got {}", i, type_of(message)));
    const json* role = field(message, "role");
    if (!role || !role->is_string()) invalid("messages", fmt::format("messages[{}] needs a string 'role'", i));
    const std::string r = role->get<std::string>();
    const json* content = field(message, "content");
    if (!content) invalid("messages", fmt::format("messages[{}] ({}) needs 'content'", i, r));
    if (!content->is_string() && !content->is_array())
      invalid("messages", fmt::format("messages[{}].content must be a string or an array of content blocks, got {}", i, type_of(*content)));
    if (content->is_string() ? content->get_ref<const std::string&>().empty() : content->empty())
      invalid("messages", fmt::format("messages[{}].content must not be empty", i));
    if (r == "user") {
      add_user(*content, i, chat);
    } else if (r == "assistant") {
      add_assistant(*content, i, chat);
    } else if (r == "system") {
      chat.messages.push_back({{"role", "system"}, {"content", text_of(*content, fmt::format("messages[{}].content", i), "messages")}});
    } else {
      invalid("messages", fmt::format("messages[{}].role '{}' is not one of user, assistant, system", i, r));
    }
  }
  // Every role was checked to be a string above.
  if (const std::string last = (*messages).back()["role"].get<std::string>(); last != "user")
    invalid("messages", fmt::format("the last message is from the {}; continuing (prefilling) it is not supported: end with a "
                                    "user message", last));
  return std::move(chat.messages);
}

// Anthropic's custom tools: the shared definitions, and the template's `tools` (OpenAI's layout,
// so the template renders them exactly as it does for /v1/chat/completions).
struct Tools {
  std::vector<ToolDefinition> definitions;
  json for_template = json::array();
};

Tools parse_tools(const json& body) {
  Tools out;
  const json* tools = field(body, "tools");
  if (!tools) return out;
  if (!tools->is_array()) invalid("tools", fmt::format("'tools' must be an array, got {}", type_of(*tools)));
  std::set<std::string> names;
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const json& tool = (*tools)[i];
    if (!tool.is_object()) invalid("tools", fmt::format("tools[{}] must be an object", i));
    if (const json* type = field(tool, "type"); type && *type != "custom")
      invalid("tools", fmt::format("tools[{}] has type {}: Anthropic's server tools are not supported here; give custom tools "
                                   "(name, description, input_schema)", i, type->dump()));
    const json* name = field(tool, "name");
    if (!name || !name->is_string() || !valid_tool_name(name->get<std::string>()))
      invalid("tools", fmt::format("tools[{}].name must be 1 to 128 letters, digits, '_' or '-'", i));
    ToolDefinition def;
    def.name = name->get<std::string>();
    if (!names.insert(def.name).second) invalid("tools", fmt::format("tools[{}]: the tool name '{}' is used twice", i, def.name));
    const json* schema = field(tool, "input_schema");
    if (!schema || !schema->is_object()) invalid("tools", fmt::format("tools[{}] needs 'input_schema', a JSON Schema object", i));
    if (const json* type = field(*schema, "type"); type && *type != "object")
      invalid("tools", fmt::format("tools[{}].input_schema must have type 'object', got {}", i, type->dump()));
    def.parameters = *schema;
    def.strict = boolean(tool, "strict", false);
    // OpenAI's order (name, description, parameters): the template prints the keys as given.
    json function = {{"name", def.name}};
    if (const json* description = field(tool, "description")) {
      if (!description->is_string()) invalid("tools", fmt::format("tools[{}].description must be a string", i));
      function["description"] = *description;
    }
    function["parameters"] = *schema;
    out.for_template.push_back({{"type", "function"}, {"function", std::move(function)}});
    out.definitions.push_back(std::move(def));
  }
  return out;
}

// tool_choice: auto / any / tool {name} / none onto the shared modes (any: required, tool: named).
ToolChoice parse_tool_choice(const json& body, const Tools& tools) {
  ToolChoice out;
  const json* choice = field(body, "tool_choice");
  if (!choice) return out;
  if (!choice->is_object() || !choice->contains("type") || !(*choice)["type"].is_string())
    invalid("tool_choice", "'tool_choice' must be an object with a 'type': auto, any, tool or none");
  const std::string type = (*choice)["type"].get<std::string>();
  if (type == "auto") out.mode = ToolChoiceMode::automatic;
  else if (type == "any") out.mode = ToolChoiceMode::required;
  else if (type == "none") out.mode = ToolChoiceMode::none;
  else if (type == "tool") out.mode = ToolChoiceMode::named;
  else invalid("tool_choice", fmt::format("tool_choice type '{}' is not one of auto, any, tool, none", type));
  if (out.mode == ToolChoiceMode::named) {
    const json* name = field(*choice, "name");
    if (!name || !name->is_string()) invalid("tool_choice", "tool_choice {\"type\": \"tool\"} needs the tool's 'name'");
    out.name = name->get<std::string>();
    bool known = false;
    for (const auto& def : tools.definitions) known = known || def.name == out.name;
    if (!known) invalid("tool_choice", fmt::format("tool_choice names the tool '{}', which is not among 'tools'", out.name));
  }
  if ((out.mode == ToolChoiceMode::required || out.mode == ToolChoiceMode::named) && tools.definitions.empty())
    invalid("tool_choice", fmt::format("tool_choice '{}' needs 'tools'", type));
  out.parallel = !boolean(*choice, "disable_parallel_tool_use", false);
  return out;
}

// `thinking` as the chat template's switch: disabled -> enable_thinking false, enabled / adaptive ->
// true, left out -> the template's default (Qwen3's thinks). budget_tokens is checked by Anthropic's
// rules (at least 1024, less than max_tokens) but not enforced: the thoughts end when the model
// ends them, and max_tokens bounds them with the answer. nullopt: not given.
std::optional<bool> parse_thinking(const json& body, std::optional<int64_t> max_tokens) {
  const json* thinking = field(body, "thinking");
  if (!thinking) return std::nullopt;
  const json* type = thinking->is_object() ? field(*thinking, "type") : nullptr;
  if (!type || !type->is_string())
    invalid("thinking", "'thinking' must be an object with a 'type': enabled, adaptive or disabled");
  if (*type == "disabled") return false;
  if (*type != "enabled" && *type != "adaptive")
    invalid("thinking", fmt::format("thinking type {} is not supported (enabled, adaptive or disabled)", type->dump()));
  if (const json* display = field(*thinking, "display"); display && *display != "summarized")
    invalid("thinking", fmt::format("thinking.display {} is not supported: the thinking is returned whole", display->dump()));
  if (*type == "enabled") {
    const json* budget = field(*thinking, "budget_tokens");
    if (!budget || !budget->is_number_integer())
      invalid("thinking", "thinking {\"type\": \"enabled\"} needs an integer 'budget_tokens'");
    const int64_t tokens = budget->get<int64_t>();
    if (tokens < 1024) invalid("thinking", fmt::format("thinking.budget_tokens must be at least 1024, got {}", tokens));
    if (max_tokens && tokens >= *max_tokens)
      invalid("thinking", fmt::format("thinking.budget_tokens ({}) must be less than max_tokens ({})", tokens, *max_tokens));
  }
  return true;
}

// Fields that ask for what this server does not do: refused by name rather than ignored.
void refuse_unsupported(const json& body) {
  for (const char* name : {"container", "mcp_servers", "context_management"})
    if (field(body, name)) invalid(name, fmt::format("'{}' is not supported by this server", name));
  if (const json* config = field(body, "output_config")) {
    if (!config->is_object()) invalid("output_config", "'output_config' must be an object");
    if (field(*config, "format"))
      invalid("output_config", "'output_config.format' (structured outputs) is not supported on /v1/messages; use "
                               "/v1/chat/completions with response_format");
  }
  if (const json* metadata = field(body, "metadata"); metadata && !metadata->is_object())
    invalid("metadata", fmt::format("'metadata' must be an object, got {}", type_of(*metadata)));
}

// Everything both routes share: the model, the chat and its tools. `generate`: /v1/messages (the
// sampling fields, tool_choice's grammar and the server's limits), else count_tokens.
ParsedRequest parse(const json& body, const ModelContext& model, bool generate, std::optional<int64_t>& max_tokens) {
  if (!field(body, "model")) invalid("model", "'model' is required");
  check_model(body, model);
  if (generate) check_body_limits(body, model.limits, true);
  refuse_unsupported(body);
  ParsedRequest out;
  out.prompt_field = "messages";
  if (generate) {
    if (!field(body, "max_tokens")) invalid("max_tokens", "'max_tokens' is required");
    max_tokens = integer(body, "max_tokens", 1, std::numeric_limits<int64_t>::max());
    SamplingParams& s = out.sampling;
    s.temperature = static_cast<float>(number(body, "temperature", 1.0, 0.0, 1.0));
    s.top_p = static_cast<float>(number(body, "top_p", 1.0, 0.0, 1.0));
    if (s.top_p <= 0.0f) invalid("top_p", fmt::format("'top_p' must be greater than 0, got {}", s.top_p));
    s.top_k = static_cast<int>(integer(body, "top_k", 0, std::numeric_limits<int>::max()).value_or(0));
    if (const json* stops = field(body, "stop_sequences")) {
      if (!stops->is_array()) invalid("stop_sequences", fmt::format("'stop_sequences' must be an array of strings, got {}", type_of(*stops)));
      if (stops->size() > kMaxStopSequences)
        invalid("stop_sequences", fmt::format("'stop_sequences' may hold at most {} strings here, got {}", kMaxStopSequences, stops->size()));
      for (const json& stop : *stops) {
        if (!stop.is_string() || stop.get<std::string>().empty())
          invalid("stop_sequences", "'stop_sequences' must hold non-empty strings");
        out.stop.push_back(stop.get<std::string>());
      }
    }
    out.stream = boolean(body, "stream", false);
    parse_test_forced_output(body, model, out.sampling);
  }
  const std::optional<bool> thinking = parse_thinking(body, max_tokens);
  const json chat = conversation(body);
  const Tools tools = parse_tools(body);
  const ToolChoice choice = parse_tool_choice(body, tools);
  if (generate) apply_tool_choice(choice, tools.definitions, model, out);
  json extra = json::object();
  if (!tools.definitions.empty()) extra["tools"] = tools.for_template;
  if (thinking) extra["enable_thinking"] = *thinking;
  add_chat_prompt(chat, extra, model, generate, out);
  return out;
}

}  // namespace

ParsedRequest parse_messages_request(const json& body, const ModelContext& model) {
  std::optional<int64_t> max_tokens;
  ParsedRequest out = parse(body, model, true, max_tokens);
  fit_max_tokens(out, max_tokens, model, true);
  return out;
}

std::size_t count_messages_tokens(const json& body, const ModelContext& model) {
  std::optional<int64_t> max_tokens;
  return parse(body, model, false, max_tokens).prompts.front().size();
}

}  // namespace inferlab::api
