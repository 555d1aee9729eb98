// A request's reasoning effort as the model's chat template takes it. The effort comes as OpenAI's
// chat field `reasoning_effort`, the Responses API's `reasoning.effort` (sent on as the chat field)
// or the template variable itself (`chat_template_kwargs: {"reasoning_effort": ...}`), as vLLM and
// llama.cpp accept it. gpt-oss's template reads the variable `reasoning_effort` (its system
// message's "Reasoning: low|medium|high" line), so there the effort is that variable; a template
// with only an on/off switch (Qwen3's `enable_thinking`) is turned off by none or minimal, and the
// other efforts leave its default.
#pragma once
#include <string>

#include "server/openai_request.h"

namespace inferlab::api {

// Whether the chat template reads the variable `reasoning_effort` (gpt-oss's does).
bool template_reads_reasoning_effort(const ModelContext& model);

// `variables`: the template variables the request gives (its chat_template_kwargs). `effort`: the
// request's own effort field (nullptr when absent), named `param` in errors. Puts the effort into
// `variables` as the template takes it; a 400 for a value that is not one of OpenAI's efforts, one
// the template cannot take (gpt-oss: low, medium, high), or an effort field that disagrees with
// chat_template_kwargs (reasoning_effort, or enable_thinking true beside none).
void apply_reasoning_effort(const json* effort, const std::string& param, const ModelContext& model, json& variables);

}  // namespace inferlab::api
