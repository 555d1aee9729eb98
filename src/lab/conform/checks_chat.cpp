// Conformance checks: non-streaming chat and legacy completions bodies.
#include "lab/conform/probe.h"

namespace inferlab::lab::conform {
namespace {

void require_completion_envelope(const Answer& a, const std::string& object) {
  require(a.status == 200, fmt::format("status {}", a.status));
  require(a.is_json_object(), "the body is not a JSON object");
  require(a.parsed.value("object", "") == object, fmt::format("object is not \"{}\"", object));
  require(a.parsed.contains("id") && a.parsed["id"].is_string() && !a.parsed["id"].get<std::string>().empty(), "id is missing");
  require(a.parsed.contains("created") && a.parsed["created"].is_number_integer(), "created is missing or not an integer");
  require(a.parsed.contains("model") && a.parsed["model"].is_string(), "model is missing or not a string");
}

std::string chat_basic(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 8}}));
  require_completion_envelope(a, "chat.completion");
  const json& c = first_choice(a);
  require(c.value("index", -1) == 0, "choices[0].index is not 0");
  require(c.contains("message") && c["message"].is_object(), "choices[0].message is missing");
  require(c["message"].value("role", "") == "assistant", "message.role is not \"assistant\"");
  require(c["message"].contains("content") && c["message"]["content"].is_string(), "message.content is not a string");
  require(c.contains("finish_reason") && c["finish_reason"].is_string(), "finish_reason is missing or not a string");
  const std::string finish = c["finish_reason"];
  require(finish == "stop" || finish == "length", fmt::format("finish_reason \"{}\" (expected stop or length)", finish));
  require(a.parsed.contains("usage"), "no usage");
  require_usage(a.parsed["usage"], "the body");
  return fmt::format("finish {}, {} completion tokens", finish, a.parsed["usage"]["completion_tokens"].get<long>());
}

std::string chat_content_type(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 1}}));
  const std::string type = a.header("content-type");
  require(type.starts_with("application/json"), fmt::format("Content-Type \"{}\" (expected application/json)", type));
  return type;
}

std::string chat_system_fingerprint(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 1}}));
  require(a.status == 200, fmt::format("status {}", a.status));
  if (!a.parsed.contains("system_fingerprint") || a.parsed["system_fingerprint"].is_null())
    skip_check("no system_fingerprint sent (OpenAI marks it optional)");
  require(a.parsed["system_fingerprint"].is_string(), "system_fingerprint is not a string");
  return a.parsed["system_fingerprint"];
}

std::string chat_usage_details(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 2}}));
  require(a.status == 200 && a.is_json_object() && a.parsed.contains("usage"), "no usage");
  const json& usage = a.parsed["usage"];
  std::string seen;
  for (const auto& [field, key] : {std::pair{"prompt_tokens_details", "cached_tokens"}, {"completion_tokens_details", "reasoning_tokens"}}) {
    if (!usage.contains(field) || usage[field].is_null()) continue;
    require(usage[field].is_object(), fmt::format("usage.{} is not an object", field));
    require(usage[field].contains(key) && usage[field][key].is_number_integer(),
            fmt::format("usage.{}.{} is missing or not an integer", field, key));
    seen += seen.empty() ? field : std::string(", ") + field;
  }
  if (seen.empty()) skip_check("no usage.*_tokens_details sent");
  return seen;
}

std::string completions_basic(Probe& p) {
  Answer a = p.post("/v1/completions", p.completion({{"max_tokens", 8}}));
  require_completion_envelope(a, "text_completion");
  const json& c = first_choice(a);
  require(c.value("index", -1) == 0, "choices[0].index is not 0");
  require(c.contains("text") && c["text"].is_string(), "choices[0].text is not a string");
  require(c.contains("finish_reason") && c["finish_reason"].is_string(), "finish_reason is missing or not a string");
  require(c.contains("logprobs"), "choices[0].logprobs is missing (OpenAI sends null)");
  require(a.parsed.contains("usage"), "no usage");
  require_usage(a.parsed["usage"], "the body");
  return fmt::format("finish {}", c["finish_reason"].get<std::string>());
}

std::string completions_prompt_array(Probe& p) {
  Answer a = p.post("/v1/completions", p.completion({{"prompt", {"Once upon a time", "The cache"}}, {"max_tokens", 3}}));
  if (a.status == 400) skip_check("an array of prompts is refused");
  require(a.status == 200, fmt::format("status {}", a.status));
  const json& choices = a.parsed.value("choices", json::array());
  require(choices.is_array() && choices.size() == 2, fmt::format("{} choices for 2 prompts", choices.size()));
  require(choices[0].value("index", -1) == 0 && choices[1].value("index", -1) == 1, "choice indexes are not 0, 1");
  return "2 prompts, 2 choices";
}

}  // namespace

void add_chat_checks(std::vector<Check>& checks) {
  checks.push_back({"chat.basic", "chat.completion: id, created, model, choices[0].message {role assistant, content}, finish_reason, usage", chat_basic});
  checks.push_back({"chat.content_type", "non-streaming answers are application/json", chat_content_type});
  checks.push_back({"chat.system_fingerprint", "system_fingerprint, when sent, is a string", chat_system_fingerprint});
  checks.push_back({"chat.usage_details", "usage.prompt_tokens_details.cached_tokens / completion_tokens_details.reasoning_tokens are integers", chat_usage_details});
  checks.push_back({"completions.basic", "text_completion: id, created, model, choices[0] {text, index, logprobs, finish_reason}, usage", completions_basic});
  checks.push_back({"completions.prompt_array", "/v1/completions with an array of prompts: one choice per prompt, indexed", completions_prompt_array});
}

}  // namespace inferlab::lab::conform
