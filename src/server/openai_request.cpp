// Parsing and validating OpenAI requests, and every request limit (see openai_request.h).
#include "server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <fmt/format.h>
#include <limits>

#include "inferlab/grammar/json_schema.h"
#include "inferlab/grammar/regex.h"
#include "inferlab/util/error.h"
#include "server/harmony.h"
#include "server/reasoning_effort.h"
#include "server/request_fields.h"

namespace inferlab::api {
namespace {

constexpr int kMaxStops = 16;
constexpr int kMaxTopLogprobs = 20;

// GBNF text compiled for the model; a schema keyword we cannot enforce or a bad grammar is a 400
// naming it, never an answer without the constraint.
std::shared_ptr<CompiledGrammar> compile(const ModelContext& model, const std::string& param,
                                         const std::function<std::string()>& gbnf) {
  try {
    return model.text->compile_grammar(gbnf(), model.limits.grammar);
  } catch (const UnsupportedSchemaError& e) {
    throw ApiError(400, fmt::format("'{}': {}", param, e.what()), param, "unsupported_schema_keyword");
  } catch (const GrammarError& e) {
    throw ApiError(400, fmt::format("'{}': {}", param, e.what()), param, "invalid_grammar");
  }
}

// response_format (json_object / json_schema), grammar and regex: at most one of them.
void parse_constraint(const json& body, const ModelContext& model, ParsedRequest& out) {
  std::vector<std::string> given;
  if (const json* format = field(body, "response_format")) {
    if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
      bad("response_format", "'response_format' must be an object with a string 'type'");
    const std::string type = (*format)["type"].get<std::string>();
    if (type == "json_object") {
      out.grammar = compile(model, "response_format", [] { return json_object_gbnf(); });
      given.push_back("response_format");
    } else if (type == "json_schema") {
      const json* spec = field(*format, "json_schema");
      if (!spec || !spec->is_object()) bad("response_format", "response_format json_schema needs a 'json_schema' object");
      const json* schema = field(*spec, "schema");
      if (!schema || !(schema->is_object() || schema->is_boolean()))
        bad("response_format", "response_format.json_schema needs a 'schema' (a JSON Schema object)");
      out.grammar = compile(model, "response_format", [&] { return json_schema_to_gbnf(*schema, model.limits.grammar); });
      given.push_back("response_format");
    } else if (type != "text") {
      bad("response_format", "response_format type '{}' is not supported (text, json_object, json_schema)", type);
    }
  }
  if (const json* grammar = field(body, "grammar")) {
    if (!grammar->is_string()) bad("grammar", "'grammar' must be a string of GBNF rules, got {}", type_of(*grammar));
    out.grammar = compile(model, "grammar", [&] { return grammar->get<std::string>(); });
    given.push_back("grammar");
  }
  if (const json* regex = field(body, "regex")) {
    if (!regex->is_string()) bad("regex", "'regex' must be a string, got {}", type_of(*regex));
    out.grammar = compile(model, "regex", [&] { return regex_to_gbnf(regex->get<std::string>(), model.limits.grammar); });
    given.push_back("regex");
  }
  if (given.size() > 1) bad(given[1], "give only one of response_format (json_object / json_schema), grammar and regex");
}

// tools, tool_choice, parallel_tool_calls: which tools, whether calls are forced, and how.
std::vector<ToolDefinition> parse_tools(const json& tools) {
  std::vector<ToolDefinition> out;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const json& tool = tools[i];
    if (!tool.is_object() || tool.value("type", "") != "function" || !tool.contains("function") || !tool["function"].is_object())
      bad("tools", "tools[{}] must be {{\"type\": \"function\", \"function\": {{...}}}}", i);
    const json& f = tool["function"];
    ToolDefinition def;
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      bad("tools", "tools[{}].function needs a non-empty string 'name'", i);
    def.name = f["name"].get<std::string>();
    for (char c : def.name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
        bad("tools", "tools[{}].function.name '{}' may hold only letters, digits, '_', '-' and '.'", i, def.name);
    if (const json* parameters = field(f, "parameters")) {
      if (!parameters->is_object()) bad("tools", "tools[{}].function.parameters must be a JSON Schema object", i);
      def.parameters = *parameters;
    }
    if (const json* strict = field(f, "strict")) {
      if (!strict->is_boolean()) bad("tools", "tools[{}].function.strict must be a boolean", i);
      def.strict = strict->get<bool>();
    }
    out.push_back(std::move(def));
  }
  return out;
}

void parse_tool_choice(const json& body, const ModelContext& model, const std::vector<ToolDefinition>& tools,
                       ParsedRequest& out) {
  std::string choice = "auto";
  std::string named;
  if (const json* c = field(body, "tool_choice")) {
    if (c->is_string()) {
      choice = c->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required")
        bad("tool_choice", "tool_choice '{}' is not one of none, auto, required or {{\"type\": \"function\", ...}}", choice);
    } else if (c->is_object() && c->value("type", "") == "function" && c->contains("function") && (*c)["function"].is_object() &&
               (*c)["function"].contains("name") && (*c)["function"]["name"].is_string()) {
      choice = "named";
      named = (*c)["function"]["name"].get<std::string>();
    } else {
      bad("tool_choice", "tool_choice must be none, auto, required or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}");
    }
  }
  ToolChoice parsed;
  parsed.mode = choice == "none" ? ToolChoiceMode::none : choice == "required" ? ToolChoiceMode::required
              : choice == "named" ? ToolChoiceMode::named : ToolChoiceMode::automatic;
  parsed.name = named;
  parsed.parallel = boolean(body, "parallel_tool_calls", true);
  apply_tool_choice(parsed, tools, model, out);
}

// A harmony marker's id: gpt-oss's vocabulary has each as one special token.
int32_t harmony_token(const ModelContext& model, const char* marker) {
  const std::vector<int32_t> ids = model.text->tokenize(marker, false);
  if (ids.size() != 1)
    bad("tool_choice", "a forced tool call in the harmony format needs {} to be one token of this model's vocabulary, "
                       "as in gpt-oss's; here it is {} tokens", marker, ids.size());
  return ids[0];
}

}  // namespace

void apply_tool_choice(const ToolChoice& tool_choice, const std::vector<ToolDefinition>& tools, const ModelContext& model,
                       ParsedRequest& out) {
  const bool parallel = tool_choice.parallel;
  const std::string& named = tool_choice.name;
  const std::string choice = tool_choice.mode == ToolChoiceMode::none       ? "none"
                             : tool_choice.mode == ToolChoiceMode::required ? "required"
                             : tool_choice.mode == ToolChoiceMode::named    ? "named"
                                                                            : "auto";
  if (tools.empty()) {
    if (choice == "required" || choice == "named") bad("tool_choice", "tool_choice '{}' needs 'tools'", choice == "named" ? named : choice);
    return;
  }
  if (choice == "none") return;
  const bool harmony = model.reasoning && model.reasoning->harmony;
  std::vector<ToolDefinition> chosen;
  for (const auto& t : tools)
    if (choice != "named" || t.name == named) chosen.push_back(t);
  if (chosen.empty()) bad("tool_choice", "tool_choice names the function '{}', which is not among 'tools'", named);
  // Arguments follow the tool's schema; a tool that is not strict falls back to any object when
  // its schema holds a keyword we cannot enforce (strict ones get the 400 instead).
  auto with_enforceable_schemas = [&](std::vector<ToolDefinition> defs) {
    for (auto& d : defs) {
      if (d.strict) continue;
      try {
        json_schema_rules(d.parameters.empty() ? json{{"type", "object"}} : d.parameters, "probe", model.limits.grammar);
      } catch (const GrammarError&) {
        d.parameters = json{{"type", "object"}};
      }
    }
    return defs;
  };
  if (harmony) {
    // Harmony's calls are messages to functions.NAME (harmony.h), not a ToolCallFormat's text.
    out.harmony_calls = true;
    if (choice == "required" || choice == "named") {
      if (out.grammar) bad("tool_choice", "tool_choice '{}' cannot be combined with response_format, grammar or regex", choice);
      const HarmonyCallTokens ids{harmony_token(model, "<|channel|>"), harmony_token(model, "<|constrain|>"),
                                  harmony_token(model, "<|message|>"), harmony_token(model, "<|call|>")};
      auto defs = with_enforceable_schemas(chosen);
      out.grammar = compile(model, "tools", [&] { return harmony_forced_call_grammar(defs, ids, model.limits.grammar); });
      out.harmony_forced_call = true;
      return;
    }
    // auto: a strict tool's grammar would wait for a call's opening, which is special tokens here,
    // and the engine's trigger is text.
    if (std::any_of(tools.begin(), tools.end(), [](const ToolDefinition& t) { return t.strict; }))
      bad("tools", "strict tools with tool_choice auto are not supported with this model's harmony chat format (gpt-oss): "
                   "its calls open with special tokens; use tool_choice required or a named function");
    return;
  }
  auto format = std::shared_ptr<const ToolCallFormat>(tool_call_format_for(model.text->chat_template_source()));
  out.tool_format = format;
  if (choice == "required" || choice == "named") {
    if (out.grammar) bad("tool_choice", "tool_choice '{}' cannot be combined with response_format, grammar or regex", choice);
    auto defs = with_enforceable_schemas(chosen);
    out.grammar = compile(model, "tools", [&] { return format->forced_grammar(defs, parallel, model.limits.grammar); });
    return;
  }
  const bool any_strict = std::any_of(tools.begin(), tools.end(), [](const ToolDefinition& t) { return t.strict; });
  if (!any_strict) return;
  if (out.grammar) bad("tools", "strict tools with tool_choice auto cannot be combined with response_format, grammar or regex");
  if (format->trigger().empty())
    bad("tools", "strict tools with tool_choice auto need a chat template whose calls start with a marker ({} calls have none); "
                 "use tool_choice required or a named function", format->name());
  auto defs = with_enforceable_schemas(tools);
  out.grammar = compile(model, "tools", [&] { return format->triggered_grammar(defs, parallel, model.limits.grammar); });
  out.grammar_trigger = format->trigger();
}

namespace {

// llama-server's typical_p, XTC and DRY fields, with its meanings and defaults (sampler.h).
void parse_llama_cpp_samplers(const json& body, const ModelContext& model, SamplingParams& s) {
  s.typical_p = static_cast<float>(number(body, "typical_p", 1.0, 0.0, 1.0));
  if (s.typical_p <= 0.0f) bad("typical_p", "'typical_p' must be greater than 0 (1 is off), got {}", s.typical_p);
  s.xtc_probability = static_cast<float>(number(body, "xtc_probability", 0.0, 0.0, 1.0));
  s.xtc_threshold = static_cast<float>(number(body, "xtc_threshold", 0.1, 0.0, 1.0));
  s.dry_multiplier = static_cast<float>(number(body, "dry_multiplier", 0.0, 0.0, 1e9));
  // llama-server swaps a base below 1 for its default; a 400 says so instead of guessing.
  s.dry_base = static_cast<float>(number(body, "dry_base", 1.75, 1.0, 1e9));
  s.dry_allowed_length = static_cast<int>(integer(body, "dry_allowed_length", 0, std::numeric_limits<int>::max()).value_or(2));
  s.dry_penalty_last_n = static_cast<int>(integer(body, "dry_penalty_last_n", 0, std::numeric_limits<int>::max()).value_or(64));
  std::vector<std::string> breakers = {"\n", ":", "\"", "*"};  // llama.cpp's defaults
  if (const json* field_value = field(body, "dry_sequence_breakers")) {
    constexpr std::size_t kMaxBreakers = 32;  // each one is a pass over the vocabulary
    if (!field_value->is_array() || field_value->empty() || field_value->size() > kMaxBreakers)
      bad("dry_sequence_breakers", "'dry_sequence_breakers' must be a non-empty array of at most {} strings", kMaxBreakers);
    breakers.clear();
    for (const json& breaker : *field_value) {
      if (!breaker.is_string())
        bad("dry_sequence_breakers", "'dry_sequence_breakers' must hold strings, got {}", type_of(breaker));
      breakers.push_back(breaker.get<std::string>());
    }
  }
  if (s.dry_multiplier == 0.0f || s.dry_penalty_last_n == 0 || model.text == nullptr) return;
  // llama.cpp matches breakers on token text: the ids of every token that holds or starts one.
  const EngineText& text = *model.text;
  s.dry_breakers = dry_breaker_sequences(
      breakers, text.vocab_size(), [&](int32_t id) { return text.token_bytes(id); },
      [&](const std::string& rest) { return text.tokenize(rest, false); });
}

// Fields both endpoints share: sampling, stop, n, stream, max tokens.
void parse_common(const json& body, const ModelContext& model, ParsedRequest& out, std::optional<int64_t>& max_tokens) {
  check_model(body, model);
  out.n = static_cast<int>(integer(body, "n", 1, std::numeric_limits<int>::max()).value_or(1));
  if (out.n > model.limits.max_n) bad("n", "'n' may be at most {} here, got {}", model.limits.max_n, out.n);

  std::optional<int64_t> max_tokens_field = integer(body, "max_tokens", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  std::optional<int64_t> max_completion = integer(body, "max_completion_tokens", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  max_tokens = max_completion ? max_completion : max_tokens_field;
  const char* max_name = max_completion ? "max_completion_tokens" : "max_tokens";
  if (max_tokens && *max_tokens < 1) bad(max_name, "'{}' must be at least 1, got {}", max_name, *max_tokens);

  SamplingParams& s = out.sampling;
  s.temperature = static_cast<float>(number(body, "temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(number(body, "top_p", 1.0, 0.0, 1.0));
  if (s.top_p <= 0.0f) bad("top_p", "'top_p' must be greater than 0, got {}", s.top_p);
  s.top_k = static_cast<int>(integer(body, "top_k", -1, std::numeric_limits<int>::max()).value_or(0));
  s.min_p = static_cast<float>(number(body, "min_p", 0.0, 0.0, 1.0));
  s.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", 0.0, -2.0, 2.0));
  s.presence_penalty = static_cast<float>(number(body, "presence_penalty", 0.0, -2.0, 2.0));
  s.repetition_penalty = static_cast<float>(number(body, "repetition_penalty", 1.0, 0.0, 1e9));
  if (s.repetition_penalty <= 0.0f)
    bad("repetition_penalty", "'repetition_penalty' must be greater than 0 (1 is off), got {}", s.repetition_penalty);
  s.min_tokens = static_cast<int>(integer(body, "min_tokens", 0, std::numeric_limits<int>::max()).value_or(0));
  if (max_tokens && s.min_tokens > *max_tokens)
    bad("min_tokens", "'min_tokens' ({}) may not exceed '{}' ({})", s.min_tokens, max_name, *max_tokens);
  parse_llama_cpp_samplers(body, model, s);
  if (auto seed = integer(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
    s.seed = static_cast<uint64_t>(*seed);
  if (const json* bias = field(body, "logit_bias")) {
    if (!bias->is_object()) bad("logit_bias", "'logit_bias' must be an object mapping token ids to numbers, got {}", type_of(*bias));
    for (const auto& [key, value] : bias->items()) {
      char* end = nullptr;
      long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id >= model.vocab_size)
        bad("logit_bias", "'logit_bias' key '{}' is not a token id of this model (0..{})", key, model.vocab_size - 1);
      if (!value.is_number() || value.get<double>() < -100 || value.get<double>() > 100)
        bad("logit_bias", "'logit_bias' values must be numbers between -100 and 100, got {}", value.dump());
      s.logit_bias[static_cast<int32_t>(id)] = value.get<float>();
    }
  }

  if (const json* stop = field(body, "stop")) {
    if (stop->is_string()) {
      out.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > kMaxStops) bad("stop", "'stop' may hold at most {} strings, got {}", kMaxStops, stop->size());
      for (const json& v : *stop) {
        if (!v.is_string()) bad("stop", "'stop' must be a string or an array of strings, found {}", type_of(v));
        out.stop.push_back(v.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of strings, got {}", type_of(*stop));
    }
    for (const auto& text : out.stop)
      if (text.empty()) bad("stop", "'stop' strings must not be empty");
  }
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) bad("stop_token_ids", "'stop_token_ids' must be an array of token ids, got {}", type_of(*ids));
    out.stop_token_ids = token_ids(*ids, "stop_token_ids", model.vocab_size);
  }
  parse_test_forced_output(body, model, s);
  out.ignore_eos = boolean(body, "ignore_eos", false);
  out.skip_special_tokens = boolean(body, "skip_special_tokens", true);
  out.stream = boolean(body, "stream", false);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("stream_options", "'stream_options' must be an object, got {}", type_of(*options));
    if (!out.stream) bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    out.include_usage = boolean(*options, "include_usage", false);
  }
  parse_constraint(body, model, out);
}

// max_tokens against the context: the OpenAI message when it cannot fit, else the room left.
void resolve_max_tokens(ParsedRequest& out, std::optional<int64_t> max_tokens, const ModelContext& model) {
  const int64_t limit = std::min<int64_t>(model.context_length > 0 ? model.context_length : INT32_MAX,
                                          static_cast<int64_t>(std::min<std::size_t>(model.kv_capacity_tokens, INT32_MAX)));
  for (const auto& prompt : out.prompts) {
    const int64_t length = static_cast<int64_t>(prompt.size());
    if (length == 0) bad(out.prompt_field, "the prompt is empty (it must encode to at least one token)");
    if (max_tokens ? length + *max_tokens > limit : length >= limit)
      throw ApiError(400,
                     fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                                 "({} in the {}, {} for the completion). Please reduce the length of the {} or the completion.",
                                 limit, length + (max_tokens ? *max_tokens : 1), length, out.prompt_field,
                                 max_tokens ? *max_tokens : 1, out.prompt_field),
                     out.prompt_field, "context_length_exceeded");
    out.max_tokens.push_back(static_cast<int>(max_tokens ? *max_tokens : limit - length));
  }
}

}  // namespace

void parse_test_forced_output(const json& body, const ModelContext& model, SamplingParams& sampling) {
  const json* forced = field(body, "test_forced_output");
  if (!forced) return;
  if (!model.test_hooks) bad("test_forced_output", "'test_forced_output' is a test hook: start the server with --test-hooks");
  if (!forced->is_string()) bad("test_forced_output", "'test_forced_output' must be a string, got {}", type_of(*forced));
  sampling.forced_tokens = model.text->tokenize(forced->get<std::string>(), false);
}

void check_body_limits(const json& body, const RequestLimits& limits, bool chat) {
  if (chat && body.contains("messages") && body["messages"].is_array() && limits.max_messages > 0 &&
      body["messages"].size() > static_cast<std::size_t>(limits.max_messages))
    throw ApiError(400, fmt::format("{} messages; this server accepts at most {} (--max-messages)", body["messages"].size(),
                                    limits.max_messages), "messages");
  for (const char* name : {"max_tokens", "max_completion_tokens"})
    if (limits.max_tokens > 0 && body.contains(name) && body[name].is_number() && body[name].get<double>() > limits.max_tokens)
      throw ApiError(400, fmt::format("'{}' is {}; this server allows at most {} (--max-tokens-limit)", name, body[name].dump(),
                                      limits.max_tokens), name);
}

namespace {

// The server's limits on the tokenized prompts; a resolved max_tokens is capped to its limit.
void check_prompt_limits(ParsedRequest& out, const RequestLimits& limits) {
  for (std::size_t p = 0; p < out.prompts.size(); ++p) {
    if (limits.max_prompt_tokens > 0 && out.prompts[p].size() > static_cast<std::size_t>(limits.max_prompt_tokens))
      throw ApiError(400, fmt::format("the prompt is {} tokens; this server accepts at most {} (--max-prompt-tokens)",
                                      out.prompts[p].size(), limits.max_prompt_tokens),
                     out.prompt_field, "context_length_exceeded");
    if (limits.max_tokens > 0) out.max_tokens[p] = std::min(out.max_tokens[p], limits.max_tokens);
  }
}

// Arrays and objects nested in the raw body, counted outside strings before the parser sees it:
// a parsed value is copied, compared and rendered by code that recurses once per level.
void check_json_depth(const std::string& body, int max_depth) {
  if (max_depth <= 0) return;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw ApiError(400, fmt::format("the request body nests arrays and objects more than {} levels deep (at byte {}); "
                                        "this server accepts at most {} (--max-json-depth)", max_depth, i, max_depth));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

// A prompt's bytes against prompt_byte_limit, before any tokenizer work is spent on it.
void check_prompt_bytes(const std::string& text, const ModelContext& model, bool server_limits, const char* param) {
  const std::size_t limit = prompt_byte_limit(model, server_limits);
  if (limit == 0 || text.size() <= limit) return;
  const std::string why = model.limits.max_prompt_bytes > 0
                              ? std::string("--max-prompt-bytes")
                              : fmt::format("--max-prompt-bytes; by default the token limit times the longest token, {} bytes",
                                            model.longest_token_bytes);
  throw ApiError(400, fmt::format("the prompt is {} bytes; this server accepts at most {} ({})", text.size(), limit, why),
                 param, "context_length_exceeded");
}

std::string message_text(const json& message, std::size_t index) {
  const json* content = field(message, "content");
  if (!content) return "";
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array())
    bad("messages", "messages[{}].content must be a string or an array of content parts, got {}", index, type_of(*content));
  std::string text;
  for (const json& part : *content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad("messages", "messages[{}].content parts must be objects with a 'type'", index);
    const std::string type = part["type"].get<std::string>();
    if (type != "text")
      bad("messages", "messages[{}].content has a '{}' part; this model accepts only text", index, type);
    if (!part.contains("text") || !part["text"].is_string())
      bad("messages", "messages[{}].content text parts need a string 'text'", index);
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

std::size_t prompt_byte_limit(const ModelContext& model, bool server_limits) {
  if (model.limits.max_prompt_bytes > 0) return model.limits.max_prompt_bytes;
  int64_t tokens = std::min<int64_t>(model.context_length > 0 ? model.context_length : INT32_MAX,
                                     static_cast<int64_t>(std::min<std::size_t>(model.kv_capacity_tokens, INT32_MAX)));
  if (server_limits && model.limits.max_prompt_tokens > 0) tokens = std::min<int64_t>(tokens, model.limits.max_prompt_tokens);
  if (tokens <= 0 || model.longest_token_bytes == 0) return 0;
  // Each token covers at most longest_token_bytes of the text: a longer text cannot fit.
  return static_cast<std::size_t>(tokens) * model.longest_token_bytes;
}

json parse_json_object(const std::string& body, int max_depth) {
  check_json_depth(body, max_depth);
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::parse_error& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()));
  } catch (const json::exception& e) {  // e.g. a number too large for a double (1e999)
    throw ApiError(400, fmt::format("the request body cannot be read as JSON: {}", e.what()));
  }
  if (!parsed.is_object()) throw ApiError(400, fmt::format("the request body must be a JSON object, got {}", type_of(parsed)));
  return parsed;
}

void check_model(const json& body, const ModelContext& model) {
  const json* name = field(body, "model");
  if (!name) return;  // as vLLM: the one served model
  if (!name->is_string()) bad("model", "'model' must be a string, got {}", type_of(*name));
  const std::string wanted = name->get<std::string>();
  for (const auto& accepted : model.accepted_names)
    if (wanted == accepted) return;
  throw ApiError(404, fmt::format("The model `{}` does not exist.", wanted), "model", "model_not_found");
}

namespace {

// llama.cpp's per-request reasoning_format ("none": the thoughts stay in the text; "auto" /
// "deepseek": split out) and vLLM's include_reasoning (false: split out and not returned).
void parse_reasoning_fields(const json& body, ParsedRequest& out) {
  if (const json* format = field(body, "reasoning_format")) {
    if (!format->is_string() || (*format != "none" && *format != "auto" && *format != "deepseek"))
      bad("reasoning_format", "'reasoning_format' must be one of none, auto, deepseek, got {}", format->dump());
    out.separate_reasoning = out.reasoning && *format != "none";
  }
  out.include_reasoning = boolean(body, "include_reasoning", true);
}

// server_limits: false for /tokenize, which renders a chat but generates nothing.
ParsedRequest chat_request(const json& body, const ModelContext& model, bool server_limits) {
  if (server_limits) check_body_limits(body, model.limits, true);
  ParsedRequest out;
  out.prompt_field = "messages";
  std::optional<int64_t> max_tokens;
  parse_common(body, model, out, max_tokens);

  const json* tools = field(body, "tools");
  if (tools && !tools->is_array()) bad("tools", "'tools' must be an array, got {}", type_of(*tools));
  if (server_limits) parse_tool_choice(body, model, tools ? parse_tools(*tools) : std::vector<ToolDefinition>{}, out);
  if (const json* call = field(body, "function_call")) {
    bool plain = call->is_string() && (*call == "none" || *call == "auto");
    if (!plain) bad("function_call", "function_call {} is not supported (use 'none' or 'auto')", call->dump());
  }
  if (const json* modalities = field(body, "modalities")) {
    if (!modalities->is_array()) bad("modalities", "'modalities' must be an array");
    for (const json& m : *modalities)
      if (m != "text") bad("modalities", "only the 'text' modality is supported, got {}", m.dump());
  }
  if (field(body, "audio")) bad("audio", "audio output is not supported");
  if (field(body, "prediction")) bad("prediction", "predicted outputs are not supported");

  out.logprobs = boolean(body, "logprobs", false);
  if (auto top = integer(body, "top_logprobs", 0, kMaxTopLogprobs)) {
    if (!out.logprobs && *top > 0) bad("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
    out.top_logprobs = static_cast<int>(*top);
  }
  out.sampling.top_logprobs = out.top_logprobs;

  const json* messages = field(body, "messages");
  if (!messages) bad("messages", "'messages' is required");
  if (!messages->is_array()) bad("messages", "'messages' must be an array, got {}", type_of(*messages));
  if (messages->empty()) bad("messages", "'messages' must contain at least one message");
  json rendered = json::array();
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    if (!message.is_object()) bad("messages", "messages[{}] must be an object, got {}", i, type_of(message));
    const json* role = field(message, "role");
    if (!role || !role->is_string()) bad("messages", "messages[{}] needs a string 'role'", i);
    std::string r = role->get<std::string>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool" && r != "function")
      bad("messages", "messages[{}].role '{}' is not one of system, developer, user, assistant, tool", i, r);
    if (!field(message, "content") && r != "assistant")
      bad("messages", "messages[{}] ({}) needs 'content'", i, r);
    json m = message;
    m["role"] = r == "developer" ? "system" : r;
    m["content"] = message_text(message, i);
    // An assistant's earlier thoughts, as llama.cpp and vLLM take them back (vLLM's newer name is
    // `reasoning`); thinking templates read reasoning_content (Qwen3's drops it before the last query).
    for (const char* key : {"reasoning_content", "reasoning"})
      if (const json* thoughts = field(message, key); thoughts && !thoughts->is_null()) {
        if (!thoughts->is_string()) bad("messages", "messages[{}].{} must be a string", i, key);
        if (!m.contains("reasoning_content") || m["reasoning_content"].is_null()) m["reasoning_content"] = *thoughts;
      }
    m.erase("reasoning");
    // gpt-oss's template reads an assistant's analysis from `thinking` (as llama.cpp and vLLM pass it).
    if (model.reasoning && model.reasoning->harmony && m.contains("reasoning_content") && !m["reasoning_content"].is_null() &&
        !m.contains("thinking"))
      m["thinking"] = m["reasoning_content"];
    // Templates render an assistant's calls with the arguments as an object (OpenAI sends a string).
    if (const json* calls = field(message, "tool_calls")) {
      if (!calls->is_array()) bad("messages", "messages[{}].tool_calls must be an array", i);
      for (json& call : m["tool_calls"])
        if (call.is_object() && call.contains("function") && call["function"].is_object() &&
            call["function"].contains("arguments") && call["function"]["arguments"].is_string()) {
          json parsed = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
          if (!parsed.is_discarded()) call["function"]["arguments"] = parsed;
        }
    }
    rendered.push_back(std::move(m));
  }
  json extra = json::object();
  if (tools) extra["tools"] = *tools;
  if (const json* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    for (const auto& [key, value] : kwargs->items()) extra[key] = value;
  }
  apply_reasoning_effort(field(body, "reasoning_effort"), "reasoning_effort", model, extra);
  add_chat_prompt(rendered, extra, model, server_limits, out);
  fit_max_tokens(out, max_tokens, model, server_limits);
  parse_reasoning_fields(body, out);
  return out;
}

}  // namespace

void add_chat_prompt(const json& messages, const json& extra, const ModelContext& model, bool server_limits, ParsedRequest& out) {
  if (!model.text->has_chat_template())
    throw ApiError(400, "this model has no chat template (tokenizer_config.json); use /v1/completions with a prompt", out.prompt_field);
  json variables = model.template_defaults;
  for (const auto& [key, value] : extra.items()) variables[key] = value;
  std::string prompt;
  try {
    prompt = model.text->render_chat(messages, variables);
  } catch (const std::exception& e) {
    throw ApiError(400, fmt::format("the chat template could not be applied to these messages: {}", e.what()), out.prompt_field);
  }
  check_prompt_bytes(prompt, model, server_limits, out.prompt_field.c_str());
  if (model.reasoning) {
    out.reasoning = model.reasoning;
    out.reasoning_start = reasoning_start_of(prompt, *model.reasoning);
    out.reasoning_span = engine_reasoning_span(out.reasoning_start, *model.reasoning, model.reasoning_tokens);
    out.separate_reasoning = model.separate_reasoning;
    // A forced harmony call's grammar writes the whole answer, headers included: the engine applies
    // it from the first token instead of waiting for the final channel.
    if (out.harmony_forced_call) out.reasoning_span.reset();
  }
  out.prompts.push_back(model.text->tokenize(prompt, false));
  out.prompt_texts.push_back(prompt);
}

void fit_max_tokens(ParsedRequest& out, std::optional<int64_t> max_tokens, const ModelContext& model, bool server_limits) {
  resolve_max_tokens(out, max_tokens, model);
  if (server_limits) check_prompt_limits(out, model.limits);
}

ParsedRequest parse_chat_request(const json& body, const ModelContext& model) { return chat_request(body, model, true); }

ParsedRequest parse_completion_request(const json& body, const ModelContext& model) {
  check_body_limits(body, model.limits, false);
  ParsedRequest out;
  std::optional<int64_t> max_tokens;
  parse_common(body, model, out, max_tokens);
  if (!field(body, "max_tokens") && !field(body, "max_completion_tokens")) max_tokens = 16;  // OpenAI's default here

  if (auto logprobs = integer(body, "logprobs", 0, kMaxTopLogprobs)) {
    out.logprobs = true;
    out.top_logprobs = static_cast<int>(*logprobs);
  }
  out.sampling.top_logprobs = out.top_logprobs;
  out.echo = boolean(body, "echo", false);
  if (out.echo && out.logprobs) bad("echo", "'echo' together with 'logprobs' is not supported (prompt logprobs are not computed)");
  if (const json* suffix = field(body, "suffix")) {
    if (!suffix->is_string()) bad("suffix", "'suffix' must be a string");
    if (!suffix->get<std::string>().empty()) bad("suffix", "'suffix' (insertion) is not supported");
  }
  if (auto best_of = integer(body, "best_of", 1, 1 << 20); best_of && *best_of != out.n)
    bad("best_of", "'best_of' other than n is not supported (got best_of={}, n={})", *best_of, out.n);

  const json* prompt = field(body, "prompt");
  if (!prompt) bad("prompt", "'prompt' is required");
  auto add_text = [&](const std::string& text) {
    check_prompt_bytes(text, model, true, "prompt");
    auto ids = model.text->tokenize(text, true);
    out.prompts.push_back(std::move(ids));
    out.prompt_texts.push_back(text);
  };
  auto add_ids = [&](const json& array) {
    auto ids = token_ids(array, "prompt", model.vocab_size);
    out.prompt_texts.push_back(model.text->detokenize(ids));
    out.prompts.push_back(std::move(ids));
  };
  if (prompt->is_string()) {
    add_text(prompt->get<std::string>());
  } else if (prompt->is_array()) {
    if (prompt->empty()) bad("prompt", "'prompt' must not be empty");
    const json& first = prompt->front();
    if (first.is_number()) {
      add_ids(*prompt);
    } else {
      for (const json& item : *prompt) {
        if (item.is_string()) add_text(item.get<std::string>());
        else if (item.is_array() && !item.empty()) add_ids(item);
        else bad("prompt", "'prompt' must be a string, an array of strings, an array of token ids or an array of such arrays");
      }
    }
  } else {
    bad("prompt", "'prompt' must be a string, an array of strings or an array of token ids, got {}", type_of(*prompt));
  }
  if (out.prompts.size() * out.n > static_cast<std::size_t>(model.limits.max_n) * 4)
    bad("prompt", "too many completions in one request ({} prompts x n={}); send several requests", out.prompts.size(), out.n);
  resolve_max_tokens(out, max_tokens, model);
  check_prompt_limits(out, model.limits);
  return out;
}

TokenizeRequest parse_tokenize_request(const json& body, const ModelContext& model) {
  check_model(body, model);
  TokenizeRequest out;
  if (body.contains("messages")) {
    out.ids = chat_request(body, model, false).prompts.front();
  } else if (body.contains("prompt")) {
    if (!body["prompt"].is_string()) throw ApiError(400, "'prompt' must be a string", "prompt");
    bool add_special = true;
    if (body.contains("add_special_tokens")) {
      if (!body["add_special_tokens"].is_boolean()) throw ApiError(400, "'add_special_tokens' must be a boolean", "add_special_tokens");
      add_special = body["add_special_tokens"].get<bool>();
    }
    check_prompt_bytes(body["prompt"].get<std::string>(), model, false, "prompt");
    out.ids = model.text->tokenize(body["prompt"].get<std::string>(), add_special);
  } else {
    throw ApiError(400, "give 'prompt' (a string) or 'messages'", "prompt");
  }
  out.return_token_strs = body.value("return_token_strs", false);
  return out;
}

std::vector<int32_t> parse_detokenize_request(const json& body, const ModelContext& model) {
  check_model(body, model);
  if (!body.contains("tokens") || !body["tokens"].is_array()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
  std::vector<int32_t> ids;
  for (const json& v : body["tokens"]) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= model.vocab_size)
      throw ApiError(400, fmt::format("'tokens' must hold token ids 0..{}, found {}", model.vocab_size - 1, v.dump()), "tokens");
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

}  // namespace inferlab::api
