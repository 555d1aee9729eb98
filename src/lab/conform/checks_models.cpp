// Conformance checks: the model list and retrieval, response headers, API keys.
#include "lab/conform/probe.h"

namespace inferlab::lab::conform {
namespace {

void require_model_object(const json& m, const std::string& where) {
  if (!m.is_object()) fail_check(where + " is not an object");
  if (!m.contains("id") || !m["id"].is_string()) fail_check(where + ".id is missing or not a string");
  if (m.value("object", "") != "model") fail_check(where + ".object is not \"model\"");
  if (!m.contains("created") || !m["created"].is_number_integer()) fail_check(where + ".created is missing or not an integer");
  if (!m.contains("owned_by") || !m["owned_by"].is_string()) fail_check(where + ".owned_by is missing or not a string");
}

std::string models_list(Probe& p) {
  Answer a = p.get("/v1/models");
  require(a.status == 200, fmt::format("status {}", a.status));
  require(a.is_json_object() && a.parsed.value("object", "") == "list", "the body is not {\"object\":\"list\",...}");
  require(a.parsed.contains("data") && a.parsed["data"].is_array() && !a.parsed["data"].empty(), "data[] is missing or empty");
  bool listed = false;
  for (std::size_t i = 0; i < a.parsed["data"].size(); ++i) {
    require_model_object(a.parsed["data"][i], fmt::format("data[{}]", i));
    listed = listed || a.parsed["data"][i]["id"] == p.model();
  }
  require(listed, fmt::format("the model '{}' is not listed", p.model()));
  return fmt::format("{} model(s)", a.parsed["data"].size());
}

std::string models_retrieve(Probe& p) {
  Answer a = p.get("/v1/models/" + p.model());
  if (a.status == 404) fail_check("404: GET /v1/models/{id} (openai models.retrieve) is not served");
  require(a.status == 200, fmt::format("status {}", a.status));
  require_model_object(a.parsed, "the body");
  require(a.parsed["id"] == p.model(), "the id is not the one asked for");
  return "id " + p.model();
}

std::string models_retrieve_unknown(Probe& p) {
  Answer a = p.get("/v1/models/no-such-model-conform");
  require_error(a, 404);
  const json& code = a.parsed["error"]["code"];
  require(code == "model_not_found", fmt::format("error.code is {} (OpenAI: \"model_not_found\")", code.dump()));
  return "404 model_not_found";
}

std::string request_id(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 1}}));
  const std::string id = a.header("x-request-id");
  require(!id.empty(), "no x-request-id response header (openai clients expose it as _request_id)");
  Answer echoed = p.get("/v1/models", {.headers = {"x-request-id: conform-trace-7"}});
  const std::string back = echoed.header("x-request-id");
  if (back != "conform-trace-7") return fmt::format("{} (a client's own id is not echoed: {})", id, back);
  return id + "; a client's id is echoed";
}

std::string auth_missing(Probe& p) {
  if (!p.has_api_key()) skip_check("no --api-key given");
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 1}}), {.authorization = false});
  require_error(a, 401);
  return "401 without Authorization";
}

std::string auth_wrong(Probe& p) {
  if (!p.has_api_key()) skip_check("no --api-key given");
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 1}}), {.api_key = p.options().api_key + "-wrong"});
  require_error(a, 401);
  Answer models = p.get("/v1/models", {.api_key = p.options().api_key + "-wrong"});
  require_error(models, 401);
  return "401 for a wrong key, on /v1/models too";
}

std::string auth_valid(Probe& p) {
  if (!p.has_api_key()) skip_check("no --api-key given");
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 1}}));
  require(a.status == 200, fmt::format("status {} with the right key", a.status));
  return "200 with the key";
}

}  // namespace

void add_model_checks(std::vector<Check>& checks) {
  checks.push_back({"models.list", "GET /v1/models: {object:list, data:[{id, object:model, created, owned_by}]} naming the model", models_list});
  checks.push_back({"models.retrieve", "GET /v1/models/{id} (models.retrieve): the model object", models_retrieve});
  checks.push_back({"models.retrieve_unknown", "GET /v1/models/{unknown}: 404, error.code model_not_found", models_retrieve_unknown});
  checks.push_back({"headers.request_id", "an x-request-id response header; a client's own id echoed", request_id});
  checks.push_back({"auth.missing_key", "with --api-key: no Authorization header is 401 in OpenAI's error shape", auth_missing});
  checks.push_back({"auth.wrong_key", "with --api-key: a wrong key is 401 in OpenAI's error shape", auth_wrong});
  checks.push_back({"auth.valid_key", "with --api-key: the key is accepted", auth_valid});
}

}  // namespace inferlab::lab::conform
