// What a caller asks the engine to generate: the prompt's token ids, how many tokens at most, how
// to sample them, when to stop, and optionally a grammar the output must follow.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/generation/sampler.h"
#include "inferlab/grammar/grammar_matcher.h"

namespace inferlab {

using Clock = std::chrono::steady_clock;

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  SamplingParams sampling;
  std::vector<int32_t> stop_token_ids;  // finish with reason stop (the model's EOS unless ignore_eos)
  std::optional<Clock::time_point> deadline;  // finish with reason timeout after this
  // Constrained decoding: every token is drawn from those that keep the output a valid prefix of
  // the grammar; the stop tokens only where it is complete; reason stop once nothing may follow.
  std::shared_ptr<CompiledGrammar> grammar;
  // With a trigger, the output is free until it contains this text; the grammar then constrains
  // what follows it (tool_choice auto with strict tools: the call after "<tool_call>").
  std::string grammar_trigger;
  // Reasoning models: the output may first think inside a span the chat template marks (Qwen3's
  // <think>…</think>). Neither the grammar nor its trigger apply inside it; they start where it ends
  // (so JSON follows the thoughts, and a tool call written while thinking is not a call).
  struct ReasoningSpan {
    bool open = false;         // the prompt opened the span: the output starts inside it
    int32_t start_token = -1;  // else the output may open it with this token first (-1: it cannot)
    std::string end;           // the text that closes it
    int32_t end_token = -1;    // its id when it is one token (found by id too: a special token has no bytes here)
    // Harmony (gpt-oss): the span is every message before the answer; it ends at end_token
    // (<|message|>) when the text since the last header_token (<|channel|>) is `end` ("final").
    int32_t header_token = -1;
  };
  std::optional<ReasoningSpan> reasoning;
};

// What a caller asks the engine to embed: the input's token ids. The answer is one vector pooled
// from the input's last hidden states as the model's config says (ModelConfig::pooling), from a
// single step that holds the whole input; it shares steps with generation.
struct EmbeddingRequest {
  std::vector<int32_t> input;
  std::optional<Clock::time_point> deadline;  // finish with reason timeout after this
};

}  // namespace inferlab
