// Chat templates: the public face of the Jinja engine in jinja/ (lexer -> parser -> renderer, with
// the values and builtins they share). Output follows @huggingface/jinja (what transformers.js
// renders), including its template preprocessing (trim_blocks + lstrip_blocks, the final newline
// dropped) and value printing (true/false, JSON for lists and dicts).
#include "inferlab/tokenizer/chat_template.h"

#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"
#include "tokenizer/jinja/render.h"

namespace inferlab {

struct ChatTemplate::Impl {
  jinja::Body body;
};

ChatTemplate::ChatTemplate(const std::string& source) : impl_(std::make_unique<Impl>()) {
  impl_->body = jinja::parse(jinja::lex(source));
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const {
  return render(messages, add_generation_prompt, nlohmann::ordered_json::object());
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt, const nlohmann::ordered_json& extra) const {
  if (!messages.is_array()) fail("chat template: messages must be a JSON array, got {}", messages.type_name());
  if (!extra.is_object() && !extra.is_null()) fail("chat template: extra variables must be a JSON object");
  jinja::Scope globals(nullptr);
  globals.set("messages", jinja::from_json(messages));
  globals.set("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  if (extra.is_object())
    for (const auto& [key, value] : extra.items()) globals.set(key, jinja::from_json(value));
  return jinja::render(impl_->body, globals);
}

}  // namespace inferlab
