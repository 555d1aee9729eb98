#include "inferlab/lab/load_generator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <random>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "lab/http_client.h"
#include "lab/interrupt.h"
#include "inferlab/lab/openai_client.h"
#include "inferlab/lab/sse.h"
#include "inferlab/util/error.h"
#include "inferlab/lab/text_tokenizer.h"

namespace inferlab::lab {

std::vector<double> arrival_offsets(int count, double rate, double burstiness, uint64_t seed) {
  std::vector<double> offsets(count, 0.0);
  if (rate <= 0 || !std::isfinite(rate)) return offsets;
  if (!(burstiness > 0)) fail("--burstiness must be positive, got {}", burstiness);
  std::mt19937_64 rng(seed ^ 0x9E3779B97F4A7C15ull);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  double t = 0;
  for (int i = 0; i < count; ++i) {
    if (i) t += gap(rng);  // the first request starts at once
    offsets[i] = t;
  }
  return offsets;
}

std::string request_body(const ServeOptions& options, const BenchPrompt& prompt,
                         const std::vector<ChatExchange>& history) {
  nlohmann::json body = {{"model", options.model},
                         {"max_tokens", prompt.output_len},
                         {"temperature", options.temperature},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (options.endpoint == "chat") {
    nlohmann::json messages = nlohmann::json::array();
    for (const ChatExchange& e : history) {
      messages.push_back({{"role", "user"}, {"content", e.user}});
      messages.push_back({{"role", "assistant"}, {"content", e.assistant}});
    }
    messages.push_back({{"role", "user"}, {"content", prompt.text}});
    body["messages"] = std::move(messages);
  } else {
    if (!history.empty()) fail("a multi-turn conversation needs --endpoint chat (a history is a list of messages)");
    body["prompt"] = prompt.text;
  }
  if (options.ignore_eos) body["ignore_eos"] = true;
  return body.dump();
}

// ---------------------------------------------------------------- the scenario over the stream pool

namespace {

// What one streamed request received, stamped with the steady clock as each chunk arrives.
struct StreamTiming {
  Clock::time_point start;
  std::optional<Clock::time_point> first_content, last_content, done_at;
  std::vector<double> itl_ms;
  std::string text;
  std::string answer;  // the content alone (no thoughts): the next turn's history
  int64_t content_chunks = 0;
  std::optional<int64_t> prompt_tokens, completion_tokens;
  ServerTimings server;
  std::optional<std::string> stream_error;
  std::string error_body;
  bool done = false;
  SseParser parser{[this](const SseEvent& e) { on_event(e); }};
  Clock::time_point now;

  // An unreadable stream throws, which hangs the transfer up.
  bool on_body(long status, std::string_view bytes) {
    now = Clock::now();
    if (status >= 300) {
      if (error_body.size() < 65536) error_body.append(bytes.substr(0, 65536));
      return true;
    }
    parser.feed(bytes);
    return true;
  }

  void on_event(const SseEvent& event) {
    if (done) return;  // anything after [DONE] is not part of the answer
    StreamChunk chunk = parse_stream_chunk(event.data);
    if (chunk.done) {
      done = true;
      done_at = now;
      return;
    }
    if (chunk.error) {
      stream_error = *chunk.error;
      return;
    }
    if (!chunk.content.empty()) {  // the role-only first chunk has empty content: not a token
      if (!first_content) first_content = now;
      else itl_ms.push_back(std::round(std::chrono::duration<double, std::milli>(now - *last_content).count() * 1000) / 1000);
      last_content = now;
      text += chunk.content;
      ++content_chunks;
    }
    answer += chunk.answer;
    if (chunk.prompt_tokens) prompt_tokens = chunk.prompt_tokens;
    if (chunk.completion_tokens) completion_tokens = chunk.completion_tokens;
    server.merge(chunk.server);
  }
};

// Milliseconds rounded to the microsecond: what requests.csv holds, so `inferlab report` of the
// CSV prints exactly what the run printed.
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::round(std::chrono::duration<double, std::milli>(b - a).count() * 1000) / 1000;
}

void print_progress(std::size_t finished, std::size_t total, std::size_t failed, int in_flight, double elapsed) {
  constexpr int kWidth = 30;
  int filled = total ? static_cast<int>(kWidth * finished / total) : kWidth;
  std::fprintf(stderr, "\r[%s%s] %zu/%zu done, %zu failed, %d in flight, %.1f s ", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), finished, total, failed, in_flight, elapsed);
  std::fflush(stderr);
}

// What the run schedules: a single request, or the consecutive turns of one conversation (a turn 1
// starts a new one). Arrivals and --concurrency count these.
struct Unit {
  std::size_t first = 0, count = 1;
};

std::vector<Unit> units_of(const std::vector<BenchPrompt>& prompts) {
  std::vector<Unit> units;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const BenchPrompt& p = prompts[i];
    if (p.conversation && p.turn != 1) {
      const BenchPrompt* before = i ? &prompts[i - 1] : nullptr;
      if (!before || before->conversation != p.conversation || before->turn + 1 != p.turn)
        fail("conversation {}: turn {} does not follow its turn {} (a conversation's turns must be consecutive, in order)",
             *p.conversation, p.turn, p.turn - 1);
      ++units.back().count;
      continue;
    }
    units.push_back({i, 1});
  }
  return units;
}

}  // namespace

ServeRun run_serve_benchmark(const ServeOptions& options, const std::vector<BenchPrompt>& prompts) {
  if (options.endpoint != "chat" && options.endpoint != "completions")
    fail("--endpoint must be chat or completions, got '{}'", options.endpoint);
  if (options.concurrency < 0) fail("--concurrency must be positive, got {}", options.concurrency);
  if (!(options.timeout_s > 0)) fail("--timeout must be positive, got {}", options.timeout_s);
  const std::size_t total = prompts.size();
  const std::vector<Unit> units = units_of(prompts);
  const bool multi_turn = std::any_of(prompts.begin(), prompts.end(), [](const BenchPrompt& p) { return p.conversation.has_value(); });
  if (multi_turn && options.endpoint != "chat")
    fail("multi-turn conversations need --endpoint chat (a history is a list of messages)");
  std::vector<std::size_t> unit_of(total);
  for (std::size_t u = 0; u < units.size(); ++u)
    for (std::size_t k = 0; k < units[u].count; ++k) unit_of[units[u].first + k] = u;
  const std::string url = api_root(options.base_url) + (options.endpoint == "chat" ? "/chat/completions" : "/completions");
  // Arrivals start units (a conversation's first turn); its later turns follow their answers.
  const std::vector<double> arrivals = arrival_offsets(static_cast<int>(units.size()), options.request_rate,
                                                       options.burstiness, options.seed);
  const std::size_t cap = options.concurrency > 0 ? static_cast<std::size_t>(options.concurrency) : units.size();
  StreamPool pool(std::min(cap, units.size()));

  // Ctrl-C or SIGTERM ends the run early but keeps what it measured: in-flight requests become
  // "cancelled" rows, requests not yet sent are left out, and the CSV and report are still written.
  InterruptScope interrupt;

  ServeRun run;
  run.records.resize(total);
  std::set<std::string> token_sources;
  const Clock::time_point run_start = Clock::now();
  run.started = run_start;
  std::size_t next_unit = 0, active = 0, finished = 0, failed = 0;
  std::vector<std::vector<ChatExchange>> histories(units.size());
  std::vector<std::size_t> ready;  // later turns whose previous answer has arrived: sent next
  auto last_progress = run_start - std::chrono::seconds(1);
  const auto in_flight = [&] { return static_cast<int>(pool.in_flight()); };
  const std::size_t id_width = std::max<std::size_t>(2, std::to_string(total).size());
  const std::size_t conversation_width = std::max<std::size_t>(2, std::to_string(units.size()).size());

  auto name_row = [&](std::size_t i) {
    RequestRecord& r = run.records[i];
    r.request_id = fmt::format("r{:0{}}", i + 1, id_width);
    if (prompts[i].conversation) {
      r.conversation_id = fmt::format("c{:0{}}", *prompts[i].conversation + 1, conversation_width);
      r.turn = prompts[i].turn;
    }
  };

  auto record = [&](std::size_t i, StreamTiming& t, const TransferOutcome& outcome) {
    using End = TransferOutcome::End;
    Clock::time_point end = t.done_at.value_or(Clock::now());
    RequestRecord& r = run.records[i];
    name_row(i);
    r.start_ms = ms_between(run_start, t.start);
    r.end_ms = ms_between(run_start, end);
    r.input_tokens = t.prompt_tokens ? t.prompt_tokens : prompts[i].input_tokens;
    if (outcome.end == End::timed_out) {
      r.status = "timeout";
      r.error = outcome.error;
    } else if (outcome.end == End::cancelled) {
      r.status = "cancelled";
      r.error = fmt::format("the run was interrupted ({}) before this request finished", interrupt.name());
    } else if (outcome.end != End::answered) {
      r.status = "error";
      r.error = outcome.error;
    } else if (outcome.status >= 300) {
      r.status = fmt::format("http_{}", outcome.status);
      r.error = error_message_from_body(t.error_body);
    } else if (t.stream_error) {
      r.status = "error";
      r.error = "the server reported an error in the stream: " + *t.stream_error;
    } else if (!t.done) {
      t.parser.finish();
      r.status = "error";
      r.error = "the stream ended without data: [DONE]";
    } else {
      r.status = "ok";
    }
    if (r.status == "ok") {
      if (t.completion_tokens) {
        r.output_tokens = t.completion_tokens;
        token_sources.insert("usage");
      } else if (options.tokenizer) {
        r.output_tokens = static_cast<int64_t>(options.tokenizer->encode(t.text).size());
        token_sources.insert("tokenizer");
      } else {
        r.output_tokens = t.content_chunks;
        token_sources.insert("content chunks");
      }
      if (t.first_content) r.ttft_ms = ms_between(t.start, *t.first_content);
      if (r.ttft_ms && *r.output_tokens > 1)
        // At least 0: the last piece may arrive with the first (a tiny negative would print as -0).
        r.tpot_ms = std::max(0.0, std::round((r.end_ms - r.start_ms - *r.ttft_ms) / static_cast<double>(*r.output_tokens - 1) * 1000) / 1000);
      r.itl_ms = std::move(t.itl_ms);
      r.server = t.server;
    } else {
      ++failed;
    }
    r.has_itl = true;
    ++finished;
    // The conversation goes on with this answer in its history, or ends here.
    const std::size_t u = unit_of[i];
    const std::size_t last = units[u].first + units[u].count - 1;
    if (i < last && r.status == "ok") {
      histories[u].push_back({prompts[i].text, std::move(t.answer)});
      ready.push_back(i + 1);
      return;
    }
    --active;
    histories[u].clear();
    if (r.status == "cancelled") return;  // interrupted: the turns not sent are left out, as other unsent requests
    for (std::size_t k = i + 1; k <= last; ++k) {  // a failed turn ends its conversation: its later turns are rows too
      RequestRecord& skipped = run.records[k];
      name_row(k);
      skipped.status = "skipped";
      skipped.start_ms = skipped.end_ms = r.end_ms;
      skipped.error = fmt::format("not sent: turn {} of this conversation ended with {}", prompts[i].turn, r.status);
      skipped.has_itl = true;
      ++failed;
      ++finished;
    }
  };

  auto start_request = [&](std::size_t i) {
    auto timing = std::make_shared<StreamTiming>();
    HttpRequest request{.url = url,
                        .api_key = options.api_key,
                        .timeout_ms = static_cast<long>(std::ceil(options.timeout_s * 1000)),
                        .body = request_body(options, prompts[i], histories[unit_of[i]]),
                        .connect_timeout_ms = static_cast<long>(std::ceil(std::min(options.timeout_s, 30.0) * 1000)),
                        .accept_event_stream = true,
                        .http_1_1 = true};
    timing->start = Clock::now();
    pool.start(request, {.on_header = {},
                         .on_body = [timing](long status, std::string_view bytes) { return timing->on_body(status, bytes); },
                         .on_done = [&, i, timing](const TransferOutcome& outcome) { record(i, *timing, outcome); }});
    run.max_in_flight = std::max(run.max_in_flight, in_flight());
  };

  while (finished < total) {
    if (interrupt.signal()) {
      pool.cancel_all();
      break;
    }
    // Next turns first: their conversations already hold a slot.
    for (std::size_t i : std::exchange(ready, {})) start_request(i);
    Clock::time_point now = Clock::now();
    while (next_unit < units.size() && active < cap &&
           run_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[next_unit])) <= now) {
      ++active;
      start_request(units[next_unit++].first);
    }
    const bool any_done = pool.perform() > 0;
    if (options.progress && (Clock::now() - last_progress > std::chrono::milliseconds(100) || finished == total)) {
      last_progress = Clock::now();
      print_progress(finished, total, failed, in_flight(), ms_between(run_start, last_progress) / 1000);
    }
    if (finished == total) break;
    if (any_done || !ready.empty()) continue;  // a slot may have opened, or a turn is due: start it before waiting
    long wait_ms = 1000;
    if (next_unit < units.size() && active < cap) {
      double until = arrivals[next_unit] * 1000 - ms_between(run_start, Clock::now());
      wait_ms = std::clamp<long>(static_cast<long>(std::ceil(until)), 0, 1000);
    }
    pool.wait(wait_ms);
  }
  if (options.progress) std::fputc('\n', stderr);
  run.duration_s = ms_between(run_start, Clock::now()) / 1000;
  if (interrupt.signal()) {
    run.interrupted_by = interrupt.name();
    std::erase_if(run.records, [](const RequestRecord& r) { return r.request_id.empty(); });
    std::fprintf(stderr, "interrupted (%s): %zu of %zu requests were sent\n", interrupt.name(), run.records.size(), total);
  }
  for (const auto& s : token_sources) run.output_tokens_source += (run.output_tokens_source.empty() ? "" : " + ") + s;
  if (run.output_tokens_source.empty()) run.output_tokens_source = "none (no successful request)";
  return run;
}

}  // namespace inferlab::lab
