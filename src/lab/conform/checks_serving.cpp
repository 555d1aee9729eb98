// Conformance checks: serving behaviour under more than one request — a client that hangs up
// mid-stream frees its slot, concurrent streams do not mix.
#include <set>
#include <thread>

#include "lab/conform/probe.h"
#include "lab/http_client.h"
#include "inferlab/lab/openai_client.h"
#include "inferlab/lab/sse.h"

namespace inferlab::lab::conform {
namespace {

// The running-requests gauge and generated-tokens counter of the servers we know.
const char* const kRunningGauges[] = {"inferlab_running_requests", "llamacpp:requests_processing",
                                      "vllm:num_requests_running", "sglang:num_running_reqs"};
const char* const kTokenCounters[] = {"inferlab_generation_tokens_total", "llamacpp:tokens_predicted_total",
                                      "vllm:generation_tokens_total", "sglang:generation_tokens_total"};

std::optional<std::string> first_present(const std::map<std::string, double>& m, const char* const* names, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    // vLLM and SGLang label their samples: match the name with or without labels.
    for (const auto& [key, value] : m)
      if (key == names[i] || key.starts_with(std::string(names[i]) + "{")) return key;
  }
  return std::nullopt;
}

HttpRequest stream_request(Probe& p, const std::string& path, const json& body) {
  HttpRequest r;
  r.url = api_root(p.options().base_url) + path;
  r.api_key = p.options().api_key;
  r.body = body.dump();
  r.accept_event_stream = true;
  r.http_1_1 = true;
  r.timeout_ms = static_cast<long>(p.options().timeout_s * 1000);
  return r;
}

std::string cancel_frees_slot(Probe& p) {
  auto before = p.metrics();
  if (!before) skip_check("no /metrics (start llama-server with --metrics)");
  auto gauge = first_present(*before, kRunningGauges, std::size(kRunningGauges));
  if (!gauge) skip_check("/metrics has no running-requests gauge this suite knows");
  auto counter = first_present(*before, kTokenCounters, std::size(kTokenCounters));
  const double baseline = (*before)[*gauge];
  const int max_tokens = std::min(2000, p.context_length().value_or(4096) / 2);

  StreamPool pool(1);
  int events = 0;
  bool ended = false;
  SseParser parser([&](const SseEvent&) { ++events; });
  const json body = p.completion({{"max_tokens", max_tokens}, {"temperature", 1}, {"seed", 3}, {"stream", true}});
  auto id = pool.start(stream_request(p, "/completions", body),
                       {.on_header = {},
                        .on_body = [&](long, std::string_view bytes) { parser.feed(bytes); return true; },
                        .on_done = [&](const TransferOutcome&) { ended = true; }});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (events < 3 && !ended && std::chrono::steady_clock::now() < deadline) {
    pool.perform();
    pool.wait(50);
  }
  if (ended) skip_check("the stream ended before the suite could hang up");
  require(events >= 3, "no tokens streamed within 30 s");
  auto during = p.metrics();
  const double running = during ? (*during)[*gauge] : baseline;
  pool.cancel(id);  // hang up: the server sees the connection close

  std::optional<std::map<std::string, double>> after;
  for (int i = 0; i < 200; ++i) {
    after = p.metrics();
    if (after && (*after)[*gauge] <= baseline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  require(after && (*after)[*gauge] <= baseline,
          fmt::format("{} is {} 10 s after the client hung up (was {} before the request)", *gauge, after ? (*after)[*gauge] : -1, baseline));
  std::string detail = fmt::format("{} {} → {} → {}", *gauge, baseline, running, (*after)[*gauge]);
  if (counter) {
    const double generated = (*after)[*counter] - (*before)[*counter];
    require(generated < max_tokens, fmt::format("{} tokens generated for max_tokens {}: the request ran to its end", generated, max_tokens));
    detail += fmt::format("; {} of {} tokens generated", generated, max_tokens);
  }
  return detail;
}

std::string concurrent_streams(Probe& p) {
  const std::vector<std::string> prompts = {"Once upon a time", "The cache", "In a distant land", "Numbers: 1, 2,"};
  std::vector<std::string> alone;
  for (const auto& prompt : prompts)
    alone.push_back(first_choice(p.post("/v1/completions", p.completion({{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}})))
                        .value("text", ""));
  struct Run {
    std::string bytes;
    bool done = false;
    TransferOutcome outcome;
  };
  std::vector<Run> runs(prompts.size());
  StreamPool pool(prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i)
    pool.start(stream_request(p, "/completions", p.completion({{"prompt", prompts[i]}, {"max_tokens", 12}, {"temperature", 0}, {"stream", true}})),
               {.on_header = {},
                .on_body = [&runs, i](long, std::string_view bytes) { runs[i].bytes.append(bytes); return true; },
                .on_done = [&runs, i](const TransferOutcome& o) { runs[i].done = true; runs[i].outcome = o; }});
  while (pool.in_flight() > 0) {
    pool.perform();
    pool.wait(50);
  }
  std::set<std::string> ids;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    require(runs[i].outcome.end == TransferOutcome::End::answered && runs[i].outcome.status == 200,
            fmt::format("stream {}: {} {}", i, runs[i].outcome.status, runs[i].outcome.error));
    std::string text;
    std::set<std::string> own_ids;
    SseParser parser([&](const SseEvent& e) {
      json j = json::parse(e.data, nullptr, false);
      if (!j.is_object()) return;
      if (j.contains("id") && j["id"].is_string()) own_ids.insert(j["id"]);
      for (const json& item : j.value("choices", json::array()))
        if (item.contains("text") && item["text"].is_string()) text += item["text"].get<std::string>();
    });
    parser.feed(runs[i].bytes);
    parser.finish();
    require(own_ids.size() == 1, fmt::format("stream {} carries {} ids", i, own_ids.size()), cut(runs[i].bytes));
    ids.insert(*own_ids.begin());
    if (text != alone[i])
      fail_check(fmt::format("stream {} ({}) differs from the same request alone", i, json(prompts[i]).dump()),
                 cut("concurrent: " + text + " | alone: " + alone[i]));
  }
  require(ids.size() == prompts.size(), "two concurrent streams share an id");
  return fmt::format("{} concurrent streams, each its own id and text", prompts.size());
}

}  // namespace

void add_serving_checks(std::vector<Check>& checks) {
  checks.push_back({"cancel.frees_slot", "a client that hangs up mid-stream frees its slot (running gauge in /metrics back to idle, tokens not all generated)", cancel_frees_slot});
  checks.push_back({"concurrent.streams", "4 concurrent temperature-0 streams: each its own id, each the text it gets alone", concurrent_streams});
}

}  // namespace inferlab::lab::conform
