// Conformance checks: OpenAI's Responses API (POST /v1/responses) — the response object, the
// stream's named events in the spec's order with increasing sequence numbers, the store
// (retrieve by id) and refusals in OpenAI's error shape. A server without the route skips them.
#include "lab/conform/probe.h"

namespace inferlab::lab::conform {
namespace {

json responses_body(Probe& p, const json& extra = json::object()) {
  json body = {{"model", p.model()}, {"input", "Tell me about caches."}, {"max_output_tokens", 16}, {"temperature", 0}};
  body.update(extra);
  return body;
}

void skip_when_not_served(const Answer& a) {
  if (a.status == 404 && !(a.is_json_object() && a.parsed.contains("error") && a.parsed["error"].is_object() &&
                           a.parsed["error"].value("param", json()).is_string()))
    skip_check("404: POST /v1/responses is not served");
}

// The text of a response's message items.
std::string output_text(const json& response) {
  std::string text;
  for (const json& item : response.value("output", json::array()))
    if (item.is_object() && item.value("type", "") == "message")
      for (const json& part : item.value("content", json::array()))
        if (part.is_object() && part.value("type", "") == "output_text" && part.contains("text") && part["text"].is_string())
          text += part["text"].get<std::string>();
  return text;
}

void require_response_object(const json& r, const std::string& where) {
  require(r.is_object(), where + " is not an object");
  require(r.contains("id") && r["id"].is_string() && !r["id"].get<std::string>().empty(), where + ".id is missing");
  require(r.value("object", "") == "response", where + ".object is not \"response\"");
  require(r.contains("created_at") && r["created_at"].is_number(), where + ".created_at is missing or not a number");
  require(r.contains("output") && r["output"].is_array(), where + ".output is missing or not an array");
  for (const char* key : {"model", "status", "tools", "tool_choice", "parallel_tool_calls"})
    require(r.contains(key), fmt::format("{}.{} is missing (the openai SDKs' types require it)", where, key));
}

std::string create(Probe& p) {
  Answer a = p.post("/v1/responses", responses_body(p));
  skip_when_not_served(a);
  require(a.status == 200, fmt::format("status {}", a.status));
  require_response_object(a.parsed, "the body");
  const json& r = a.parsed;
  require(r["status"] == "completed" || r["status"] == "incomplete", fmt::format("status {} (completed or incomplete)", r["status"].dump()));
  require(!output_text(r).empty(), "no output_text in a message item of output[]");
  const json& usage = r.value("usage", json());
  require(usage.is_object() && usage.contains("input_tokens") && usage["input_tokens"].is_number_integer() &&
              usage.contains("output_tokens") && usage["output_tokens"].is_number_integer() && usage.contains("total_tokens"),
          "usage {input_tokens, output_tokens, total_tokens} is missing");
  require(usage["total_tokens"] == usage["input_tokens"].get<int64_t>() + usage["output_tokens"].get<int64_t>(),
          "usage.total_tokens is not input_tokens + output_tokens");
  if (r["status"] == "incomplete")
    require(r.value("incomplete_details", json()).is_object(), "an incomplete response without incomplete_details");
  return fmt::format("{} with {} output item(s)", r["status"].get<std::string>(), r["output"].size());
}

std::string stream(Probe& p) {
  Stream s = p.stream("/v1/responses", responses_body(p, {{"stream", true}}));
  skip_when_not_served(s);
  require(s.status == 200, fmt::format("status {}", s.status));
  require(s.chunks.size() == s.data.size(), "an event whose data is not a JSON object");
  require(!s.chunks.empty(), "no events");
  std::vector<std::string> types;
  std::string deltas;
  for (std::size_t i = 0; i < s.chunks.size(); ++i) {
    const json& e = s.chunks[i];
    require(e.contains("type") && e["type"].is_string(), fmt::format("event {} has no string type", i), cut(s.data[i]));
    const std::string type = e["type"].get<std::string>();
    require(s.names[i].empty() || s.names[i] == type, fmt::format("event {}: `event: {}` but type {}", i, s.names[i], type));
    require(e.contains("sequence_number") && e["sequence_number"] == i,
            fmt::format("event {} ({}) has sequence_number {} (0, 1, 2, ... expected)", i, type, e.value("sequence_number", json()).dump()));
    if (type == "response.output_text.delta") deltas += e.value("delta", "");
    types.push_back(type);
  }
  require(types.size() >= 4, fmt::format("{} events (created, in_progress, ..., completed at least)", types.size()));
  require(types[0] == "response.created", "the first event is " + types[0] + " (response.created)");
  require(types[1] == "response.in_progress", "the second event is " + types[1] + " (response.in_progress)");
  const std::string& last = types.back();
  require(last == "response.completed" || last == "response.incomplete", "the last event is " + last + " (response.completed)");
  // A message's events in the spec's order.
  const std::vector<std::string> order = {"response.output_item.added", "response.content_part.added", "response.output_text.delta",
                                          "response.output_text.done", "response.content_part.done", "response.output_item.done"};
  std::size_t at = 0;
  for (const std::string& want : order) {
    while (at < types.size() && types[at] != want) ++at;
    require(at < types.size(), want + " is missing or out of the spec's order");
  }
  const json& final = s.chunks.back().value("response", json());
  require_response_object(final, last + ".response");
  require(output_text(final) == deltas, "the final output_text is not the output_text deltas joined",
          cut(output_text(final)) + " vs " + cut(deltas));
  return fmt::format("{} events in order, sequence_number 0..{}", types.size(), types.size() - 1);
}

// reasoning {"effort"}: accepted and echoed; a reasoning item (a thinking model's) comes before the
// message, with a summary list and its thoughts as reasoning_text parts (the SDKs' types).
std::string reasoning(Probe& p) {
  Answer a = p.post("/v1/responses", responses_body(p, {{"reasoning", {{"effort", "low"}}}}));
  skip_when_not_served(a);
  require(a.status == 200, fmt::format("status {} with reasoning {{\"effort\": \"low\"}}", a.status));
  require_response_object(a.parsed, "the body");
  const json echoed = a.parsed.value("reasoning", json());
  require(echoed.is_object() && echoed.value("effort", json()) == "low", "reasoning.effort is not echoed as \"low\": " + cut(echoed.dump()));
  int items = 0;
  bool message_seen = false;
  for (const json& item : a.parsed["output"]) {
    const std::string type = item.is_object() ? item.value("type", "") : "";
    message_seen = message_seen || type == "message";
    if (type != "reasoning") continue;
    ++items;
    require(!message_seen, "a reasoning item after the message it reasons for");
    require(item.contains("id") && item["id"].is_string() && item.contains("summary") && item["summary"].is_array(),
            "a reasoning item without a string id and a summary list", cut(item.dump()));
    for (const json& part : item.value("content", json::array()))
      require(part.is_object() && part.value("type", "") == "reasoning_text" && part.contains("text") && part["text"].is_string(),
              "a reasoning item's content part is not {type: reasoning_text, text}", cut(part.dump()));
  }
  return fmt::format("effort echoed, {} reasoning item(s)", items);
}

std::string retrieve(Probe& p) {
  Answer a = p.post("/v1/responses", responses_body(p, {{"max_output_tokens", 4}, {"store", true}}));
  skip_when_not_served(a);
  require(a.status == 200 && a.is_json_object() && a.parsed.contains("id"), fmt::format("status {}", a.status));
  const std::string id = a.parsed["id"].get<std::string>();
  Answer got = p.get("/v1/responses/" + id);
  require(got.status == 200, fmt::format("GET /v1/responses/{}: status {}", id, got.status));
  require(got.is_json_object() && got.parsed.value("id", "") == id, "GET answered another response");
  require(output_text(got.parsed) == output_text(a.parsed), "GET's output differs from the answer's");
  return "GET /v1/responses/" + id;
}

std::string unknown_previous(Probe& p) {
  Answer a = p.post("/v1/responses", responses_body(p, {{"previous_response_id", "resp_no_such_response_conform"}}));
  skip_when_not_served(a);
  if (a.status == 200) fail_check("200: an unknown previous_response_id was answered as if new");
  require_error(a, 404);
  return "404, param " + a.parsed["error"]["param"].dump();
}

std::string bad_tool(Probe& p) {
  Answer a = p.post("/v1/responses", responses_body(p, {{"tools", json::array({{{"type", "no_such_tool_type_conform"}}})}}));
  skip_when_not_served(a);
  require_error(a, 400);
  return "400";
}

}  // namespace

void add_responses_checks(std::vector<Check>& checks) {
  checks.push_back({"responses.create", "POST /v1/responses: a response object with output_text, status and usage", create});
  checks.push_back({"responses.stream", "stream: response.created, in_progress, a message's events in order, completed; sequence_number 0, 1, ...; deltas = the final text", stream});
  checks.push_back({"responses.reasoning", "reasoning.effort accepted and echoed; reasoning items before the message, reasoning_text parts", reasoning});
  checks.push_back({"responses.retrieve", "GET /v1/responses/{id} answers a stored response", retrieve});
  checks.push_back({"responses.unknown_previous", "an unknown previous_response_id: 404 in OpenAI's error shape", unknown_previous});
  checks.push_back({"responses.bad_tool", "an unknown tool type: 400 in OpenAI's error shape", bad_tool});
}

}  // namespace inferlab::lab::conform
