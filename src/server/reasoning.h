// Reasoning in generated text. Models whose chat template thinks (Qwen3, QwQ, the DeepSeek-R1
// distills) write their thoughts between two markers (<think>…</think>) before the answer. The
// server returns the thoughts apart from the answer (message.reasoning_content, streamed as
// delta.reasoning_content, as llama.cpp and vLLM's reasoning parsers do), counts their tokens, and
// tells the engine where the answer starts so that a grammar or a tool call applies only to it.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "inferlab/generation/generation_request.h"

namespace inferlab::api {

struct ReasoningMarkers {
  std::string start = "<think>";
  std::string end = "</think>";
  // Harmony (gpt-oss, harmony.h): the thoughts are the analysis channel's messages and the answer
  // the final channel's. start and end are then the markers around a message's header
  // (<|channel|> and <|message|>): the answer starts at the <|message|> of a header naming "final".
  bool harmony = false;
};

// The markers of a chat template that thinks (it writes both <think> and </think>, or harmony's
// <|channel|> and <|message|>); nullopt else.
std::optional<ReasoningMarkers> reasoning_markers_for(const std::string& chat_template);

// Where a rendered prompt leaves the output: inside a span the prompt opened (DeepSeek-R1's
// generation prompt ends with "<think>\n"), past one it closed (Qwen3 with enable_thinking false
// writes an empty one), or free to open one (Qwen3's default: the model writes <think> itself).
// Harmony: open (the prompt ends with <|start|>assistant: the model writes the headers), unless the
// prompt already opened the final channel's body (closed).
enum class ReasoningStart { may_open, open, closed };
ReasoningStart reasoning_start_of(std::string_view prompt, const ReasoningMarkers& markers);

// The engine's view (GenerationRequest::reasoning): nullopt when the output cannot think (closed).
// The markers' ids when each is one token (-1 else: a start marker that is not one token cannot be
// told from the answer's first token, so the output does not get to open a span). Harmony needs both
// ids (special tokens have no text for the engine); without them there is no span.
struct ReasoningTokens {
  int32_t start = -1, end = -1;
};
std::optional<GenerationRequest::ReasoningSpan> engine_reasoning_span(ReasoningStart start, const ReasoningMarkers& markers,
                                                                      ReasoningTokens tokens);

// Splits one answer's text, as it streams, into reasoning and content. The thoughts lose the
// whitespace around them and the content the whitespace before it (the templates write
// "<think>\n…\n</think>\n\n"); text that could still become a marker is held back. An answer that
// ends inside the span (max_tokens) is all reasoning: no half answer is shown as content.
class ReasoningSplitter {
 public:
  ReasoningSplitter(ReasoningMarkers markers, ReasoningStart start);
  // New text: appends the thoughts in it to `reasoning`, returns the content to show now.
  std::string feed(std::string_view text, std::string& reasoning);
  // The end of the answer: what was held back.
  std::string finish(std::string& reasoning);
  // Whether the text fed so far is (or opened) reasoning with no answer after it yet.
  bool inside() const { return state_ == State::inside; }

 private:
  enum class State { before, inside, after };
  ReasoningMarkers markers_;
  State state_;
  std::string held_;                 // text not yet shown: a possible marker, or whitespace
  bool reasoning_started_ = false;   // leading whitespace of the thoughts is dropped
  bool content_started_ = false;     // leading whitespace of the answer is dropped
};

}  // namespace inferlab::api
