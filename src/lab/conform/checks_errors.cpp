// Conformance checks: refusals — status and OpenAI's error shape {"error": {message, type, param,
// code}} for each kind of bad request.
#include "lab/conform/probe.h"

namespace inferlab::lab::conform {
namespace {

std::string bad_json(Probe& p) {
  Answer a = p.post_raw("/v1/chat/completions", "{\"model\": \"" + p.model() + "\", \"messages\": [");
  require_error(a, 400);
  return "400";
}

std::string not_an_object(Probe& p) {
  Answer a = p.post_raw("/v1/chat/completions", "[1, 2, 3]");
  require_error(a, 400);
  return "400";
}

std::string missing_messages(Probe& p) {
  Answer a = p.post("/v1/chat/completions", {{"model", p.model()}, {"max_tokens", 4}});
  require_error(a, 400);
  return "400, param " + a.parsed["error"]["param"].dump();
}

std::string missing_prompt(Probe& p) {
  Answer a = p.post("/v1/completions", {{"model", p.model()}, {"max_tokens", 4}});
  require_error(a, 400);
  return "400";
}

std::string wrong_type(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", "ten"}}));
  require_error(a, 400);
  Answer b = p.post("/v1/chat/completions", {{"model", p.model()}, {"messages", "hello"}});
  require_error(b, 400);
  return "400 for max_tokens \"ten\" and messages \"hello\"";
}

std::string invalid_value(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"temperature", -1}, {"max_tokens", 2}}));
  require_error(a, 400);
  Answer b = p.post("/v1/chat/completions", p.chat({{"max_tokens", 0}}));
  require_error(b, 400);
  return "400 for temperature -1 and max_tokens 0";
}

std::string unknown_model(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"model", "no-such-model-conform"}, {"max_tokens", 2}}));
  if (a.status == 200) fail_check("200: a request for an unknown model was answered (by the model served)");
  require_error(a, 404);
  const json& code = a.parsed["error"]["code"];
  require(code == "model_not_found", fmt::format("error.code is {} (OpenAI: \"model_not_found\")", code.dump()));
  return "404 model_not_found";
}

// A prompt of more tokens than the context: " hello" is one token in every BPE vocabulary seen.
std::string context_overflow(Probe& p) {
  std::optional<int> context = p.context_length();
  if (!context) skip_check("the server does not tell its context length (max_model_len in /v1/models, /props n_ctx)");
  std::string prompt;
  for (int i = 0; i < *context + 64; ++i) prompt += " hello";
  Answer a = p.post("/v1/completions", p.completion({{"prompt", prompt}, {"max_tokens", 4}}));
  require_error(a, 400);
  const json& code = a.parsed["error"]["code"];
  if (code != "context_length_exceeded") return fmt::format("400 for {} + 64 tokens; code {} (OpenAI: context_length_exceeded)", *context, code.dump());
  return fmt::format("400 context_length_exceeded for {} + 64 tokens", *context);
}

// 40 MiB in a field no server reads: the body's size alone must be refused (OpenAI: 413).
std::string body_too_large(Probe& p) {
  json body = p.chat({{"max_tokens", 1}});
  body["x_conform_padding"] = std::string(40u << 20, 'x');
  Answer a = p.post("/v1/chat/completions", body);
  if (a.status == 200) fail_check("200: a 40 MiB body was read and answered (no request size limit)", cut(a.body));
  require_error(a, 413);
  return "413";
}

std::string unknown_route(Probe& p) {
  Answer a = p.get("/v1/no-such-route");
  require_error(a, 404);
  return "404";
}

}  // namespace

void add_error_checks(std::vector<Check>& checks) {
  checks.push_back({"errors.bad_json", "malformed JSON: 400 in OpenAI's error shape", bad_json});
  checks.push_back({"errors.not_an_object", "a JSON body that is not an object: 400 in OpenAI's error shape", not_an_object});
  checks.push_back({"errors.missing_messages", "chat without messages: 400 in OpenAI's error shape", missing_messages});
  checks.push_back({"errors.missing_prompt", "completions without prompt: 400 in OpenAI's error shape", missing_prompt});
  checks.push_back({"errors.wrong_type", "a field of the wrong type: 400 in OpenAI's error shape", wrong_type});
  checks.push_back({"errors.invalid_value", "a value out of range (temperature -1, max_tokens 0): 400", invalid_value});
  checks.push_back({"errors.unknown_model", "an unknown model: 404, code model_not_found", unknown_model});
  checks.push_back({"errors.context_overflow", "a prompt longer than the context: 400 (code context_length_exceeded)", context_overflow});
  checks.push_back({"errors.body_too_large", "a 40 MiB body: 413 in OpenAI's error shape", body_too_large});
  checks.push_back({"errors.unknown_route", "an unknown route: 404 in OpenAI's error shape", unknown_route});
}

}  // namespace inferlab::lab::conform
