#include "inferlab/lab/soak.h"

#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "lab/http_client.h"
#include "lab/interrupt.h"
#include "lab/timing.h"
#include "inferlab/lab/openai_client.h"
#include "inferlab/lab/schema_check.h"
#include "inferlab/lab/sse.h"
#include "inferlab/util/error.h"
#include "inferlab/util/process_memory.h"

namespace inferlab::lab {

using json = nlohmann::json;

const std::vector<std::string>& soak_prompts() {
  static const std::vector<std::string> prompts = {
      "Tell me a story about a lighthouse.",
      "大模型如何推理？",
      "List three prime numbers and explain why they are prime.",
      "Translate 'good morning' into French, German and Spanish.",
      "What is the capital of Australia?",
      "Write a haiku about autumn leaves.",
      "def fibonacci(n):",
      "Summarise the plot of a detective novel in two sentences.",
  };
  return prompts;
}

const json& soak_tool() {
  static const json tool = json::parse(R"({
    "type": "function",
    "function": {
      "name": "get_weather",
      "description": "The current weather of a city",
      "parameters": {
        "type": "object",
        "properties": {
          "city": {"type": "string", "minLength": 1, "maxLength": 40},
          "unit": {"enum": ["celsius", "fahrenheit"]},
          "days": {"type": "integer", "minimum": 0}
        },
        "required": ["city", "unit"],
        "additionalProperties": false
      },
      "strict": true
    }
  })");
  return tool;
}

const json& soak_response_schema() {
  static const json schema = json::parse(R"({
    "type": "object",
    "properties": {
      "title": {"type": "string", "maxLength": 40},
      "year": {"type": "integer", "minimum": 0},
      "genre": {"enum": ["novel", "poetry", "essay", "drama"]},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 3}
    },
    "required": ["title", "year", "genre", "tags"],
    "additionalProperties": false
  })");
  return schema;
}

namespace {

// One blocking request (baseline, /metrics): transport failures are Errors naming the URL.
HttpResponse http(const std::string& url, const std::string* post_body, const std::string& api_key, double timeout_s) {
  HttpRequest request{.url = url, .api_key = api_key, .timeout_ms = static_cast<long>(timeout_s * 1000)};
  if (post_body) request.body = *post_body;
  HttpResponse response = fetch(request);
  require_answer(response, url);
  return response;
}

// The server's root (for /metrics, /health): the API root without its /v1.
std::string server_root(const std::string& base_url) {
  std::string root = api_root(base_url);
  return root.substr(0, root.size() - 3);
}

std::optional<double> metric_value(const std::string& metrics, const std::string& name) {
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 && line[name.size()] == ' ')
      return std::stod(line.substr(name.size() + 1));
  }
  return std::nullopt;
}

struct RssReader {
  const SoakOptions& options;
  std::string metrics_url;
  std::string source;

  std::optional<int64_t> read() {
    if (options.server_pid > 0) {
      source = fmt::format("/proc/{}/statm", options.server_pid);
      return resident_bytes(options.server_pid);
    }
    try {
      auto answer = http(metrics_url, nullptr, options.api_key, 10);
      if (answer.outcome.status == 200)
        if (auto v = metric_value(answer.body, "process_resident_memory_bytes")) {
          source = "/metrics process_resident_memory_bytes";
          return static_cast<int64_t>(*v);
        }
    } catch (const Error&) {
    }
    source = "not read: /metrics has no process_resident_memory_bytes and no --server-pid was given";
    return std::nullopt;
  }
};

// What a valid request asks for: a plain chat, a forced tool call, or a json_schema answer.
enum class Shape { text, tool_call, json_schema };
constexpr int kShapes = 3;

json chat_body(const SoakOptions& options, const std::string& model, const std::string& prompt, bool stream,
               Shape shape) {
  json body = {{"model", model},
               {"messages", json::array({{{"role", "user"}, {"content", prompt}}})},
               {"max_tokens", shape == Shape::text ? options.max_tokens : options.structured_max_tokens},
               {"temperature", 0},
               {"stream", stream}};
  if (stream) body["stream_options"] = {{"include_usage", true}};
  if (shape == Shape::tool_call) {
    body["tools"] = json::array({soak_tool()});
    body["tool_choice"] = "required";
    body["parallel_tool_calls"] = false;
  } else if (shape == Shape::json_schema) {
    body["response_format"] = {{"type", "json_schema"},
                               {"json_schema", {{"name", "book"}, {"schema", soak_response_schema()}, {"strict", true}}}};
  }
  return body;
}

// Deliberately invalid requests; each must be answered 4xx in OpenAI's error shape.
constexpr int kMalformedVariants = 12;
std::string malformed_body(int variant, const std::string& model, const std::string& prompt) {
  json user = json::array({{{"role", "user"}, {"content", prompt}}});
  switch (variant % kMalformedVariants) {
    case 0: return R"({"model": ")" + model + R"(", "messages": [{"role": "user", "content": "unterminated)";
    case 1: return json{{"model", model}, {"messages", "not an array"}}.dump();
    case 2: return json{{"model", model}, {"messages", user}, {"max_tokens", -5}}.dump();
    case 3: return json{{"model", model}, {"messages", user}, {"temperature", "hot"}}.dump();
    case 4: return json{{"model", "no-such-model-here"}, {"messages", user}}.dump();
    case 5: return "";
    case 6: return json{{"model", model}, {"messages", user}, {"max_tokens", 1000000000}}.dump();
    case 7: return json{{"model", model}, {"messages", json::array({{{"content", "no role"}}})}}.dump();
    case 8: return std::string("\xff\xfe\x00garbage", 10);
    case 9: return json{{"model", model}, {"messages", user}, {"n", 0}}.dump();
    case 10: {  // a strict tool whose schema names a type that does not exist
      json tool = soak_tool();
      tool["function"]["parameters"]["properties"]["city"]["type"] = "strnig";
      return json{{"model", model}, {"messages", user}, {"tools", json::array({tool})}, {"tool_choice", "required"}}.dump();
    }
    default:  // response_format json_schema without a schema
      return json{{"model", model}, {"messages", user},
                  {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "book"}}}}}}.dump();
  }
}

// A tool call as answered: its function's name and its arguments string.
struct ToolCall {
  std::string name, arguments;
  bool operator==(const ToolCall&) const = default;
};

struct Baseline {
  std::string text;
  std::string finish_reason;
  std::vector<ToolCall> calls;
};

// message.tool_calls of a non-streamed answer.
std::vector<ToolCall> tool_calls_of(const json& message) {
  std::vector<ToolCall> calls;
  if (!message.is_object() || !message.contains("tool_calls") || !message["tool_calls"].is_array()) return calls;
  for (const json& call : message["tool_calls"]) {
    const json& f = call.contains("function") && call["function"].is_object() ? call["function"] : json::object();
    calls.push_back({f.value("name", ""), f.contains("arguments") && f["arguments"].is_string() ? f["arguments"].get<std::string>() : ""});
  }
  return calls;
}

enum class Kind { stream, plain, malformed };

// One request of the mix and what came back.
struct SoakTransfer {
  int64_t number = 0;
  Kind kind = Kind::plain;
  Shape shape = Shape::text;
  std::size_t prompt = 0;
  int malformed_variant = 0;
  int cancel_after_chunks = -1;  // streams: hang up once this many content or tool-call chunks arrived
  std::optional<Clock::time_point> cancel_at;  // non-streams: hang up at this time
  bool cancelled = false;
  StreamPool::TransferId id = 0;

  std::string response;  // non-stream body, or an error body
  bool retry_after = false;

  std::unique_ptr<SseParser> parser;
  std::set<std::string> chunk_ids;
  std::set<std::string> chunk_models;
  std::string text;
  std::map<int, ToolCall> streamed_calls;  // tool_calls deltas reassembled by index
  int answer_chunks = 0;
  std::optional<std::string> finish_reason, stream_error;
  bool done = false;
  std::string parse_problem;

  void on_event(const SseEvent& event) {
    if (done) {
      parse_problem = "data after [DONE]";
      return;
    }
    StreamChunk chunk;
    try {
      chunk = parse_stream_chunk(event.data);
    } catch (const Error& e) {
      parse_problem = e.what();
      return;
    }
    if (chunk.done) {
      done = true;
      return;
    }
    if (chunk.error) {
      stream_error = chunk.error;
      return;
    }
    auto j = json::parse(event.data, nullptr, false);
    if (j.is_object()) {
      if (j.contains("id") && j["id"].is_string()) chunk_ids.insert(j["id"].get<std::string>());
      if (j.contains("model") && j["model"].is_string()) chunk_models.insert(j["model"].get<std::string>());
      const json* delta = j.contains("choices") && j["choices"].is_array() && !j["choices"].empty() &&
                                  j["choices"][0].is_object() && j["choices"][0].contains("delta")
                              ? &j["choices"][0]["delta"] : nullptr;
      if (delta && delta->is_object() && delta->contains("tool_calls") && (*delta)["tool_calls"].is_array())
        for (const json& call : (*delta)["tool_calls"]) {
          ToolCall& c = streamed_calls[call.value("index", 0)];
          if (!call.contains("function") || !call["function"].is_object()) continue;
          const json& f = call["function"];
          if (f.contains("name") && f["name"].is_string()) c.name += f["name"].get<std::string>();
          if (f.contains("arguments") && f["arguments"].is_string()) c.arguments += f["arguments"].get<std::string>();
          ++answer_chunks;
        }
    }
    if (!chunk.content.empty()) {
      text += chunk.content;
      ++answer_chunks;
    }
    if (chunk.finish_reason) finish_reason = chunk.finish_reason;
  }

  bool on_body(long status, std::string_view bytes) {
    if (kind != Kind::stream || status != 200) {
      if (response.size() < (4u << 20)) response.append(bytes);
      return true;
    }
    try {
      parser->feed(bytes);
    } catch (const Error& e) {
      parse_problem = e.what();
      return false;
    }
    if (cancel_after_chunks >= 0 && answer_chunks >= cancel_after_chunks && !done) {
      cancelled = true;
      return false;  // the client hangs up mid-stream
    }
    return true;
  }

  void on_header(std::string_view line) {
    if (line.size() >= 12 && strncasecmp(line.data(), "retry-after:", 12) == 0) retry_after = true;
  }
};

}  // namespace

bool SoakReport::ok(double rss_tolerance) const {
  if (!interrupted_by.empty()) return false;  // a partial run proves nothing about going idle or memory
  if (lost || mixed_up || http_5xx || unexpected_status || schema_broken || !server_idle) return false;
  if (rss_idle_bytes && rss_end_bytes && *rss_end_bytes > *rss_idle_bytes * (1 + rss_tolerance)) return false;
  return completed > 0;
}

std::string SoakReport::text(double rss_tolerance) const {
  std::string out;
  auto line = [&](const std::string& name, const std::string& value) { out += fmt::format("{:<28}{}\n", name, value); };
  out += fmt::format("soak of '{}': {:.1f} s including the warm-up, {} prompts (greedy baselines taken first)\n", model,
                     duration_s, prompts);
  line("requests started", std::to_string(started));
  line("completed (whole, matched)", fmt::format("{} ({} streamed, {} not; {} tool calls, {} json_schema)", completed,
                                                  completed_stream, completed - completed_stream, completed_tool_calls,
                                                  completed_json_schema));
  if (structured_cut) line("JSON cut by max_tokens", fmt::format("{} (unfinished, so not schema-checked)", structured_cut));
  line("cancelled by the client", std::to_string(cancelled));
  if (!interrupted_by.empty()) line("cut off by the interrupt", std::to_string(interrupted_in_flight));
  line("malformed -> 4xx", std::to_string(malformed_4xx));
  line("overload 503", std::to_string(overload_503));
  line("lost", std::to_string(lost));
  line("mixed-up", std::to_string(mixed_up));
  line("5xx (not overload)", std::to_string(http_5xx));
  line("unexpected status", std::to_string(unexpected_status));
  line("schema broken", std::to_string(schema_broken));
  auto mib = [](std::optional<int64_t> b) { return b ? fmt::format("{:.1f} MiB", *b / 1048576.0) : std::string("-"); };
  if (rss_idle_bytes && rss_end_bytes) {
    auto change = [&](std::optional<int64_t> from) {
      return from ? fmt::format("{:+.1f} %", 100.0 * (static_cast<double>(*rss_end_bytes) / static_cast<double>(*from) - 1))
                  : std::string("-");
    };
    line("server RSS", fmt::format("cold {}, idle after warm-up {}, peak {}, end {} ({} vs idle, limit +{:.0f} %; {} vs cold) [{}]",
                                   mib(rss_cold_bytes), mib(rss_idle_bytes), mib(rss_peak_bytes), mib(rss_end_bytes),
                                   change(rss_idle_bytes), rss_tolerance * 100, change(rss_cold_bytes), rss_source));
  } else {
    line("server RSS", rss_source);
  }
  line("server idle afterwards", (server_idle ? "yes" : "NO") + (idle_detail.empty() ? "" : " (" + idle_detail + ")"));
  if (!problems.empty()) {
    out += "problems:\n";
    for (const auto& [message, count] : problems) out += fmt::format("  {} x {}\n", count, message);
  }
  for (const auto& e : examples) out += "  e.g. " + e + "\n";
  if (!interrupted_by.empty())
    out += fmt::format("PARTIAL: interrupted by {}; the counts cover the requests finished before it (idle and memory "
                       "not checked)\n", interrupted_by);
  else out += ok(rss_tolerance) ? "PASS\n" : "FAIL\n";
  return out;
}

SoakReport run_soak(const SoakOptions& o) {
  if (!(o.duration_s > 0)) fail("--duration must be positive, got {}", o.duration_s);
  if (o.concurrency < 1) fail("--concurrency must be at least 1, got {}", o.concurrency);
  for (auto [name, p] : {std::pair{"--cancel-rate", o.cancel_rate}, {"--malformed-rate", o.malformed_rate},
                         {"--stream-fraction", o.stream_fraction}, {"--tool-call-rate", o.tool_call_rate},
                         {"--json-schema-rate", o.json_schema_rate}})
    if (!(p >= 0 && p <= 1)) fail("{} must be between 0 and 1, got {}", name, p);
  if (o.cancel_rate + o.malformed_rate > 1) fail("--cancel-rate + --malformed-rate must not exceed 1");
  if (o.tool_call_rate + o.json_schema_rate > 1) fail("--tool-call-rate + --json-schema-rate must not exceed 1");
  if (o.max_tokens < 1) fail("--max-tokens must be at least 1, got {}", o.max_tokens);
  if (o.structured_max_tokens < 1) fail("--structured-max-tokens must be at least 1, got {}", o.structured_max_tokens);

  SoakReport report;
  // Ctrl-C or SIGTERM: stop sending, cut off what is in flight, and print what was counted.
  InterruptScope interrupt;
  const std::string api = api_root(o.base_url);
  const std::string url = api + "/chat/completions";
  report.model = o.model.empty() ? first_model_id(o.base_url, o.api_key, 30) : o.model;
  const std::vector<std::string>& prompts = o.prompts.empty() ? soak_prompts() : o.prompts;
  report.prompts = static_cast<int>(prompts.size());
  const std::string metrics_url = server_root(o.base_url) + "/metrics";
  RssReader rss{o, metrics_url, ""};
  auto problem = [&](const std::string& message, const std::string& example) {
    if (++report.problems[message] == 1 && report.examples.size() < 8) report.examples.push_back(example);
  };

  // Sequential greedy baseline: what each prompt must give in each shape, whatever else is running.
  // Only the shapes the mix sends are asked for (a server without tools is soaked with --tool-call-rate 0).
  std::vector<Baseline> baselines(prompts.size() * kShapes);
  auto baseline = [&](Shape shape, std::size_t prompt) -> Baseline& { return baselines[prompt * kShapes + static_cast<int>(shape)]; };
  for (Shape shape : {Shape::text, Shape::tool_call, Shape::json_schema}) {
    if ((shape == Shape::tool_call && o.tool_call_rate == 0) || (shape == Shape::json_schema && o.json_schema_rate == 0)) continue;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      if (interrupt.signal()) {
        report.interrupted_by = interrupt.name();
        return report;
      }
      std::string body = chat_body(o, report.model, prompts[i], false, shape).dump();
      HttpResponse answer = http(url, &body, o.api_key, o.request_timeout_s);
      if (answer.outcome.status != 200)
        fail("baseline {}request failed with HTTP {}: {}",
             shape == Shape::tool_call ? "tool-call " : shape == Shape::json_schema ? "json_schema " : "",
             answer.outcome.status, error_message_from_body(answer.body));
      auto j = json::parse(answer.body, nullptr, false);
      if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].empty())
        fail("baseline answer is not a chat completion: {}", answer.body.substr(0, 300));
      const json& choice = j["choices"][0];
      const json& message = choice["message"];
      baseline(shape, i) = {message.contains("content") && message["content"].is_string() ? message["content"].get<std::string>() : "",
                            choice.value("finish_reason", ""), tool_calls_of(message)};
    }
  }
  report.rss_cold_bytes = rss.read();
  report.rss_peak_bytes = report.rss_cold_bytes;

  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  StreamPool pool(static_cast<std::size_t>(o.concurrency));
  std::map<StreamPool::TransferId, std::shared_ptr<SoakTransfer>> running;
  std::set<std::string> seen_ids;
  int64_t number = 0;

  auto describe = [&](const SoakTransfer& t) {
    return fmt::format("request {} ({}{}, prompt {})", t.number,
                       t.kind == Kind::stream ? "stream" : t.kind == Kind::plain ? "non-stream" : "malformed",
                       t.kind == Kind::malformed ? "" : t.shape == Shape::tool_call ? ", tool call"
                                                      : t.shape == Shape::json_schema ? ", json_schema" : "",
                       t.prompt);
  };

  // Classifies one finished transfer into exactly one count.
  auto judge = [&](SoakTransfer& t, const TransferOutcome& outcome) {
    using End = TransferOutcome::End;
    const long status = outcome.status;
    if (outcome.end == End::cancelled && interrupt.signal()) return void(++report.interrupted_in_flight);
    if (outcome.end == End::cancelled || (t.cancelled && outcome.end == End::hung_up)) return void(++report.cancelled);
    if (outcome.end != End::answered) {
      ++report.lost;
      return problem(fmt::format("transport: {}", outcome.error_kind), describe(t) + ": " + outcome.error);
    }
    if (status == 503) {
      ++report.overload_503;
      if (!t.retry_after) problem("503 without Retry-After", describe(t));
      return;
    }
    if (status >= 500) {
      ++report.http_5xx;
      return problem(fmt::format("HTTP {}", status), describe(t) + ": " + error_message_from_body(t.response));
    }
    if (t.kind == Kind::malformed) {
      auto j = json::parse(t.response, nullptr, false);
      bool shaped = j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message");
      if (status >= 400 && status < 500 && shaped) return void(++report.malformed_4xx);
      ++report.unexpected_status;
      return problem(fmt::format("malformed request #{} answered HTTP {}{}", t.malformed_variant, status,
                                 shaped ? "" : " without an OpenAI error body"),
                     describe(t) + ": " + t.response.substr(0, 200));
    }
    if (status != 200) {
      ++report.unexpected_status;
      return problem(fmt::format("valid request answered HTTP {}", status), describe(t) + ": " + error_message_from_body(t.response));
    }
    const Baseline& expected = baseline(t.shape, t.prompt);
    std::string id, model, text, finish;
    std::vector<ToolCall> calls;
    if (t.kind == Kind::stream) {
      if (t.stream_error) {
        ++report.lost;
        return problem("error event in the stream", describe(t) + ": " + *t.stream_error);
      }
      if (!t.parse_problem.empty()) {
        ++report.lost;
        return problem("unreadable stream", describe(t) + ": " + t.parse_problem);
      }
      if (!t.done || !t.finish_reason) {
        ++report.lost;
        return problem(!t.done ? "stream ended without [DONE]" : "stream without finish_reason", describe(t));
      }
      if (t.chunk_ids.size() != 1) {
        ++report.mixed_up;
        return problem("chunks of one stream carry different ids", describe(t));
      }
      id = *t.chunk_ids.begin();
      model = t.chunk_models.size() == 1 ? *t.chunk_models.begin() : "";
      text = t.text;
      finish = *t.finish_reason;
      for (const auto& [index, call] : t.streamed_calls) calls.push_back(call);
    } else {
      auto j = json::parse(t.response, nullptr, false);
      if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].size() != 1 ||
          !j["choices"][0].contains("message")) {
        ++report.lost;
        return problem("incomplete non-stream answer", describe(t) + ": " + t.response.substr(0, 200));
      }
      id = j.value("id", "");
      model = j.value("model", "");
      const json& c = j["choices"][0];
      text = c["message"].is_object() && c["message"].contains("content") && c["message"]["content"].is_string()
                 ? c["message"]["content"].get<std::string>() : "";
      finish = c.contains("finish_reason") && c["finish_reason"].is_string() ? c["finish_reason"].get<std::string>() : "";
      calls = tool_calls_of(c["message"]);
      if (finish.empty()) {
        ++report.lost;
        return problem("non-stream answer without finish_reason", describe(t));
      }
    }
    if (id.empty() || !seen_ids.insert(id).second) {
      ++report.mixed_up;
      return problem(id.empty() ? "answer without an id" : "an id answered twice", describe(t) + ": id " + id);
    }
    if (model != report.model) {
      ++report.mixed_up;
      return problem("answer names another model", describe(t) + ": model " + model);
    }
    // A structured answer that finished must be JSON that its schema allows; one cut by max_tokens
    // is unfinished JSON by construction (its baseline was cut the same way).
    if (t.shape != Shape::text && finish != "length") {
      std::vector<std::string> broken;
      if (t.shape == Shape::tool_call) {
        if (calls.empty()) broken.push_back("tool_choice required answered without a tool call");
        for (const ToolCall& call : calls) {
          if (call.name != soak_tool()["function"]["name"]) broken.push_back("call of an unknown function '" + call.name + "'");
          auto args = json::parse(call.arguments, nullptr, false);
          if (args.is_discarded()) broken.push_back("arguments are not JSON: " + call.arguments.substr(0, 80));
          else for (auto& v : schema_violations(soak_tool()["function"]["parameters"], args)) broken.push_back(v);
        }
      } else {
        auto value = json::parse(text, nullptr, false);
        if (value.is_discarded()) broken.push_back("content is not JSON: " + text.substr(0, 80));
        else broken = schema_violations(soak_response_schema(), value);
      }
      if (!broken.empty()) {
        ++report.schema_broken;
        return problem(t.shape == Shape::tool_call ? "tool call breaks the tool's schema" : "json_schema answer breaks its schema",
                       describe(t) + ": " + broken.front());
      }
    }
    if (text != expected.text || finish != expected.finish_reason || calls != expected.calls) {
      ++report.mixed_up;
      auto shown = [](const std::string& text, const std::vector<ToolCall>& calls) {
        return calls.empty() ? fmt::format("{:?}", text.substr(0, 80))
                             : fmt::format("call {}({})", calls[0].name, calls[0].arguments.substr(0, 80));
      };
      return problem(t.kind == Kind::stream ? "streamed answer differs from the greedy baseline"
                                            : "non-stream answer differs from the greedy baseline",
                     fmt::format("{}: got {} ({}), baseline {} ({})", describe(t), shown(text, calls), finish,
                                 shown(expected.text, expected.calls), expected.finish_reason));
    }
    ++report.completed;
    if (t.kind == Kind::stream) ++report.completed_stream;
    if (t.shape == Shape::tool_call) ++report.completed_tool_calls;
    if (t.shape == Shape::json_schema) ++report.completed_json_schema;
    if (t.shape != Shape::text && finish == "length") ++report.structured_cut;
  };

  auto start_one = [&] {
    auto t = std::make_shared<SoakTransfer>();
    std::string body;
    t->number = ++number;
    t->prompt = static_cast<std::size_t>(rng() % prompts.size());
    double pick = unit(rng);
    bool stream = unit(rng) < o.stream_fraction;
    double shape = unit(rng);
    if (pick < o.malformed_rate) {
      t->kind = Kind::malformed;
      t->malformed_variant = static_cast<int>(rng() % kMalformedVariants);
      body = malformed_body(t->malformed_variant, report.model, prompts[t->prompt]);
    } else {
      t->kind = stream ? Kind::stream : Kind::plain;
      t->shape = shape < o.tool_call_rate                        ? Shape::tool_call
                 : shape < o.tool_call_rate + o.json_schema_rate ? Shape::json_schema
                                                                 : Shape::text;
      body = chat_body(o, report.model, prompts[t->prompt], stream, t->shape).dump();
      if (pick < o.malformed_rate + o.cancel_rate) {
        if (stream) t->cancel_after_chunks = static_cast<int>(rng() % (o.max_tokens / 2 + 1));
        else t->cancel_at = Clock::now() + std::chrono::milliseconds(rng() % 300);
      }
    }
    if (t->kind == Kind::stream)
      t->parser = std::make_unique<SseParser>([raw = t.get()](const SseEvent& e) { raw->on_event(e); });
    t->id = pool.start(
        {.url = url, .api_key = o.api_key, .timeout_ms = static_cast<long>(o.request_timeout_s * 1000), .body = std::move(body)},
        {.on_header = [t](std::string_view line) { t->on_header(line); },
         .on_body = [t](long status, std::string_view bytes) { return t->on_body(status, bytes); },
         .on_done =
             [&, t](const TransferOutcome& outcome) {
               running.erase(t->id);
               judge(*t, outcome);
             }});
    running.emplace(t->id, t);
    ++report.started;
  };

  auto run_phase = [&](double seconds) {
    const Clock::time_point start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    auto next_rss = start + std::chrono::seconds(1);
    auto last_progress = start;
    for (;;) {
      if (interrupt.signal()) {
        report.interrupted_by = interrupt.name();
        pool.cancel_all();
        break;
      }
      const bool launching = Clock::now() < end;
      while (launching && pool.in_flight() < static_cast<std::size_t>(o.concurrency)) start_one();
      if (!launching && pool.in_flight() == 0) break;
      pool.perform();
      // Time-based cancellations of non-streaming requests: hang up before the answer came.
      const auto now = Clock::now();
      std::vector<StreamPool::TransferId> to_cancel;
      for (const auto& [id, t] : running)
        if (t->cancel_at && *t->cancel_at <= now) to_cancel.push_back(id);
      for (StreamPool::TransferId id : to_cancel) pool.cancel(id);
      if (now >= next_rss) {
        next_rss = now + std::chrono::seconds(1);
        if (auto r = rss.read(); r && (!report.rss_peak_bytes || *r > *report.rss_peak_bytes)) report.rss_peak_bytes = r;
      }
      if (o.progress && now - last_progress > std::chrono::seconds(1)) {
        last_progress = now;
        std::fprintf(stderr, "\r%.0f s: %lld started, %lld completed, %lld cancelled, %lld 4xx, %lld 503, %lld problems ",
                     seconds_since(start), static_cast<long long>(report.started), static_cast<long long>(report.completed),
                     static_cast<long long>(report.cancelled), static_cast<long long>(report.malformed_4xx),
                     static_cast<long long>(report.overload_503),
                     static_cast<long long>(report.lost + report.mixed_up + report.http_5xx + report.unexpected_status));
        std::fflush(stderr);
      }
      pool.wait(50);
    }
    if (o.progress) std::fputc('\n', stderr);
    return seconds_since(start);
  };

  // Back to idle: nothing running, queued or streaming, no KV blocks held by sequences.
  auto wait_idle = [&] {
    const auto settle_end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.settle_s));
    for (;;) {
      std::string detail;
      bool idle = false;
      try {
        HttpResponse m = http(metrics_url, nullptr, o.api_key, 10);
        if (m.outcome.status != 200) {
          detail = fmt::format("GET /metrics: HTTP {}", m.outcome.status);
        } else {
          idle = true;
          for (const char* name : {"inferlab_running_requests", "inferlab_queue_length", "inferlab_active_streams",
                                   "inferlab_kv_cache_blocks_used"}) {
            auto v = metric_value(m.body, name);
            if (!v) continue;  // a server without this gauge: nothing to check
            if (*v != 0) {
              idle = false;
              detail += fmt::format("{}{} = {}", detail.empty() ? "" : ", ", name, *v);
            }
          }
        }
      } catch (const Error& e) {
        detail = e.what();
      }
      if (idle || Clock::now() > settle_end) {
        report.server_idle = idle;
        report.idle_detail = idle ? "" : detail + fmt::format(" after {:.0f} s", o.settle_s);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  };

  // The idle level is taken after a warm-up at full concurrency: the allocator's arenas and the
  // connection threads' stacks grow to their working size once, and that is not a leak.
  const double warmup = o.warmup_s >= 0 ? o.warmup_s : std::min(30.0, o.duration_s / 10);
  if (warmup > 0) {
    report.duration_s = run_phase(warmup);
    if (interrupt.signal()) return report;
    wait_idle();
  }
  // The server returns freed heap memory to the OS a moment after it goes idle (malloc_trim).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  report.rss_idle_bytes = rss.read();
  if (report.rss_idle_bytes && (!report.rss_peak_bytes || *report.rss_idle_bytes > *report.rss_peak_bytes))
    report.rss_peak_bytes = report.rss_idle_bytes;
  report.duration_s = run_phase(o.duration_s) + warmup;
  if (interrupt.signal()) return report;
  wait_idle();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  report.rss_end_bytes = rss.read();
  report.rss_source = rss.source;
  return report;
}

}  // namespace inferlab::lab
