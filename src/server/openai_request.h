// OpenAI request parsing: a request body -> a typed request for /v1/chat/completions,
// /v1/completions, /tokenize and /detokenize, with every request limit checked here, once (the
// server's configured ones included). The body size is the one limit the transport enforces
// (http_server.cpp, --max-body-bytes), since it must stop reading.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "inferlab/generation/engine.h"
#include "inferlab/generation/sampler.h"
#include "server/api_error.h"
#include "server/reasoning.h"
#include "server/tool_call_format.h"

namespace inferlab::api {

// The server's configured limits (`inferlab serve --max-*`). 0: no limit of its own (the context's).
struct RequestLimits {
  int max_n = 16;             // choices per request
  int max_messages = 0;       // chat messages per request
  int max_prompt_tokens = 0;  // tokens per prompt
  int max_tokens = 0;         // the largest max_tokens; the default is capped to it
  int max_json_depth = 64;    // arrays/objects nested in the request body
  std::size_t max_prompt_bytes = 0;  // a prompt's bytes before it is tokenized (0: derived, see prompt_byte_limit)
  GrammarLimits grammar;      // response_format / grammar / regex / tool schemas (--max-grammar-bytes, ...)
};

// What the request parser needs to know about the served model.
struct ModelContext {
  const EngineText* text = nullptr;
  std::vector<std::string> accepted_names;  // "model" values we answer to
  int context_length = 0;
  int vocab_size = 0;
  std::size_t kv_capacity_tokens = 0;
  std::size_t longest_token_bytes = 0;  // the vocabulary's longest token (0: unknown, no byte bound)
  bool generates = true;                 // false: an encoder, which serves only /v1/embeddings
  int embedding_dimensions = 0;          // the length of its embeddings
  int max_embedding_input_tokens = 0;    // the longest input an embedding may have
  std::optional<ReasoningMarkers> reasoning;  // the chat template thinks: its markers
  ReasoningTokens reasoning_tokens;           // the markers' ids when each is one token
  bool separate_reasoning = true;             // --reasoning-format auto; none: the thoughts stay in the text
  bool test_hooks = false;                    // --test-hooks: 'test_forced_output' accepted
  json template_defaults = json::object();    // --chat-template-kwargs: variables a request may override
  RequestLimits limits;
};

// The most bytes a prompt may have before it is tokenized: --max-prompt-bytes, else the token
// limit (--max-prompt-tokens, or the context for /tokenize and by default) times the longest
// token, so that no prompt that could fit is refused. 0: no bound.
std::size_t prompt_byte_limit(const ModelContext& model, bool server_limits);

// A generation request as the engine is asked it, whatever API it came through; how the answer
// is laid out is the route's ResponseWriter's (response_writer.h), not this struct's.
struct ParsedRequest {
  std::string prompt_field = "prompt";        // the body field the prompt came from (errors name it)
  std::vector<std::vector<int32_t>> prompts;  // one for chat; completions may batch several
  std::vector<std::string> prompt_texts;      // for echo
  int n = 1;
  std::vector<int> max_tokens;                // per prompt, resolved against the context and the limits
  SamplingParams sampling;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
  bool logprobs = false;
  int top_logprobs = 0;
  bool skip_special_tokens = true;
  // Constrained decoding: response_format json_object / json_schema, the grammar (GBNF) and regex
  // extensions, tool_choice required / named, strict tools (from grammar_trigger on).
  std::shared_ptr<CompiledGrammar> grammar;
  std::string grammar_trigger;
  // Tool calls are parsed out of the answer when tools are given and tool_choice is not none.
  std::shared_ptr<const ToolCallFormat> tool_format;
  // A harmony template (gpt-oss) has no ToolCallFormat: its calls are messages to functions.NAME,
  // which the harmony splitter (harmony.h) returns as calls when this is set.
  bool harmony_calls = false;
  // tool_choice required / named on a harmony template: the grammar writes the whole answer (the
  // call's headers too), so the engine applies it from the first token (no reasoning span).
  bool harmony_forced_call = false;
  // A thinking template's chat (reasoning.h): its markers, where the prompt leaves the output, the
  // span the engine's grammar waits out, whether the thoughts are split from the answer
  // (reasoning_format) and whether they are returned at all (include_reasoning).
  std::optional<ReasoningMarkers> reasoning;
  ReasoningStart reasoning_start = ReasoningStart::closed;
  std::optional<GenerationRequest::ReasoningSpan> reasoning_span;
  bool separate_reasoning = false;
  bool include_reasoning = true;
};

// What a request's tool choice asks, whichever API spelled it (OpenAI's none / auto / required /
// {"function": ...}, Anthropic's none / auto / any / {"type": "tool"}).
enum class ToolChoiceMode { none, automatic, required, named };
struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::automatic;
  std::string name;  // named: the one tool to call
  bool parallel = true;
};
// The template's tool-call format into out.tool_format (none: no calls parsed) and, for required /
// named (or strict tools with auto), the grammar that forces the calls.
void apply_tool_choice(const ToolChoice& choice, const std::vector<ToolDefinition>& tools, const ModelContext& model,
                       ParsedRequest& out);

// A chat as the chat template reads it (role, content, tool_calls with object arguments,
// tool_call_id) rendered with `extra` (the template's other variables: tools, kwargs), its bytes
// checked, tokenized into out.prompts; errors name out.prompt_field. server_limits: false when
// the prompt is only counted (/tokenize), so the server's --max-prompt-* do not apply.
void add_chat_prompt(const json& messages, const json& extra, const ModelContext& model, bool server_limits, ParsedRequest& out);
// max_tokens per prompt against the context (none given: the room left), then with server_limits
// the server's prompt limits.
void fit_max_tokens(ParsedRequest& out, std::optional<int64_t> max_tokens, const ModelContext& model, bool server_limits);
// The server's limits checked on the raw body before anything is parsed: --max-messages (chat:
// the 'messages' array) and --max-tokens-limit ('max_tokens', 'max_completion_tokens').
void check_body_limits(const json& body, const RequestLimits& limits, bool chat);

// --test-hooks: the request's 'test_forced_output' as the tokens the sampler must pick (every API
// that generates reads it; a 400 without --test-hooks).
void parse_test_forced_output(const json& body, const ModelContext& model, SamplingParams& sampling);

// ApiError on malformed JSON, a non-object, or arrays/objects nested deeper than `max_depth`
// (checked on the raw bytes first: nothing recursive walks a body that is too deep).
json parse_json_object(const std::string& body, int max_depth);
void check_model(const json& body, const ModelContext& model);  // 404 for a name we do not serve
ParsedRequest parse_chat_request(const json& body, const ModelContext& model);
ParsedRequest parse_completion_request(const json& body, const ModelContext& model);

// POST /tokenize: a prompt (string) or a chat (messages, parsed as for /v1/chat/completions but
// without the server's generation limits: it only renders).
struct TokenizeRequest {
  std::vector<int32_t> ids;
  bool return_token_strs = false;
};
TokenizeRequest parse_tokenize_request(const json& body, const ModelContext& model);

// POST /detokenize: the token ids, each checked against the vocabulary.
std::vector<int32_t> parse_detokenize_request(const json& body, const ModelContext& model);

}  // namespace inferlab::api
