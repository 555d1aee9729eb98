// Chat templates: the Jinja subset that Hugging Face chat templates use (tokenizer_config.json's
// chat_template), rendered byte-identically to transformers / @huggingface/jinja.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace inferlab {

class ChatTemplate {
 public:
  // Parses once; throws Error naming the construct (and line) when the template uses something
  // not supported.
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // messages: [{"role": ..., "content": ...}, ...]; extra: more variables (tools, bos_token, ...),
  // a JSON object (or null for none).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt, const nlohmann::ordered_json& extra) const;
  // The same with no extra variables.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferlab
