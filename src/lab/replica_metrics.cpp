// Per-replica counts of a run from the replicas' /metrics (see replica_metrics.h).
#include "inferlab/lab/replica_metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "lab/http_client.h"
#include "inferlab/util/error.h"

namespace inferlab::lab {

std::optional<ReplicaCounters> replica_counters(const std::vector<PrometheusSample>& samples) {
  auto has = [&](const char* name) {
    for (const auto& s : samples)
      if (s.name == name) return true;
    return false;
  };
  // Sums a metric over its label sets, those passing `keep`.
  auto sum = [&](const char* name, auto keep) {
    double total = 0;
    for (const auto& s : samples)
      if (s.name == name && keep(s)) total += s.value;
    return total;
  };
  auto all = [](const PrometheusSample&) { return true; };
  auto finished_ok = [](const char* key) {
    return [key](const PrometheusSample& s) { return s.label(key) == "stop" || s.label(key) == "length"; };
  };
  auto finished_not_ok = [](const char* key) {
    return [key](const PrometheusSample& s) { return s.label(key) != "stop" && s.label(key) != "length"; };
  };
  ReplicaCounters c;
  if (has("inferlab_requests_finished_total")) {
    c.names = "inferlab";
    c.completed = sum("inferlab_requests_finished_total", finished_ok("reason"));
    c.failed = sum("inferlab_requests_finished_total", finished_not_ok("reason")) +
               sum("inferlab_requests_rejected_total", all);
    c.generated_tokens = sum("inferlab_generation_tokens_total", all);
    c.prompt_tokens = sum("inferlab_prompt_tokens_total", all);
    return c;
  }
  if (has("vllm:request_success_total")) {
    c.names = "vllm";
    c.completed = sum("vllm:request_success_total", finished_ok("finished_reason"));
    c.failed = sum("vllm:request_success_total", finished_not_ok("finished_reason"));
    c.generated_tokens = sum("vllm:generation_tokens_total", all);
    c.prompt_tokens = sum("vllm:prompt_tokens_total", all);
    return c;
  }
  return std::nullopt;
}

std::string replica_metrics_url(std::string replica) {
  const std::string given = replica;
  while (!replica.empty() && replica.back() == '/') replica.pop_back();
  if (!replica.starts_with("http://") && !replica.starts_with("https://"))
    fail("--replica-metrics '{}': expected a replica's http:// URL, e.g. http://127.0.0.1:30001", given);
  if (replica.ends_with("/metrics")) return replica;
  if (replica.ends_with("/v1")) replica.resize(replica.size() - 3);
  return replica + "/metrics";
}

ReplicaScrape scrape_replica(const std::string& replica, const std::string& api_key, double timeout_s) {
  ReplicaScrape out{.replica = replica, .metrics_url = replica_metrics_url(replica), .counters = {}, .error = {}};
  HttpResponse r = fetch({.url = out.metrics_url, .api_key = api_key, .timeout_ms = static_cast<long>(timeout_s * 1000)});
  if (r.outcome.end != TransferOutcome::End::answered) {
    out.error = fmt::format("GET {}: {}", out.metrics_url, r.outcome.error);
    return out;
  }
  if (r.outcome.status != 200) {
    out.error = fmt::format("GET {}: HTTP {}", out.metrics_url, r.outcome.status);
    return out;
  }
  try {
    out.counters = replica_counters(parse_prometheus(r.body));
    if (!out.counters)
      out.error = fmt::format("GET {}: no request counters (neither inferlab_requests_finished_total nor "
                              "vllm:request_success_total; not a model server, or still loading)",
                              out.metrics_url);
  } catch (const Error& e) {
    out.error = fmt::format("GET {}: {}", out.metrics_url, e.what());
  }
  return out;
}

ReplicaReport replica_report(const std::vector<ReplicaScrape>& before, const std::vector<ReplicaScrape>& after,
                             int64_t client_completed, int64_t client_output_tokens) {
  ReplicaReport report;
  report.client_completed = client_completed;
  report.client_output_tokens = client_output_tokens;
  for (std::size_t i = 0; i < after.size(); ++i) {
    ReplicaRow row;
    row.replica = after[i].replica;
    row.metrics_url = after[i].metrics_url;
    const ReplicaScrape* b = i < before.size() ? &before[i] : nullptr;
    if (!b || !b->counters) row.error = "before the run: " + (b ? b->error : std::string("not scraped"));
    else if (!after[i].counters) row.error = "after the run: " + after[i].error;
    else if (b->counters->names != after[i].counters->names)
      row.error = fmt::format("it exposed {} names before the run and {} after (another server took its port?)",
                              b->counters->names, after[i].counters->names);
    if (row.error.empty()) {
      const ReplicaCounters &x = *b->counters, &y = *after[i].counters;
      ReplicaCounters d{.names = y.names,
                        .completed = y.completed - x.completed,
                        .failed = y.failed - x.failed,
                        .generated_tokens = y.generated_tokens - x.generated_tokens,
                        .prompt_tokens = y.prompt_tokens - x.prompt_tokens};
      if (d.completed < 0 || d.failed < 0 || d.generated_tokens < 0 || d.prompt_tokens < 0)
        row.error = "a counter went down during the run (the replica restarted?)";
      else row.delta = d;
    }
    if (row.delta) {
      report.completed += row.delta->completed;
      report.failed += row.delta->failed;
      report.generated_tokens += row.delta->generated_tokens;
      report.prompt_tokens += row.delta->prompt_tokens;
    } else {
      report.complete = false;
    }
    report.rows.push_back(std::move(row));
  }
  for (auto& row : report.rows)
    if (row.delta && report.completed > 0) row.share = row.delta->completed / report.completed;
  if (report.complete) {
    report.requests_match = report.completed == static_cast<double>(client_completed);
    report.tokens_match = report.generated_tokens == static_cast<double>(client_output_tokens);
  }
  return report;
}

std::string format_replica_report(const ReplicaReport& report) {
  std::string out = "Per-replica counts (each replica's /metrics, after the run minus before):\n";
  std::size_t width = 8;
  for (const auto& row : report.rows) width = std::max(width, row.replica.size());
  out += fmt::format("{:<{}} {:>10} {:>8} {:>8} {:>17}\n", "replica", width, "completed", "share", "failed",
                     "generated_tokens");
  for (const auto& row : report.rows) {
    if (row.delta)
      out += fmt::format("{:<{}} {:>10.0f} {:>7.1f}% {:>8.0f} {:>17.0f}\n", row.replica, width, row.delta->completed,
                         row.share * 100, row.delta->failed, row.delta->generated_tokens);
    else out += fmt::format("{:<{}} NOT COUNTED: {}\n", row.replica, width, row.error);
  }
  out += fmt::format("{:<{}} {:>10.0f} {:>8} {:>8.0f} {:>17.0f}\n", report.complete ? "sum" : "sum (partial)", width,
                     report.completed, report.completed > 0 ? "100.0%" : "-", report.failed, report.generated_tokens);
  out += fmt::format("{:<{}} {:>10} {:>8} {:>8} {:>17}\n", "client", width, report.client_completed, "", "",
                     report.client_output_tokens);
  auto verdict = [](const std::optional<bool>& m) { return !m ? "unknown (a replica was not counted)" : *m ? "yes" : "NO"; };
  out += fmt::format("Replica sums match the client: requests {}, generated tokens {}\n", verdict(report.requests_match),
                     verdict(report.tokens_match));
  if (report.requests_match == false || report.tokens_match == false)
    out += "  (other clients' traffic on the replicas, a replica missing from --replica-metrics, or output tokens "
           "counted without the server's usage make them differ)\n";
  return out;
}

nlohmann::json replica_report_json(const ReplicaReport& report) {
  auto optional_bool = [](const std::optional<bool>& b) { return b ? nlohmann::json(*b) : nlohmann::json(nullptr); };
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : report.rows) {
    nlohmann::json r = {{"replica", row.replica}, {"metrics_url", row.metrics_url}};
    if (row.delta) {
      r["names"] = row.delta->names;
      r["completed"] = static_cast<int64_t>(std::llround(row.delta->completed));
      r["share"] = row.share;
      r["failed"] = static_cast<int64_t>(std::llround(row.delta->failed));
      r["generated_tokens"] = static_cast<int64_t>(std::llround(row.delta->generated_tokens));
      r["prompt_tokens"] = static_cast<int64_t>(std::llround(row.delta->prompt_tokens));
      r["error"] = nullptr;
    } else {
      r["error"] = row.error;
    }
    rows.push_back(std::move(r));
  }
  return {{"source", "each replica's /metrics, after the run minus before"},
          {"rows", std::move(rows)},
          {"complete", report.complete},
          {"sum",
           {{"completed", static_cast<int64_t>(std::llround(report.completed))},
            {"failed", static_cast<int64_t>(std::llround(report.failed))},
            {"generated_tokens", static_cast<int64_t>(std::llround(report.generated_tokens))},
            {"prompt_tokens", static_cast<int64_t>(std::llround(report.prompt_tokens))}}},
          {"client", {{"completed", report.client_completed}, {"output_tokens", report.client_output_tokens}}},
          {"requests_match", optional_bool(report.requests_match)},
          {"tokens_match", optional_bool(report.tokens_match)}};
}

}  // namespace inferlab::lab
