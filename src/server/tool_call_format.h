// Tool calls in generated text, per model family (chosen from the chat template, as llama.cpp's
// common/chat does): how calls are written (parse), how to force them (a grammar for
// tool_choice required / named and strict tools), and the streaming split of an answer into
// content and call deltas. One file per format: tool_call_hermes.cpp (Qwen2.5 / Qwen3 and the
// generic fallback), tool_call_llama3.cpp (Llama 3.x JSON and <|python_tag|>).
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "inferlab/grammar/grammar.h"
#include "server/api_error.h"

namespace inferlab::api {

struct ToolDefinition {
  std::string name;
  json parameters = json::object();  // a JSON Schema ({} when the tool has none)
  bool strict = false;
};

struct ToolCall {
  std::string id;         // call_...
  std::string name;
  std::string arguments;  // a JSON object as text ("{}" for a tool without parameters)
};

struct ParsedOutput {
  std::string content;
  std::vector<ToolCall> calls;
};

class ToolCallFormat {
 public:
  virtual ~ToolCallFormat() = default;
  virtual const char* name() const = 0;
  // The whole answer split into content and calls (a malformed call stays content).
  virtual ParsedOutput parse(const std::string& text) const = 0;
  // While streaming: how much of `text` is content for sure (the rest may be or become a call).
  // Text before `from` was content for sure on an earlier call, so the search may start there.
  virtual std::size_t content_prefix(const std::string& text, std::size_t from) const = 0;
  // While streaming: the calls that are whole in `text` after `from` (the end of the calls
  // already found), each parsed once; `end` is where the last one ends. `stuck` says a finished
  // call is malformed, so no later call is announced before the answer ends (parse decides).
  struct FinishedCalls {
    std::vector<ToolCall> calls;
    std::size_t end = 0;
    bool stuck = false;
  };
  virtual FinishedCalls finished_calls(const std::string& text, std::size_t from) const = 0;
  // GBNF for one or (parallel) several calls of these tools, with arguments per their schemas.
  virtual std::string forced_grammar(const std::vector<ToolDefinition>& tools, bool parallel, const GrammarLimits& limits) const = 0;
  // For tool_choice auto with strict tools: the text that opens a call, and the grammar of what
  // follows it (the call, then possibly more calls); empty when the format has no such marker.
  virtual std::string trigger() const = 0;
  virtual std::string triggered_grammar(const std::vector<ToolDefinition>& tools, bool parallel, const GrammarLimits& limits) const = 0;
};

// The format a chat template writes calls in: Hermes tags when it mentions <tool_call>, Llama 3
// JSON when it mentions <|python_tag|> or ipython, else Hermes tags (the documented fallback).
std::unique_ptr<ToolCallFormat> tool_call_format_for(const std::string& chat_template);
std::unique_ptr<ToolCallFormat> make_hermes_format();
std::unique_ptr<ToolCallFormat> make_llama3_format();

// Shared helpers of the formats.
std::string new_tool_call_id();
// A call object {"name", "arguments" | "parameters"} as a ToolCall; nullopt when malformed.
std::optional<ToolCall> tool_call_from_json(const json& object, const char* arguments_key);
// GBNF of one tool's arguments: its schema's rules under `rule` (shared primitives not included).
std::string tool_arguments_rules(const ToolDefinition& tool, const std::string& rule, const GrammarLimits& limits);

// Streams one answer's text: content as soon as it is surely content, each call once it is whole
// as a header delta (index, id, type, name) and an arguments delta. A last call that max_tokens
// cut short is never announced: it stays content, as in the non-streamed answer.
class ToolCallStream {
 public:
  explicit ToolCallStream(const ToolCallFormat& format) : format_(format) {}
  // New text: the content to show now, and tool_calls delta entries appended to `deltas`.
  std::string feed(const std::string& text, json& deltas);
  // End of the answer: the rest of the content and the remaining deltas; `calls` all the calls.
  std::string finish(json& deltas, std::vector<ToolCall>& calls);

 private:
  void emit(std::span<const ToolCall> calls, json& deltas);
  const ToolCallFormat& format_;
  std::string text_;
  std::size_t content_sent_ = 0;
  // Where the calls announced so far end, so each feed looks only at the text after them (the
  // stream is linear in the answer's length, not quadratic).
  std::size_t calls_end_ = 0;
  bool stuck_ = false;  // a finished call was malformed: no more calls until finish()
  std::vector<std::string> ids_;  // per call index, once it is sent
};

}  // namespace inferlab::api
