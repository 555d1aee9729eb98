// OpenAI's harmony format (gpt-oss): the answer is a run of messages, each a header and a body,
//   <|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…<|return|>
// The analysis channel is the reasoning (message.reasoning_content), the final channel the answer
// (message.content), and a commentary message addressed to a function
//   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>
// (the recipient may also follow the role: <|start|>assistant to=functions.NAME<|channel|>…) a tool
// call. A commentary message with no recipient (a preamble the model shows the user) is content.
// The splitter reads the text with the special tokens' text kept (the server decodes a harmony
// answer without skip_special_tokens), since the markers are special tokens.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_format.h"

namespace inferlab::api {

class HarmonySplitter {
 public:
  // calls: the request has tools, so a message to functions.NAME is a call (else its body is content).
  // separate_reasoning: false (reasoning_format none) puts the analysis text into the content too.
  // in_answer: the prompt already opened the final channel's body (…<|channel|>final<|message|>).
  HarmonySplitter(bool calls, bool separate_reasoning, bool in_answer = false)
      : calls_(calls), separate_reasoning_(separate_reasoning), state_(in_answer ? State::body : State::header) {}
  // New text: appends the thoughts in it to `reasoning` and the tool_calls delta entries of each call
  // that is whole to `deltas` (OpenAI's layout), returns the content to show now. Text that could
  // still be a marker, a header and a call's arguments are held back until they are whole.
  std::string feed(std::string_view text, std::string& reasoning, json& deltas);
  // The end of the answer: what was held back (a body cut short by max_tokens goes where its
  // channel says; a call cut short is not a call, its text is content); `calls` all the calls.
  std::string finish(std::string& reasoning, std::vector<ToolCall>& calls);
  // Whether the text fed so far ends inside an analysis message's body.
  bool in_reasoning() const { return state_ == State::body && kind_ == Kind::reasoning; }

 private:
  enum class State { header, body };
  enum class Kind { reasoning, content, call };
  void open_message(const std::string& header);
  void emit(const std::string& text, std::string& content, std::string& reasoning);
  void end_message(std::string& content, json& deltas);

  bool calls_, separate_reasoning_;
  State state_;
  Kind kind_ = Kind::content;
  std::string held_;       // text not yet placed: a header so far, or a body's possible marker
  std::string call_name_;  // the call being written (Kind::call)
  std::string arguments_;  // its body so far
  std::vector<ToolCall> calls_found_;
};

// The special tokens a harmony call is written with, by their ids in the model's vocabulary.
struct HarmonyCallTokens {
  int32_t channel = -1, constrain = -1, message = -1, call = -1;  // <|channel|> <|constrain|> <|message|> <|call|>
};

// GBNF that makes the whole answer one call of one of `tools` (tool_choice required, or the named
// tool alone), as gpt-oss writes a call after its generation prompt (<|start|>assistant):
//   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{arguments}<|call|>
// with the arguments following the tool's parameter schema and the special tokens named by id
// (<[id]>). No analysis message comes first, and harmony ends the turn at <|call|>, so it is one call.
std::string harmony_forced_call_grammar(const std::vector<ToolDefinition>& tools, const HarmonyCallTokens& tokens,
                                        const GrammarLimits& limits);

// The whole answer split at once (the non-streamed view of the splitter, for tests and callers
// that have all the text).
struct HarmonyParsed {
  std::string content, reasoning;
  std::vector<ToolCall> calls;
};
HarmonyParsed parse_harmony(std::string_view text, bool calls);

}  // namespace inferlab::api
