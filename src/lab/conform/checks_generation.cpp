// Conformance checks: what the request fields do — finish reasons, stop strings, token limits,
// n, logprobs, seeds, temperature 0, tool calls.
#include "lab/conform/probe.h"

namespace inferlab::lab::conform {
namespace {

const std::string kPrompt = "Once upon a time";

// A greedy completion of the shared prompt, with the tokens it was made of when the server sends
// logprobs (so a stop string can be placed across a token boundary).
struct Greedy {
  std::string text;
  std::vector<std::string> tokens;
};

Greedy greedy_completion(Probe& p, int max_tokens) {
  Answer a = p.post("/v1/completions", p.completion({{"max_tokens", max_tokens}, {"temperature", 0}, {"logprobs", 1}}));
  if (a.status == 400) a = p.post("/v1/completions", p.completion({{"max_tokens", max_tokens}, {"temperature", 0}}));
  const json& c = first_choice(a);
  Greedy g;
  g.text = c.value("text", "");
  if (c.contains("logprobs") && c["logprobs"].is_object() && c["logprobs"].contains("tokens") && c["logprobs"]["tokens"].is_array())
    for (const json& t : c["logprobs"]["tokens"])
      if (t.is_string()) g.tokens.push_back(t);
  return g;
}

// Three characters of `text` that span a token boundary (the last character of one token, the
// first two of the next), when the token pieces add up to the text; else three from the middle.
// Returns the stop string and the text before its first occurrence.
std::pair<std::string, std::string> stop_across_tokens(const Greedy& g) {
  auto utf8_len = [](unsigned char c) { return c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1; };
  std::string joined;
  for (const auto& t : g.tokens) joined += t;
  std::size_t start = std::string::npos;
  if (joined == g.text) {
    std::size_t offset = 0;
    for (std::size_t i = 0; i + 1 < g.tokens.size() && start == std::string::npos; ++i) {
      offset += g.tokens[i].size();
      // The boundary after token i, not too early, with a character before it and two after.
      if (offset >= 4 && offset + 6 <= g.text.size() && !g.tokens[i].empty() && g.tokens[i + 1].size() >= 1) {
        std::size_t back = offset - 1;
        while (back > 0 && (static_cast<unsigned char>(g.text[back]) & 0xc0) == 0x80) --back;
        start = back;
      }
    }
  }
  if (start == std::string::npos) {
    start = g.text.size() / 2;
    while (start > 0 && (static_cast<unsigned char>(g.text[start]) & 0xc0) == 0x80) --start;
  }
  std::size_t end = start;
  for (int k = 0; k < 3 && end < g.text.size(); ++k) end += utf8_len(static_cast<unsigned char>(g.text[end]));
  std::string stop = g.text.substr(start, end - start);
  return {stop, g.text.substr(0, g.text.find(stop))};
}

std::string finish_length(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 3}, {"temperature", 0}}));
  const json& c = first_choice(a);
  const long n = a.parsed["usage"].value("completion_tokens", -1L);
  const std::string finish = c.value("finish_reason", "");
  if (finish == "stop" && n < 3) skip_check("the model ended before 3 tokens");
  require(finish == "length", fmt::format("finish_reason \"{}\" after max_tokens 3", finish));
  require(n == 3, fmt::format("usage.completion_tokens {} for finish length at max_tokens 3", n));
  return "length at 3 tokens";
}

std::string finish_stop(Probe& p) {
  Greedy g = greedy_completion(p, 24);
  if (g.text.size() < 8) skip_check("the greedy text is too short to hold a stop string");
  auto [stop, before] = stop_across_tokens(g);
  Answer a = p.post("/v1/completions", p.completion({{"max_tokens", 24}, {"temperature", 0}, {"stop", stop}}));
  const json& c = first_choice(a);
  require(c.value("finish_reason", "") == "stop", fmt::format("finish_reason \"{}\" for the stop string {}",
                                                              c.value("finish_reason", ""), json(stop).dump()));
  return "stop";
}

std::string stop_not_leaked(Probe& p) {
  Greedy g = greedy_completion(p, 24);
  if (g.text.size() < 8) skip_check("the greedy text is too short to hold a stop string");
  auto [stop, before] = stop_across_tokens(g);
  Answer a = p.post("/v1/completions", p.completion({{"max_tokens", 24}, {"temperature", 0}, {"stop", {stop, "\x01never"}}}));
  const std::string text = first_choice(a).value("text", "");
  if (text != before)
    fail_check(fmt::format("stop {} ({} tokens known): the text is not the greedy text up to the stop", json(stop).dump(), g.tokens.size()),
               cut("got: " + text + " | expected: " + before));
  return fmt::format("stop {} cut the text at byte {}", json(stop).dump(), before.size());
}

std::string stop_stream(Probe& p) {
  Greedy g = greedy_completion(p, 24);
  if (g.text.size() < 8) skip_check("the greedy text is too short to hold a stop string");
  auto [stop, before] = stop_across_tokens(g);
  Stream s = p.stream("/v1/completions", p.completion({{"max_tokens", 24}, {"temperature", 0}, {"stop", stop}, {"stream", true}}));
  require(s.status == 200, fmt::format("status {}", s.status));
  if (s.text() != before)
    fail_check(fmt::format("streamed with stop {}: the text is not the greedy text up to the stop (the stop string or "
                           "part of it leaked, or text is missing)", json(stop).dump()),
               cut("got: " + s.text() + " | expected: " + before));
  std::string finish;
  for (const json& c : s.chunks)
    for (const json& item : c.value("choices", json::array()))
      if (item.contains("finish_reason") && item["finish_reason"].is_string()) finish = item["finish_reason"];
  require(finish == "stop", fmt::format("finish_reason \"{}\"", finish));
  return "no part of the stop string streamed";
}

std::string max_tokens(Probe& p) {
  Answer a = p.post("/v1/completions", p.completion({{"max_tokens", 5}, {"temperature", 0}}));
  first_choice(a);
  const long n = a.parsed["usage"].value("completion_tokens", -1L);
  require(n >= 0 && n <= 5, fmt::format("{} completion tokens for max_tokens 5", n));
  return fmt::format("{} tokens", n);
}

std::string max_completion_tokens(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_completion_tokens", 4}, {"temperature", 0}}));
  if (a.status == 400) fail_check("max_completion_tokens refused (OpenAI's current name for max_tokens)");
  const json& c = first_choice(a);
  const long n = a.parsed["usage"].value("completion_tokens", -1L);
  require(n >= 0 && n <= 4, fmt::format("{} completion tokens for max_completion_tokens 4 (ignored?)", n));
  if (n == 4) require(c.value("finish_reason", "") == "length", "finish_reason is not length at the limit");
  return fmt::format("{} tokens", n);
}

std::string n_choices(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 4}, {"n", 2}, {"temperature", 1}, {"seed", 7}}));
  if (a.status == 400) skip_check("n > 1 is refused");
  first_choice(a);
  const json& choices = a.parsed["choices"];
  require(choices.size() == 2, fmt::format("{} choices for n 2", choices.size()));
  require(choices[0].value("index", -1) == 0 && choices[1].value("index", -1) == 1, "choice indexes are not 0 and 1");
  return "2 choices";
}

std::string n_stream(Probe& p) {
  Stream s = p.stream("/v1/chat/completions", p.chat({{"max_tokens", 4}, {"n", 2}, {"stream", true}, {"temperature", 1}, {"seed", 7}}));
  if (s.status == 400) skip_check("n > 1 is refused");
  require(s.status == 200, fmt::format("status {}", s.status));
  int finishes[2] = {0, 0};
  for (const json& c : s.chunks)
    for (const json& item : c.value("choices", json::array())) {
      const int index = item.value("index", -1);
      require(index == 0 || index == 1, fmt::format("a choice index {} for n 2", index), cut(c.dump()));
      if (item.contains("finish_reason") && item["finish_reason"].is_string()) ++finishes[index];
    }
  require(finishes[0] == 1 && finishes[1] == 1, fmt::format("finish_reason chunks per choice: {} and {}", finishes[0], finishes[1]));
  return "two indexed choices, one finish each";
}

void require_chat_logprob_entry(const json& e, int top) {
  require(e.is_object() && e.contains("token") && e["token"].is_string(), "a logprobs.content entry without token", cut(e.dump()));
  require(e.contains("logprob") && e["logprob"].is_number() && e["logprob"].get<double>() <= 1e-6, "logprob is not a number ≤ 0", cut(e.dump()));
  require(e.contains("bytes") && (e["bytes"].is_null() || e["bytes"].is_array()), "bytes is not a list or null", cut(e.dump()));
  require(e.contains("top_logprobs") && e["top_logprobs"].is_array(), "top_logprobs is not a list", cut(e.dump()));
  require(static_cast<int>(e["top_logprobs"].size()) == top, fmt::format("{} top_logprobs for top_logprobs {}", e["top_logprobs"].size(), top),
          cut(e.dump()));
  for (const json& t : e["top_logprobs"])
    require(t.is_object() && t.contains("token") && t.contains("logprob") && t.contains("bytes"),
            "a top_logprobs entry is not {token, logprob, bytes}", cut(t.dump()));
}

std::string logprobs_chat(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 4}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}}));
  if (a.status == 400) skip_check("logprobs refused");
  const json& c = first_choice(a);
  require(c.contains("logprobs") && c["logprobs"].is_object() && c["logprobs"].contains("content") && c["logprobs"]["content"].is_array(),
          "choices[0].logprobs.content is not a list");
  const json& content = c["logprobs"]["content"];
  require(static_cast<long>(content.size()) == a.parsed["usage"].value("completion_tokens", -1L),
          fmt::format("{} logprobs entries for {} completion tokens", content.size(), a.parsed["usage"].value("completion_tokens", -1L)));
  for (const json& e : content) require_chat_logprob_entry(e, 2);
  return fmt::format("{} entries, 2 alternatives each", content.size());
}

std::string logprobs_absent(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 2}}));
  const json& c = first_choice(a);
  require(!c.contains("logprobs") || c["logprobs"].is_null(), "logprobs sent without being asked for", cut(c.dump()));
  return "null";
}

std::string logprobs_completions(Probe& p) {
  Answer a = p.post("/v1/completions", p.completion({{"max_tokens", 4}, {"temperature", 0}, {"logprobs", 2}}));
  if (a.status == 400) skip_check("logprobs refused on /v1/completions");
  const json& c = first_choice(a);
  require(c.contains("logprobs") && c["logprobs"].is_object(), "choices[0].logprobs is not an object");
  const json& l = c["logprobs"];
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    require(l.contains(key) && l[key].is_array(), fmt::format("logprobs.{} is not a list", key), cut(l.dump()));
  const std::size_t n = l["tokens"].size();
  require(n > 0 && l["token_logprobs"].size() == n && l["top_logprobs"].size() == n && l["text_offset"].size() == n,
          "the logprobs lists differ in length", cut(l.dump()));
  for (const json& top : l["top_logprobs"])
    require(top.is_object() && top.size() <= 2 && !top.empty(), "a top_logprobs item is not a {token: logprob} map of ≤ 2", cut(top.dump()));
  return fmt::format("{} tokens", n);
}

std::string logprobs_stream(Probe& p) {
  Stream s = p.stream("/v1/chat/completions",
                      p.chat({{"max_tokens", 4}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 1}, {"stream", true}}));
  if (s.status == 400) skip_check("logprobs refused");
  require(s.status == 200, fmt::format("status {}", s.status));
  int entries = 0;
  for (const json& c : s.chunks)
    for (const json& item : c.value("choices", json::array()))
      if (item.contains("logprobs") && item["logprobs"].is_object() && item["logprobs"].contains("content") &&
          item["logprobs"]["content"].is_array())
        for (const json& e : item["logprobs"]["content"]) {
          require_chat_logprob_entry(e, 1);
          ++entries;
        }
  require(entries > 0, "no logprobs.content entries in the stream");
  return fmt::format("{} entries across chunks", entries);
}

std::string seed_determinism(Probe& p) {
  json body = p.completion({{"max_tokens", 12}, {"temperature", 1}, {"seed", 1234}});
  std::string first = first_choice(p.post("/v1/completions", body)).value("text", "");
  std::string second = first_choice(p.post("/v1/completions", body)).value("text", "");
  if (first != second) fail_check("the same seed gave different texts", cut(first + " | " + second));
  return fmt::format("{} bytes twice", first.size());
}

std::string temperature0(Probe& p) {
  json body = p.chat({{"max_tokens", 12}, {"temperature", 0}});
  std::string first = first_choice(p.post("/v1/chat/completions", body))["message"].value("content", "");
  std::string second = first_choice(p.post("/v1/chat/completions", body))["message"].value("content", "");
  if (first != second) fail_check("temperature 0 gave different texts", cut(first + " | " + second));
  return fmt::format("{} bytes twice", first.size());
}

const json kTools = json::array({{{"type", "function"},
                                  {"function",
                                   {{"name", "get_weather"},
                                    {"description", "The weather in a city"},
                                    {"parameters",
                                     {{"type", "object"},
                                      // an enum keeps a forced call short on any model, trained or not
                                      {"properties", {{"city", {{"type", "string"}, {"enum", {"Paris", "Tokyo"}}}}}},
                                      {"required", {"city"}}}}}}}});

// tool_choice "required": the server must answer with a call. A 400 means tools are not parsed
// (a skip); a 200 without tool_calls is a failure (the request was not honoured).
std::string tool_calls(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 256}, {"tools", kTools}, {"tool_choice", "required"}, {"parallel_tool_calls", false}}));
  if (a.status == 400 || a.status == 501) skip_check("tool_choice \"required\" refused: tool calls are not parsed");
  const json& c = first_choice(a);
  const json& calls = c["message"].value("tool_calls", json());
  require(calls.is_array() && !calls.empty(), "tool_choice required answered without message.tool_calls", cut(c.dump()));
  for (const json& call : calls) {
    require(call.contains("id") && call["id"].is_string(), "a tool call without id", cut(call.dump()));
    require(call.value("type", "") == "function", "a tool call whose type is not function", cut(call.dump()));
    require(call.contains("function") && call["function"].value("name", "") == "get_weather", "the call does not name get_weather",
            cut(call.dump()));
    const json& args = call["function"].value("arguments", json());
    require(args.is_string() && json::parse(args.get<std::string>(), nullptr, false).is_object(),
            "function.arguments is not a JSON object encoded as a string", cut(call.dump()));
  }
  require(c.value("finish_reason", "") == "tool_calls", fmt::format("finish_reason \"{}\" (expected tool_calls)", c.value("finish_reason", "")));
  return fmt::format("{} call(s), finish tool_calls", calls.size());
}

std::string tool_calls_stream(Probe& p) {
  Stream s = p.stream("/v1/chat/completions",
                      p.chat({{"max_tokens", 256}, {"tools", kTools}, {"tool_choice", "required"}, {"parallel_tool_calls", false}, {"stream", true}}));
  if (s.status == 400 || s.status == 501) skip_check("tool_choice \"required\" refused: tool calls are not parsed");
  require(s.status == 200, fmt::format("status {}", s.status));
  std::string name, arguments, finish;
  bool first_has_id = false;
  for (const json& c : s.chunks)
    for (const json& item : c.value("choices", json::array())) {
      if (item.contains("finish_reason") && item["finish_reason"].is_string()) finish = item["finish_reason"];
      const json& delta = item.value("delta", json::object());
      if (!delta.is_object() || !delta.contains("tool_calls") || !delta["tool_calls"].is_array()) continue;
      for (const json& call : delta["tool_calls"]) {
        require(call.contains("index") && call["index"].is_number_integer(), "a tool call delta without index", cut(call.dump()));
        if (name.empty() && call.contains("function") && call["function"].contains("name")) {
          first_has_id = call.contains("id") && call["id"].is_string();
          name = call["function"].value("name", "");
        }
        if (call.contains("function") && call["function"].contains("arguments") && call["function"]["arguments"].is_string())
          arguments += call["function"]["arguments"].get<std::string>();
      }
    }
  require(!name.empty(), "no tool call delta in the stream", cut(s.body));
  require(first_has_id, "the first delta of a call has no id");
  require(json::parse(arguments, nullptr, false).is_object(), "the concatenated arguments are not a JSON object", cut(arguments));
  require(finish == "tool_calls", fmt::format("finish_reason \"{}\" (expected tool_calls)", finish));
  return "call " + name + " reassembled";
}

}  // namespace

void add_generation_checks(std::vector<Check>& checks) {
  checks.push_back({"finish.length", "max_tokens reached: finish_reason length, completion_tokens = max_tokens", finish_length});
  checks.push_back({"finish.stop", "a stop string matched: finish_reason stop", finish_stop});
  checks.push_back({"finish.tool_calls", "tool_choice required: message.tool_calls [{id, type function, function {name, arguments JSON string}}], finish_reason tool_calls", tool_calls});
  checks.push_back({"tools.stream", "tool_choice required, streamed: indexed tool_calls deltas, id on the first, arguments reassemble to JSON", tool_calls_stream});
  checks.push_back({"stop.across_tokens", "a stop string spanning tokens: the text is exactly the greedy text before it", stop_not_leaked});
  checks.push_back({"stop.stream_no_leak", "streamed, no byte of a stop string spanning tokens is sent", stop_stream});
  checks.push_back({"max_tokens", "max_tokens bounds usage.completion_tokens", max_tokens});
  checks.push_back({"max_completion_tokens", "chat max_completion_tokens bounds the answer like max_tokens", max_completion_tokens});
  checks.push_back({"n.choices", "n 2: two choices indexed 0 and 1", n_choices});
  checks.push_back({"n.stream", "n 2 streamed: chunks indexed 0 and 1, one finish each", n_stream});
  checks.push_back({"logprobs.chat", "logprobs true, top_logprobs 2: content[] of {token, logprob, bytes, top_logprobs[2]}, one per token", logprobs_chat});
  checks.push_back({"logprobs.absent", "without logprobs: choices[0].logprobs null", logprobs_absent});
  checks.push_back({"logprobs.completions", "/v1/completions logprobs 2: {tokens, token_logprobs, top_logprobs maps, text_offset}", logprobs_completions});
  checks.push_back({"logprobs.stream", "streamed chat logprobs: delta chunks carry logprobs.content entries", logprobs_stream});
  checks.push_back({"seed.determinism", "temperature 1 and the same seed: the same text twice", seed_determinism});
  checks.push_back({"temperature0.determinism", "temperature 0: the same text twice", temperature0});
}

}  // namespace inferlab::lab::conform
