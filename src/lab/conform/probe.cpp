// The conformance suite's probe (see probe.h): requests over the one HTTP client, answers kept
// byte for byte, and the shared assertions of OpenAI's shapes.
#include "lab/conform/probe.h"

#include "lab/http_client.h"
#include "inferlab/lab/openai_client.h"
#include "inferlab/lab/sse.h"
#include "inferlab/util/error.h"

namespace inferlab::lab::conform {

std::string cut(const std::string& text, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && out.size() < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  if (out.size() >= max && text.size() > max) out += fmt::format("… ({} bytes)", text.size());
  return out;
}

std::string Answer::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

std::string Stream::text_of(int index) const {
  std::string out;
  for (const json& c : chunks) {
    if (!c.contains("choices") || !c["choices"].is_array()) continue;
    for (const json& item : c["choices"]) {
      if (!item.is_object() || item.value("index", 0) != index) continue;
      if (item.contains("delta") && item["delta"].is_object() && item["delta"].contains("content") &&
          item["delta"]["content"].is_string())
        out += item["delta"]["content"].get<std::string>();
      else if (item.contains("text") && item["text"].is_string())
        out += item["text"].get<std::string>();
    }
  }
  return out;
}

std::string Stream::text() const { return text_of(0); }

Probe::Probe(const ConformOptions& options, std::string model) : options_(options), model_(std::move(model)) {
  root_ = api_root(options.base_url);
  root_.resize(root_.size() - 3);  // without /v1
}

Answer Probe::send(const std::string& path, std::optional<std::string> body, const RequestOptions& request, bool stream,
                   const std::function<bool(std::string_view)>& on_bytes) {
  last_request_ = fmt::format("{} {}{}", body ? "POST" : "GET", path, body ? " " + cut(*body, 200) : "");
  HttpRequest http;
  http.url = root_ + path;
  http.api_key = request.api_key.value_or(options_.api_key);
  http.send_authorization = request.authorization;
  http.extra_headers = request.headers;
  http.timeout_ms = static_cast<long>(options_.timeout_s * 1000);
  http.body = std::move(body);
  http.accept_event_stream = stream;
  http.http_1_1 = true;
  HttpResponse response = fetch(http, on_bytes);
  require_answer(response, fmt::format("{} {}", http.body ? "POST" : "GET", http.url));
  Answer answer;
  answer.status = response.outcome.status;
  answer.headers = std::move(response.headers);
  answer.body = std::move(response.body);
  answer.parsed = json::parse(answer.body, nullptr, false);
  last_bytes_ = answer.body;
  return answer;
}

Answer Probe::get(const std::string& path, const RequestOptions& request) { return send(path, std::nullopt, request, false, {}); }

Answer Probe::post(const std::string& path, const json& body, const RequestOptions& request) {
  return send(path, body.dump(), request, false, {});
}

Answer Probe::post_raw(const std::string& path, const std::string& body, const RequestOptions& request) {
  return send(path, body, request, false, {});
}

Stream Probe::stream(const std::string& path, const json& body, const RequestOptions& request) {
  std::string bytes;
  Answer answer = send(path, body.dump(), request, true, [&](std::string_view piece) {
    bytes.append(piece);
    return true;
  });
  Stream out;
  static_cast<Answer&>(out) = std::move(answer);
  if (out.status >= 300) return out;  // an error body: answered as JSON
  out.body = std::move(bytes);
  out.parsed = json();
  last_bytes_ = out.body;
  SseParser parser([&](const SseEvent& event) {
    out.data.push_back(event.data);
    out.names.push_back(event.event);
  });
  try {
    parser.feed(out.body);
    parser.finish();
  } catch (const Error&) {
    // Framing checks read the raw bytes; the events stay what was parsed so far.
  }
  for (const std::string& d : out.data) {
    json j = json::parse(d, nullptr, false);
    if (j.is_object()) out.chunks.push_back(std::move(j));
  }
  out.done = !out.data.empty() && out.data.back() == "[DONE]";
  return out;
}

json Probe::chat(const json& extra) const {
  json body = {{"model", model_}, {"messages", json::array({{{"role", "user"}, {"content", "Tell me about caches."}}})}};
  body.update(extra);
  return body;
}

json Probe::completion(const json& extra) const {
  json body = {{"model", model_}, {"prompt", "Once upon a time"}};
  body.update(extra);
  return body;
}

std::optional<int> Probe::context_length() {
  if (context_length_) return *context_length_;
  std::optional<int> found;
  Answer models = get("/v1/models");
  if (models.is_json_object() && models.parsed.contains("data") && models.parsed["data"].is_array())
    for (const json& m : models.parsed["data"])
      if (m.is_object() && m.value("id", "") == model_ && m.contains("max_model_len") && m["max_model_len"].is_number_integer())
        found = m["max_model_len"].get<int>();
  if (!found) {
    Answer props = get("/props");  // llama.cpp
    if (props.status == 200 && props.is_json_object()) {
      const json& settings = props.parsed.value("default_generation_settings", json::object());
      if (settings.is_object() && settings.contains("n_ctx") && settings["n_ctx"].is_number_integer())
        found = settings["n_ctx"].get<int>();
    }
  }
  context_length_ = found;
  return found;
}

std::optional<std::map<std::string, double>> Probe::metrics() {
  Answer answer = get("/metrics");
  if (answer.status != 200) return std::nullopt;
  std::map<std::string, double> out;
  std::size_t at = 0;
  while (at < answer.body.size()) {
    std::size_t end = answer.body.find('\n', at);
    if (end == std::string::npos) end = answer.body.size();
    std::string line = answer.body.substr(at, end - at);
    at = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const std::size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    try {
      out[line.substr(0, space)] = std::stod(line.substr(space + 1));
    } catch (const std::exception&) {
    }
  }
  return out;
}

void require_error(const Answer& a, long status) {
  if (a.status != status) fail_check(fmt::format("status {} (expected {})", a.status, status));
  if (!a.is_json_object()) fail_check("the error body is not a JSON object");
  if (!a.parsed.contains("error") || !a.parsed["error"].is_object())
    fail_check("no \"error\" object in the body (OpenAI: {\"error\":{\"message\",\"type\",\"param\",\"code\"}})");
  const json& e = a.parsed["error"];
  if (!e.contains("message") || !e["message"].is_string() || e["message"].get<std::string>().empty())
    fail_check("error.message is missing or not a non-empty string");
  if (!e.contains("type") || !e["type"].is_string()) fail_check("error.type is missing or not a string");
  for (const char* key : {"param", "code"})
    if (!e.contains(key)) fail_check(fmt::format("error.{} is missing (OpenAI sends it, null when it does not apply)", key));
}

void require_usage(const json& usage, const std::string& where) {
  if (!usage.is_object()) fail_check(fmt::format("{}: usage is not an object", where));
  for (const char* key : {"prompt_tokens", "completion_tokens", "total_tokens"})
    if (!usage.contains(key) || !usage[key].is_number_integer())
      fail_check(fmt::format("{}: usage.{} is missing or not an integer", where, key));
  if (usage["total_tokens"].get<long>() != usage["prompt_tokens"].get<long>() + usage["completion_tokens"].get<long>())
    fail_check(fmt::format("{}: usage.total_tokens is not prompt_tokens + completion_tokens", where));
}

const json& first_choice(const Answer& a) {
  if (a.status != 200) fail_check(fmt::format("status {} (expected 200)", a.status));
  if (!a.is_json_object() || !a.parsed.contains("choices") || !a.parsed["choices"].is_array() || a.parsed["choices"].empty())
    fail_check("no choices[] in the answer");
  return a.parsed["choices"][0];
}

}  // namespace inferlab::lab::conform
