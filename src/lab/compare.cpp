#include "inferlab/lab/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"

namespace inferlab::lab {
namespace {

// Per metric, one group of values per successful request (empty when it has none).
struct RunGroups {
  std::vector<std::vector<double>> ttft, tpot, itl, e2e;
};

RunGroups groups_of(const std::vector<RequestRecord>& records) {
  RunGroups g;
  bool derived = false;
  for (const auto& r : records) {
    if (r.status != "ok") continue;
    if (r.ttft_ms) g.ttft.push_back({*r.ttft_ms});
    if (auto t = request_tpot(r, &derived)) g.tpot.push_back({*t});
    if (!r.itl_ms.empty()) g.itl.push_back(r.itl_ms);
    g.e2e.push_back({r.end_ms - r.start_ms});
  }
  return g;
}

std::vector<double> flatten(const std::vector<std::vector<double>>& groups) {
  std::vector<double> all;
  for (const auto& g : groups) all.insert(all.end(), g.begin(), g.end());
  return all;
}

std::string confidence_words(double confidence) { return fmt::format("{:g} %", confidence * 100); }

MetricComparison compare_metric(const std::string& name, const std::vector<std::vector<double>>& a,
                                const std::vector<std::vector<double>>& b, const CompareOptions& options,
                                uint64_t seed) {
  MetricComparison c;
  c.metric = name;
  c.requests_a = a.size();
  c.requests_b = b.size();
  if (a.empty() || b.empty()) {
    c.verdict = fmt::format("not compared (no values in {})", a.empty() ? (b.empty() ? "A nor B" : "A") : "B");
    return c;
  }
  c.compared = true;
  c.median_a = median(flatten(a));
  c.median_b = median(flatten(b));
  c.difference = c.median_b - c.median_a;
  c.interval = bootstrap_median_difference(a, b, options.resamples, options.confidence, seed);
  c.verdict = latency_verdict(c.interval, options.confidence);
  return c;
}

// Output throughput of the requests at `indices` (a resample; the same request may repeat):
// successful output tokens over the window max(end) - min(start) of all of them.
double throughput_of(const std::vector<RequestRecord>& records, const std::vector<std::size_t>& indices) {
  double tokens = 0, start = 0, end = 0;
  bool first = true;
  for (std::size_t i : indices) {
    const RequestRecord& r = records[i];
    if (r.status == "ok" && r.output_tokens) tokens += static_cast<double>(*r.output_tokens);
    start = first ? r.start_ms : std::min(start, r.start_ms);
    end = first ? r.end_ms : std::max(end, r.end_ms);
    first = false;
  }
  return end > start ? tokens / ((end - start) / 1000) : 0;
}

MetricComparison compare_throughput(const std::vector<RequestRecord>& a, const std::vector<RequestRecord>& b,
                                    const CompareOptions& options, uint64_t seed) {
  MetricComparison c;
  c.metric = "Output";
  c.unit = "token/s";
  c.higher_is_better = true;
  auto successful = [](const std::vector<RequestRecord>& rs) {
    return static_cast<std::size_t>(std::count_if(rs.begin(), rs.end(), [](const auto& r) { return r.status == "ok"; }));
  };
  c.requests_a = successful(a);
  c.requests_b = successful(b);
  if (a.empty() || b.empty()) {
    c.verdict = fmt::format("not compared (no requests in {})", a.empty() ? (b.empty() ? "A nor B" : "A") : "B");
    return c;
  }
  auto all = [](std::size_t n) {
    std::vector<std::size_t> idx(n);
    for (std::size_t i = 0; i < n; ++i) idx[i] = i;
    return idx;
  };
  c.compared = true;
  c.median_a = throughput_of(a, all(a.size()));
  c.median_b = throughput_of(b, all(b.size()));
  c.difference = c.median_b - c.median_a;
  c.interval = bootstrap_difference(
      a.size(), [&](const std::vector<std::size_t>& idx) { return throughput_of(a, idx); }, b.size(),
      [&](const std::vector<std::size_t>& idx) { return throughput_of(b, idx); }, options.resamples,
      options.confidence, seed);
  c.verdict = throughput_verdict(c.interval, options.confidence);
  return c;
}

}  // namespace

std::string latency_verdict(const Interval& interval, double confidence) {
  if (interval.high < 0) return "faster";
  if (interval.low > 0) return "slower";
  return "no significant difference at " + confidence_words(confidence);
}

std::string throughput_verdict(const Interval& interval, double confidence) {
  if (interval.low > 0) return "faster";
  if (interval.high < 0) return "slower";
  return "no significant difference at " + confidence_words(confidence);
}

std::vector<MetricComparison> compare_runs(const std::vector<RequestRecord>& a, const std::vector<RequestRecord>& b,
                                           const CompareOptions& options) {
  const RunGroups ga = groups_of(a), gb = groups_of(b);
  // One seed per metric, derived from the user's: each metric's interval is reproducible alone.
  return {compare_metric("TTFT", ga.ttft, gb.ttft, options, options.seed),
          compare_metric("TPOT", ga.tpot, gb.tpot, options, options.seed + 1),
          compare_metric("ITL", ga.itl, gb.itl, options, options.seed + 2),
          compare_metric("E2E", ga.e2e, gb.e2e, options, options.seed + 3),
          compare_throughput(a, b, options, options.seed + 4)};
}

std::vector<MetricComparison> compare_repeated(const nlohmann::json& a, const nlohmann::json& b,
                                               const std::string& name_a, const std::string& name_b,
                                               const CompareOptions& options) {
  auto metrics_of = [](const nlohmann::json& j, const std::string& name) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains("repeat") || !j["repeat"].is_object() || !j["repeat"].contains("metrics") ||
        !j["repeat"]["metrics"].is_object())
      fail("{}: not a summary of repeated runs (no \"repeat\" block); run bench serve --repeat K (K >= 2) "
           "--summary FILE, or compare two requests.csv",
           name);
    return j["repeat"]["metrics"];
  };
  const nlohmann::json &ma = metrics_of(a, name_a), &mb = metrics_of(b, name_b);
  auto per_run = [](const nlohmann::json& m, const std::string& file, const std::string& metric) {
    std::vector<double> values;
    if (m.contains("per_run") && m["per_run"].is_array())
      for (const auto& v : m["per_run"])
        if (v.is_number()) values.push_back(v.get<double>());
    if (values.empty()) fail("{}: repeat metric {} has no per_run numbers", file, metric);
    return values;
  };
  std::vector<MetricComparison> rows;
  uint64_t seed = options.seed;
  // The repeat block's order (JSON objects come back sorted by name), then any other name.
  std::vector<std::string> names = {"ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "itl_p50_ms",
                                    "itl_p95_ms",  "e2e_p50_ms",  "e2e_p95_ms",  "output_throughput",
                                    "request_throughput"};
  for (const auto& [metric, value] : ma.items())
    if (std::find(names.begin(), names.end(), metric) == names.end()) names.push_back(metric);
  for (const std::string& metric : names) {
    if (!ma.contains(metric) || !mb.contains(metric)) continue;
    const nlohmann::json& value = ma[metric];
    MetricComparison c;
    c.metric = metric;
    const bool throughput = metric.ends_with("_throughput");
    c.unit = metric == "output_throughput" ? "token/s" : metric == "request_throughput" ? "req/s" : "ms";
    c.higher_is_better = throughput;
    const std::vector<double> va = per_run(value, name_a, metric), vb = per_run(mb[metric], name_b, metric);
    c.requests_a = va.size();
    c.requests_b = vb.size();
    c.compared = true;
    c.median_a = median(va);
    c.median_b = median(vb);
    c.difference = c.median_b - c.median_a;
    std::vector<std::vector<double>> ga, gb;  // one group per run
    for (double v : va) ga.push_back({v});
    for (double v : vb) gb.push_back({v});
    c.interval = bootstrap_median_difference(ga, gb, options.resamples, options.confidence, seed++);
    c.verdict = throughput ? throughput_verdict(c.interval, options.confidence)
                           : latency_verdict(c.interval, options.confidence);
    rows.push_back(std::move(c));
  }
  if (rows.empty()) fail("{} and {}: no repeat metric in common", name_a, name_b);
  return rows;
}

std::string format_comparison(const std::vector<MetricComparison>& rows, const std::string& name_a,
                              const std::string& name_b, const CompareOptions& options, bool over_runs) {
  std::string out = fmt::format("A: {}\nB: {}\n", name_a, name_b);
  const std::string ci = confidence_words(options.confidence) + " CI";
  const int width = over_runs ? 20 : 12;
  out += fmt::format("{:<{}}{:>7}{:>7}{:>11}{:>11}{:>10}  {:<22}{}\n", over_runs ? "Metric" : "Metric (ms)", width,
                     over_runs ? "runs A" : "n A", over_runs ? "runs B" : "n B", "median A", "median B", "B - A", ci,
                     "verdict");
  for (const auto& r : rows) {
    const std::string name = !over_runs && r.unit == "token/s" ? r.metric + " tok/s" : r.metric;
    if (!r.compared) {
      out += fmt::format("{:<{}}{:>7}{:>7}  {}\n", name, width, r.requests_a, r.requests_b, r.verdict);
      continue;
    }
    out += fmt::format("{:<{}}{:>7}{:>7}{:>11.2f}{:>11.2f}{:>+10.2f}  {:<22}{}\n", name, width, r.requests_a,
                       r.requests_b, r.median_a, r.median_b, r.difference,
                       fmt::format("[{:+.2f}, {:+.2f}]", r.interval.low, r.interval.high), r.verdict);
  }
  if (over_runs)
    out += fmt::format(
        "B - A is the difference of the medians over runs of each run's figure (ms, or token/s and req/s for "
        "throughputs). CI: percentile bootstrap, {} resamples of runs, seed {}. faster/slower: the whole CI is "
        "below/above 0 for latencies, above/below 0 for throughputs.\n",
        options.resamples, options.seed);
  else
    out += fmt::format(
        "B - A is the difference of medians (numpy's) over successful requests; n counts requests. Output: output "
        "throughput (token/s, not a median). CI: percentile bootstrap, {} resamples of requests, seed {}. "
        "faster/slower: the whole CI is below/above 0 (above/below for throughput).\n",
        options.resamples, options.seed);
  return out;
}

nlohmann::json comparison_json(const std::vector<MetricComparison>& rows, const std::string& name_a,
                               const std::string& name_b, const CompareOptions& options, bool over_runs) {
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& r : rows) {
    nlohmann::json m = {{"verdict", r.verdict}};
    m[over_runs ? "runs_a" : "requests_a"] = r.requests_a;
    m[over_runs ? "runs_b" : "requests_b"] = r.requests_b;
    if (r.compared) {
      // Request latencies keep their names with _ms; throughputs and run figures name the unit.
      const bool ms_names = !over_runs && r.unit == "ms";
      const std::string suffix = ms_names ? "_ms" : "";
      m[(over_runs ? "median_a" : ms_names ? "median_a" : "value_a") + suffix] = r.median_a;
      m[(over_runs ? "median_b" : ms_names ? "median_b" : "value_b") + suffix] = r.median_b;
      m["difference" + suffix] = r.difference;
      m["ci_low" + suffix] = r.interval.low;
      m["ci_high" + suffix] = r.interval.high;
      if (!ms_names) m["unit"] = r.unit;
    }
    metrics[r.metric] = m;
  }
  return {{"a", name_a},
          {"b", name_b},
          {"statistic", over_runs ? "median over runs of B - median over runs of A"
                                  : "median(B) - median(A), successful requests; Output: output throughput"},
          {"ci_method", over_runs ? "percentile bootstrap over runs" : "percentile bootstrap over requests"},
          {"confidence", options.confidence},
          {"resamples", options.resamples},
          {"seed", options.seed},
          {"metrics", metrics}};
}

}  // namespace inferlab::lab
