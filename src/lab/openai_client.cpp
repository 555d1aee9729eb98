#include "inferlab/lab/openai_client.h"

#include <nlohmann/json.hpp>

#include "lab/http_client.h"
#include "inferlab/lab/sse.h"
#include "inferlab/util/error.h"

namespace inferlab::lab {

std::string api_root(std::string base_url) {
  while (!base_url.empty() && base_url.back() == '/') base_url.pop_back();
  if (base_url.empty()) fail("--base-url is empty; give e.g. http://127.0.0.1:30000/v1");
  if (!base_url.starts_with("http://") && !base_url.starts_with("https://"))
    fail("--base-url {}: expected an http:// or https:// URL", base_url);
  if (!base_url.ends_with("/v1")) base_url += "/v1";
  return base_url;
}

std::string error_message_from_body(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (j.contains("error")) {
      const auto& e = j["error"];
      if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"];
      if (e.is_string()) return e;
    }
    for (const char* key : {"message", "detail"})
      if (j.contains(key) && j[key].is_string()) return j[key];
  }
  std::string text(body.substr(0, 300));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "(empty body)" : text;
}

namespace {

std::optional<double> number_field(const nlohmann::json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}
std::optional<int64_t> integer_field(const nlohmann::json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

// inferlab's timings, or llama.cpp's (which has no queue: prompt_ms is its prefill, predicted_ms
// its decode, and no server TTFT can be told without the queue).
ServerTimings server_timings(const nlohmann::json& t) {
  ServerTimings s;
  s.queue_ms = number_field(t, "queue_ms");
  s.prefill_ms = number_field(t, "prefill_ms");
  if (!s.prefill_ms) s.prefill_ms = number_field(t, "prompt_ms");
  s.decode_ms = number_field(t, "decode_ms");
  if (!s.decode_ms) s.decode_ms = number_field(t, "predicted_ms");
  s.ttft_ms = number_field(t, "ttft_ms");
  if (!s.ttft_ms && s.queue_ms && s.prefill_ms) s.ttft_ms = *s.queue_ms + *s.prefill_ms;
  s.cached_tokens = integer_field(t, "cache_n");
  s.preemptions = integer_field(t, "preemptions");
  return s;
}

}  // namespace

StreamChunk parse_stream_chunk(std::string_view data) {
  StreamChunk chunk;
  if (data == "[DONE]") {
    chunk.done = true;
    return chunk;
  }
  auto j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    fail("the server sent a stream event that is not a JSON object: {}", std::string(data.substr(0, 200)));
  if (j.contains("error") && !j["error"].is_null()) {
    chunk.error = error_message_from_body(data);
    return chunk;
  }
  if (auto it = j.find("choices"); it != j.end() && it->is_array() && !it->empty()) {
    const auto& choice = (*it)[0];
    if (choice.is_object()) {
      if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
        // A thinking model's thoughts are generated tokens too (llama.cpp's and vLLM's
        // reasoning_content, vLLM's newer reasoning): they count for TTFT and the gaps, as the
        // peers' benchmark clients count them.
        for (const char* key : {"reasoning_content", "reasoning", "content"})
          if (auto c = d->find(key); c != d->end() && c->is_string()) chunk.content += c->get<std::string>();
        if (auto c = d->find("content"); c != d->end() && c->is_string()) chunk.answer = c->get<std::string>();
      } else if (auto t = choice.find("text"); t != choice.end() && t->is_string()) {
        chunk.content = *t;
        chunk.answer = *t;
      }
      if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string()) chunk.finish_reason = *f;
    }
  }
  // usage's cached_tokens (any server) wins over timings' cache_n.
  if (auto t = j.find("timings"); t != j.end() && t->is_object()) chunk.server.merge(server_timings(*t));
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    if (auto p = u->find("prompt_tokens"); p != u->end() && p->is_number_integer()) chunk.prompt_tokens = *p;
    if (auto c = u->find("completion_tokens"); c != u->end() && c->is_number_integer()) chunk.completion_tokens = *c;
    if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object())
      if (auto cached = integer_field(*d, "cached_tokens")) chunk.server.cached_tokens = cached;
  }
  return chunk;
}

std::string first_model_id(const std::string& base_url, const std::string& api_key, double timeout_s) {
  std::string url = api_root(base_url) + "/models";
  HttpResponse response = fetch({.url = url, .api_key = api_key, .timeout_ms = static_cast<long>(timeout_s * 1000)});
  require_answer(response, "GET " + url);
  const long status = response.outcome.status;
  const std::string& body = response.body;
  if (status < 200 || status >= 300) fail("GET {}: HTTP {}: {}", url, status, error_message_from_body(body));
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array())
    fail("GET {}: expected {{\"data\": [{{\"id\": ...}}]}}, got: {}", url, body.substr(0, 200));
  if (j["data"].empty() || !j["data"][0].is_object() || !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    fail("GET {}: the server lists no model; pass --model", url);
  return j["data"][0]["id"];
}

ChatResult chat(const ChatOptions& options, const std::string& message,
                const std::function<void(std::string_view)>& on_piece) {
  ChatResult result;
  result.model = options.model.empty() ? first_model_id(options.base_url, options.api_key, options.timeout_s)
                                       : options.model;
  nlohmann::json request = {{"model", result.model},
                            {"messages", nlohmann::json::array({{{"role", "user"}, {"content", message}}})},
                            {"max_tokens", options.max_tokens},
                            {"temperature", options.temperature},
                            {"stream", options.stream}};
  if (options.stream) request["stream_options"] = {{"include_usage", true}};
  if (options.frequency_penalty != 0) request["frequency_penalty"] = options.frequency_penalty;
  if (options.seed) request["seed"] = *options.seed;
  std::string body = request.dump();
  std::string url = api_root(options.base_url) + "/chat/completions";

  std::optional<std::string> stream_error;
  bool done = false;
  auto started = Clock::now();
  auto ms_since_start = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - started).count(); };
  SseParser parser([&](const SseEvent& event) {
    StreamChunk chunk = parse_stream_chunk(event.data);
    if (chunk.done) {
      done = true;
      return;
    }
    if (chunk.error) {
      stream_error = *chunk.error;
      return;
    }
    if (!chunk.content.empty()) {
      if (!result.first_content_ms) result.first_content_ms = ms_since_start();
      result.text += chunk.content;
      on_piece(chunk.content);
    }
    if (chunk.prompt_tokens) result.prompt_tokens = chunk.prompt_tokens;
    if (chunk.completion_tokens) result.completion_tokens = chunk.completion_tokens;
  });
  std::function<bool(std::string_view)> on_stream;
  if (options.stream)
    on_stream = [&](std::string_view bytes) {
      parser.feed(bytes);  // an unreadable stream throws: the request is hung up, the message kept
      return true;
    };
  HttpResponse response = fetch(
      {.url = url, .api_key = options.api_key, .timeout_ms = static_cast<long>(options.timeout_s * 1000), .body = body},
      on_stream);
  require_answer(response, "POST " + url);
  const long status = response.outcome.status;
  result.e2e_ms = ms_since_start();
  if (status < 200 || status >= 300) fail("POST {}: HTTP {}: {}", url, status, error_message_from_body(response.body));
  if (options.stream) {
    parser.finish();
    if (stream_error) fail("the server reported an error during the stream: {}", *stream_error);
    if (!done) fail("POST {}: the stream ended without data: [DONE]", url);
    return result;
  }
  auto j = nlohmann::json::parse(response.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("POST {}: the response is not JSON: {}", url, response.body.substr(0, 200));
  try {
    const auto& message = j.at("choices").at(0).at("message");
    for (const char* key : {"reasoning_content", "reasoning"})  // thoughts first, as they were generated
      if (auto r = message.find(key); r != message.end() && r->is_string()) result.text += r->get<std::string>();
    const auto& content = message.at("content");
    if (!content.is_null()) result.text += content.get<std::string>();
  } catch (const nlohmann::json::exception&) {
    fail("POST {}: the response has no choices[0].message.content: {}", url, response.body.substr(0, 200));
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) result.prompt_tokens = u["prompt_tokens"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
      result.completion_tokens = u["completion_tokens"];
  }
  on_piece(result.text);
  return result;
}

}  // namespace inferlab::lab
