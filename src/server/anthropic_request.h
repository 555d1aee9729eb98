// Anthropic Messages API request parsing: a POST /v1/messages body -> the ParsedRequest every
// generating route hands to answer_generation. Anthropic's content blocks become the chat
// template's messages (assistant tool_use -> tool_calls, user tool_result -> tool messages), its
// tools and tool_choice go through the same template rendering and tool-call grammar paths as
// /v1/chat/completions (apply_tool_choice, add_chat_prompt). What is honoured, refused and
// ignored, field by field: docs/server.md, "Anthropic Messages API".
#pragma once
#include <cstddef>

#include "server/openai_request.h"

namespace inferlab::api {

// A /v1/messages request: max_tokens required, every limit of the server checked.
ParsedRequest parse_messages_request(const json& body, const ModelContext& model);

// POST /v1/messages/count_tokens: the same body without max_tokens; the prompt's token count as
// /v1/messages would render it (tools included), without the server's generation limits.
std::size_t count_messages_tokens(const json& body, const ModelContext& model);

}  // namespace inferlab::api
