#include "inferlab/lab/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "inferlab/lab/csv.h"
#include "inferlab/util/error.h"
#include "inferlab/util/stats.h"

namespace inferlab::lab {

const std::vector<std::string> kRequestColumns = {
    "request_id",      "status",           "start_ms",         "end_ms",         "input_tokens",
    "output_tokens",   "ttft_ms",          "tpot_ms",          "itl_ms",         "error",
    "server_queue_ms", "server_prefill_ms", "server_decode_ms", "server_ttft_ms", "cached_tokens",
    "preemptions"};

void ServerTimings::merge(const ServerTimings& later) {
  auto take = [](auto& ours, const auto& theirs) {
    if (theirs) ours = theirs;
  };
  take(queue_ms, later.queue_ms);
  take(prefill_ms, later.prefill_ms);
  take(decode_ms, later.decode_ms);
  take(ttft_ms, later.ttft_ms);
  take(cached_tokens, later.cached_tokens);
  take(preemptions, later.preemptions);
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A CSV cell: empty -> nullopt; otherwise the whole cell must be one number (a leading '+' allowed).
template <class Number>
std::optional<Number> parse_number(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  if (text.front() == '+') text.remove_prefix(1);
  Number value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    throw std::invalid_argument(std::is_integral_v<Number> ? "not an integer" : "not a number");
  if constexpr (std::is_floating_point_v<Number>)
    if (!std::isfinite(value)) throw std::invalid_argument("not a number");
  return value;
}
std::optional<double> parse_double(std::string_view text) { return parse_number<double>(text); }
std::optional<int64_t> parse_int(std::string_view text) { return parse_number<int64_t>(text); }

std::string format_number(double value) {
  std::string s = fmt::format("{:.3f}", value);
  while (s.back() == '0') s.pop_back();  // 400.000 -> 400, 12.340 -> 12.34
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

}  // namespace

std::vector<RequestRecord> parse_requests_csv(const std::string& text, const std::string& source) {
  std::vector<CsvRecord> rows = parse_csv(text, source);
  if (rows.empty()) return {};
  const CsvRecord& header = rows.front();
  auto column = [&](const std::string& name) -> int {
    for (std::size_t i = 0; i < header.fields.size(); ++i)
      if (trim(header.fields[i]) == name) return static_cast<int>(i);
    return -1;
  };
  for (const char* required : {"request_id", "status", "start_ms", "end_ms", "output_tokens"})
    if (column(required) < 0) {
      std::string have;
      for (const auto& f : header.fields) have += (have.empty() ? "" : ",") + f;
      fail("{} line {}: the header has no '{}' column (it has: {}); expected at least "
           "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms",
           source, header.line, required, have);
    }
  const int id_col = column("request_id"), status_col = column("status"), start_col = column("start_ms"),
            end_col = column("end_ms"), in_col = column("input_tokens"), out_col = column("output_tokens"),
            ttft_col = column("ttft_ms"), tpot_col = column("tpot_ms"), itl_col = column("itl_ms"),
            error_col = column("error");

  std::vector<RequestRecord> records;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const CsvRecord& row = rows[r];
    if (row.fields.size() != header.fields.size())
      fail("{} line {}: {} fields, but the header has {} columns", source, row.line, row.fields.size(),
           header.fields.size());
    RequestRecord rec;
    rec.line = row.line;
    std::string current = "request_id";
    auto get = [&](int col, const char* name) -> std::string_view {
      current = name;
      return col < 0 ? std::string_view() : std::string_view(row.fields[col]);
    };
    try {
      rec.request_id = std::string(trim(get(id_col, "request_id")));
      rec.status = std::string(trim(get(status_col, "status")));
      if (rec.status.empty()) fail("{} line {}: status is empty", source, row.line);
      auto start = parse_double(get(start_col, "start_ms"));
      auto end = parse_double(get(end_col, "end_ms"));
      if (!start || !end)
        fail("{} line {}: {} is empty; every row needs start_ms and end_ms", source, row.line,
             start ? "end_ms" : "start_ms");
      rec.start_ms = *start;
      rec.end_ms = *end;
      rec.input_tokens = parse_int(get(in_col, "input_tokens"));
      rec.output_tokens = parse_int(get(out_col, "output_tokens"));
      rec.ttft_ms = parse_double(get(ttft_col, "ttft_ms"));
      rec.tpot_ms = parse_double(get(tpot_col, "tpot_ms"));
      if (itl_col >= 0) {
        rec.has_itl = true;
        current = "itl_ms";
        std::string list(trim(row.fields[itl_col]));
        if (list.starts_with('[') && list.ends_with(']')) list = list.substr(1, list.size() - 2);
        std::replace_if(list.begin(), list.end(), [](char c) { return c == ';' || c == ','; }, ' ');
        std::size_t pos = 0;
        while (pos < list.size()) {
          std::size_t stop = list.find(' ', pos);
          if (stop == std::string::npos) stop = list.size();
          if (auto v = parse_double(std::string_view(list).substr(pos, stop - pos))) rec.itl_ms.push_back(*v);
          pos = stop + 1;
        }
      }
      if (error_col >= 0) rec.error = row.fields[error_col];
      ServerTimings& server = rec.server;
      server.queue_ms = parse_double(get(column("server_queue_ms"), "server_queue_ms"));
      server.prefill_ms = parse_double(get(column("server_prefill_ms"), "server_prefill_ms"));
      server.decode_ms = parse_double(get(column("server_decode_ms"), "server_decode_ms"));
      server.ttft_ms = parse_double(get(column("server_ttft_ms"), "server_ttft_ms"));
      server.cached_tokens = parse_int(get(column("cached_tokens"), "cached_tokens"));
      server.preemptions = parse_int(get(column("preemptions"), "preemptions"));
      rec.run = parse_int(get(column("run"), "run"));
      rec.conversation_id = std::string(trim(get(column("conversation_id"), "conversation_id")));
      rec.turn = parse_int(get(column("turn"), "turn"));
    } catch (const std::invalid_argument&) {
      fail("{} line {}: {} is not a number: '{}'", source, row.line, current, row.fields[column(current)]);
    }
    if (rec.status == "ok" && !rec.output_tokens)
      fail("{} line {}: output_tokens is empty for a successful request", source, row.line);
    if ((rec.output_tokens && *rec.output_tokens < 0) || (rec.input_tokens && *rec.input_tokens < 0))
      fail("{} line {}: token counts cannot be negative", source, row.line);
    records.push_back(std::move(rec));
  }
  return records;
}

std::vector<RequestRecord> read_requests_csv(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}: no such file or not readable", path.string());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_requests_csv(text, path.string());
}

std::string requests_csv(const std::vector<RequestRecord>& records) {
  const bool with_run = std::any_of(records.begin(), records.end(), [](const RequestRecord& r) { return r.run.has_value(); });
  const bool with_turns = std::any_of(records.begin(), records.end(), [](const RequestRecord& r) { return r.turn.has_value(); });
  std::vector<std::string> columns = kRequestColumns;
  if (with_turns) columns.insert(columns.end(), {"conversation_id", "turn"});
  if (with_run) columns.push_back("run");
  std::string out = csv_line(columns);
  auto opt_int = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string(); };
  auto opt_num = [](const std::optional<double>& v) { return v ? format_number(*v) : std::string(); };
  for (const auto& r : records) {
    std::string itl;
    for (double v : r.itl_ms) itl += (itl.empty() ? "" : ";") + format_number(v);
    std::vector<std::string> cells = {r.request_id, r.status, format_number(r.start_ms), format_number(r.end_ms),
                                      opt_int(r.input_tokens), opt_int(r.output_tokens), opt_num(r.ttft_ms),
                                      opt_num(r.tpot_ms), itl, r.error, opt_num(r.server.queue_ms),
                                      opt_num(r.server.prefill_ms), opt_num(r.server.decode_ms),
                                      opt_num(r.server.ttft_ms), opt_int(r.server.cached_tokens),
                                      opt_int(r.server.preemptions)};
    if (with_turns) cells.insert(cells.end(), {r.conversation_id, opt_int(r.turn)});
    if (with_run) cells.push_back(opt_int(r.run));
    out += csv_line(cells);
  }
  return out;
}

void write_requests_csv(const std::filesystem::path& path, const std::vector<RequestRecord>& records) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot write {}", path.string());
  out << requests_csv(records);
  if (!out.flush()) fail("cannot write {}", path.string());
}

Slo parse_slo(const std::string& text) {
  Slo slo;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t stop = text.find(',', pos);
    if (stop == std::string::npos) stop = text.size();
    std::string item(trim(std::string_view(text).substr(pos, stop - pos)));
    pos = stop + 1;
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos) fail("--slo: '{}' is not key=value (e.g. ttft_ms=200,tpot_ms=50)", item);
    std::string key(trim(std::string_view(item).substr(0, eq)));
    std::optional<double> value;
    try {
      value = parse_double(std::string_view(item).substr(eq + 1));
    } catch (const std::invalid_argument&) {
    }
    if (!value || *value <= 0) fail("--slo: {} needs a positive number of milliseconds, got '{}'", key, item.substr(eq + 1));
    if (key == "ttft_ms" || key == "ttft") slo.ttft_ms = value;
    else if (key == "tpot_ms" || key == "tpot") slo.tpot_ms = value;
    else if (key == "e2e_ms" || key == "e2e") slo.e2e_ms = value;
    else fail("--slo: unknown key '{}' (known: ttft_ms, tpot_ms, e2e_ms)", key);
  }
  if (slo.empty()) fail("--slo: give at least one of ttft_ms=, tpot_ms=, e2e_ms=");
  return slo;
}

Distribution distribution(std::vector<double> values, PercentileMethod method) {
  Distribution d;
  d.n = values.size();
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.mean = mean(values);
  d.min = values.front();
  d.max = values.back();
  d.p50 = percentile(values, 0.50, method);
  d.p90 = percentile(values, 0.90, method);
  d.p95 = percentile(values, 0.95, method);
  d.p99 = percentile(values, 0.99, method);
  return d;
}

std::optional<double> request_tpot(const RequestRecord& r, bool* derived) {
  if (r.tpot_ms) return r.tpot_ms;
  if (!r.ttft_ms || !r.output_tokens || *r.output_tokens <= 1) return std::nullopt;
  *derived = true;
  return (r.end_ms - r.start_ms - *r.ttft_ms) / static_cast<double>(*r.output_tokens - 1);
}

namespace {

// Multi-turn runs: the figures of each turn index, over every conversation.
void summarize_turns(const std::vector<RequestRecord>& records, PercentileMethod percentiles, Summary& s) {
  std::map<int64_t, std::vector<const RequestRecord*>> by_turn;
  std::set<std::string> conversations;
  for (const auto& r : records)
    if (r.turn) {
      by_turn[*r.turn].push_back(&r);
      conversations.insert(r.conversation_id);
    }
  s.conversations = conversations.size();
  for (const auto& [turn, rows] : by_turn) {
    TurnSummary t;
    t.turn = turn;
    t.requests = rows.size();
    std::vector<double> ttft;
    double input = 0;
    std::size_t with_input = 0;
    for (const RequestRecord* r : rows) {
      if (r->status != "ok") continue;
      ++t.successful;
      if (r->ttft_ms) ttft.push_back(*r->ttft_ms);
      if (r->input_tokens) input += static_cast<double>(*r->input_tokens), ++with_input;
      if (r->server.cached_tokens) {
        ++t.cache_reported;
        t.cached_tokens += *r->server.cached_tokens;
        t.cache_reported_input += r->input_tokens.value_or(0);
      }
    }
    t.ttft = distribution(std::move(ttft), percentiles);
    t.mean_input_tokens = with_input ? input / static_cast<double>(with_input) : 0;
    s.turns.push_back(std::move(t));
  }
}

}  // namespace

Summary summarize(const std::vector<RequestRecord>& records, const Slo& slo, PercentileMethod percentiles) {
  if (records.empty()) throw Error("No requests recorded.");
  Summary s;
  s.requests = records.size();
  double first_start = records.front().start_ms, last_end = records.front().end_ms;
  for (const auto& r : records) {
    first_start = std::min(first_start, r.start_ms);
    last_end = std::max(last_end, r.end_ms);
  }
  s.window_s = (last_end - first_start) / 1000;
  if (!(s.window_s > 0)) throw Error("The measurement window must be positive.");

  std::vector<double> ttft, tpot, itl, e2e, server_queue, server_prefill, transport;
  s.slo = slo;
  s.percentiles = percentiles;
  for (const auto& r : records) {
    if (r.has_itl) s.itl_recorded = true;
    if (r.status != "ok") {
      ++s.failures[r.status];
      continue;
    }
    ++s.successful;
    s.output_tokens += r.output_tokens.value_or(0);
    s.input_tokens += r.input_tokens.value_or(0);
    if (r.ttft_ms) ttft.push_back(*r.ttft_ms);
    std::optional<double> t = request_tpot(r, &s.tpot_derived);
    if (t) tpot.push_back(*t);
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
    double latency = r.end_ms - r.start_ms;
    e2e.push_back(latency);
    if (r.server.queue_ms) server_queue.push_back(*r.server.queue_ms);
    if (r.server.prefill_ms) server_prefill.push_back(*r.server.prefill_ms);
    if (r.ttft_ms && r.server.ttft_ms) transport.push_back(*r.ttft_ms - *r.server.ttft_ms);
    if (r.server.cached_tokens) {
      ++s.cache_reported;
      s.cached_tokens += *r.server.cached_tokens;
      s.cache_reported_input += r.input_tokens.value_or(0);
    }
    if (!slo.empty()) {
      bool met = true;
      if (slo.ttft_ms) met = met && r.ttft_ms && *r.ttft_ms <= *slo.ttft_ms;
      // One output token has no decode step to be slow (vLLM counts its TPOT as 0).
      if (slo.tpot_ms) met = met && (!t || *t <= *slo.tpot_ms) && (t || r.output_tokens.value_or(0) <= 1);
      if (slo.e2e_ms) met = met && latency <= *slo.e2e_ms;
      if (met) ++s.slo_met;
    }
  }
  summarize_turns(records, percentiles, s);
  s.output_throughput = static_cast<double>(s.output_tokens) / s.window_s;
  s.request_throughput = static_cast<double>(s.successful) / s.window_s;
  s.goodput = static_cast<double>(s.slo_met) / s.window_s;
  s.ttft = distribution(std::move(ttft), percentiles);
  s.tpot = distribution(std::move(tpot), percentiles);
  s.itl = distribution(std::move(itl), percentiles);
  s.e2e = distribution(std::move(e2e), percentiles);
  s.server_queue = distribution(std::move(server_queue), percentiles);
  s.server_prefill = distribution(std::move(server_prefill), percentiles);
  s.transport = distribution(std::move(transport), percentiles);
  return s;
}

namespace {
const char* method_words(PercentileMethod method) {
  return method == PercentileMethod::Linear ? "linear" : "nearest rank";
}
}  // namespace

std::string format_report(const Summary& s) {
  std::string out;
  const char* method = method_words(s.percentiles);
  // The course's five lines, byte for byte.
  out += fmt::format("Success: {}/{}\n", s.successful, s.requests);
  out += fmt::format("Window: {:.3f} s\n", s.window_s);
  out += fmt::format("Successful output throughput: {:.2f} token/s\n", s.output_throughput);
  if (s.ttft.n) {
    out += fmt::format("P50 TTFT: {:.2f} ms ({}, n={})\n", s.ttft.p50, method, s.ttft.n);
    out += fmt::format("P95 TTFT: {:.2f} ms ({}, n={})\n", s.ttft.p95, method, s.ttft.n);
  }
  if (!s.failures.empty()) {
    std::string parts;
    for (const auto& [status, count] : s.failures) parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", status, count);
    out += fmt::format("Failed: {} ({})\n", s.requests - s.successful, parts);
  }
  out += fmt::format("Request throughput: {:.2f} req/s\n", s.request_throughput);
  out += fmt::format("Input tokens: {}, output tokens: {} (successful requests)\n", s.input_tokens, s.output_tokens);
  out += fmt::format("{:<12}{:>6}{:>10}{:>10}{:>10}{:>10}{:>10}\n", "Metric (ms)", "n", "mean", "median", "p90",
                     "p95", "p99");
  auto row = [&](const char* name, const Distribution& d, const char* why_empty) {
    if (!d.n) {
      out += fmt::format("{:<12}{:>6}  {}\n", name, 0, why_empty);
      return;
    }
    out += fmt::format("{:<12}{:>6}{:>10.2f}{:>10.2f}{:>10.2f}{:>10.2f}{:>10.2f}\n", name, d.n, d.mean, d.p50, d.p90,
                       d.p95, d.p99);
  };
  row("TTFT", s.ttft, "(no successful request has a ttft_ms)");
  row("TPOT", s.tpot, "(needs ttft_ms and more than one output token, or tpot_ms)");
  row("ITL", s.itl, s.itl_recorded ? "(no inter-token gaps recorded)" : "(no itl_ms column)");
  row("E2E", s.e2e, "(no successful request)");
  // The TTFT split, only when the server sent its figures (old CSVs report as before).
  if (s.has_ttft_split()) {
    row(" queue", s.server_queue, "(the server sent no queue time)");
    row(" prefill", s.server_prefill, "(the server sent no prefill time)");
    row(" transport", s.transport, "(the server sent no TTFT)");
  }
  out += s.percentiles == PercentileMethod::Linear
             ? "Percentiles by linear interpolation (numpy's default, as vLLM) over successful requests; median = P50."
             : "Percentiles by nearest rank over successful requests; median = P50.";
  if (s.tpot_derived) out += " TPOT = (E2E - TTFT) / (output_tokens - 1) where no tpot_ms is given.";
  out += "\n";
  if (s.has_ttft_split())
    out += "TTFT split from the server's timings: queue (arrival to scheduled), prefill (to its first token), "
           "transport = client TTFT - server TTFT.\n";
  if (s.cache_reported)
    out += fmt::format("Prefix cache: {} of {} prompt tokens ({:.1f}%) were cached ({} requests reported cached_tokens)\n",
                       s.cached_tokens, s.cache_reported_input,
                       s.cache_reported_input ? 100.0 * s.cached_tokens / s.cache_reported_input : 0.0, s.cache_reported);
  if (!s.turns.empty()) {
    out += fmt::format("Multi-turn: {} conversations; per turn (TTFT by the same percentiles):\n", s.conversations);
    out += fmt::format("{:<6}{:>6}{:>6}{:>12}{:>12}{:>14}{:>10}\n", "Turn", "n", "ok", "TTFT p50", "TTFT p95",
                       "mean input", "cached");
    for (const TurnSummary& t : s.turns) {
      auto ms = [&](double v) { return t.ttft.n ? fmt::format("{:.2f}", v) : std::string("-"); };
      const std::string cached = t.cache_reported && t.cache_reported_input
                                     ? fmt::format("{:.1f}%", 100.0 * t.cached_tokens / t.cache_reported_input)
                                     : std::string("-");
      out += fmt::format("{:<6}{:>6}{:>6}{:>12}{:>12}{:>14.1f}{:>10}\n", t.turn, t.requests, t.successful,
                         ms(t.ttft.p50), ms(t.ttft.p95), t.mean_input_tokens, cached);
    }
  }
  if (!s.slo.empty()) {
    std::string terms;
    auto term = [&](const char* name, const std::optional<double>& v) {
      if (v) terms += fmt::format("{}{} <= {} ms", terms.empty() ? "" : ", ", name, format_number(*v));
    };
    term("TTFT", s.slo.ttft_ms);
    term("TPOT", s.slo.tpot_ms);
    term("E2E", s.slo.e2e_ms);
    out += fmt::format("Goodput: {:.2f} req/s ({}/{} requests met {})\n", s.goodput, s.slo_met, s.requests, terms);
  }
  return out;
}

nlohmann::json summary_json(const Summary& s) {
  auto dist = [](const Distribution& d) -> nlohmann::json {
    if (!d.n) return {{"n", 0}};
    return {{"n", d.n},     {"mean", d.mean}, {"median", d.p50}, {"p50", d.p50}, {"p90", d.p90},
            {"p95", d.p95}, {"p99", d.p99},   {"min", d.min},    {"max", d.max}};
  };
  nlohmann::json j = {
      {"requests", s.requests},
      {"successful", s.successful},
      {"failed", s.requests - s.successful},
      {"failures", s.failures},
      {"window_s", s.window_s},
      {"input_tokens", s.input_tokens},
      {"output_tokens", s.output_tokens},
      {"output_throughput_token_per_s", s.output_throughput},
      {"request_throughput_req_per_s", s.request_throughput},
      {"percentile_method", s.percentiles == PercentileMethod::Linear
                                ? "linear: numpy.percentile's default, sorted[(n-1)*p] interpolated, successful requests"
                                : "nearest rank: sorted[ceil(p*n)-1], successful requests"},
      {"percentiles", percentile_method_name(s.percentiles)},
      {"ttft_ms", dist(s.ttft)},
      {"tpot_ms", dist(s.tpot)},
      {"itl_ms", dist(s.itl)},
      {"e2e_ms", dist(s.e2e)},
      {"tpot_derived_from_e2e", s.tpot_derived},
  };
  if (s.has_ttft_split())
    j["ttft_split_ms"] = {{"server_queue", dist(s.server_queue)}, {"server_prefill", dist(s.server_prefill)},
                          {"transport", dist(s.transport)}};
  if (s.cache_reported)
    j["prefix_cache"] = {{"requests", s.cache_reported}, {"cached_tokens", s.cached_tokens},
                         {"prompt_tokens", s.cache_reported_input},
                         {"hit_rate", s.cache_reported_input ? static_cast<double>(s.cached_tokens) / static_cast<double>(s.cache_reported_input)
                                                             : 0.0}};
  if (!s.turns.empty()) {
    nlohmann::json turns = nlohmann::json::array();
    for (const TurnSummary& t : s.turns) {
      nlohmann::json row = {{"turn", t.turn},
                            {"requests", t.requests},
                            {"successful", t.successful},
                            {"ttft_ms", dist(t.ttft)},
                            {"mean_input_tokens", t.mean_input_tokens}};
      if (t.cache_reported)
        row["prefix_cache"] = {{"requests", t.cache_reported}, {"cached_tokens", t.cached_tokens},
                               {"prompt_tokens", t.cache_reported_input},
                               {"hit_rate", t.cache_reported_input ? static_cast<double>(t.cached_tokens) / static_cast<double>(t.cache_reported_input) : 0.0}};
      turns.push_back(std::move(row));
    }
    j["multi_turn"] = {{"conversations", s.conversations}, {"turns", std::move(turns)}};
  }
  if (!s.slo.empty()) {
    nlohmann::json slo = nlohmann::json::object();
    if (s.slo.ttft_ms) slo["ttft_ms"] = *s.slo.ttft_ms;
    if (s.slo.tpot_ms) slo["tpot_ms"] = *s.slo.tpot_ms;
    if (s.slo.e2e_ms) slo["e2e_ms"] = *s.slo.e2e_ms;
    j["goodput"] = {{"slo", slo}, {"met", s.slo_met}, {"req_per_s", s.goodput}};
  }
  return j;
}

}  // namespace inferlab::lab
