#include "inferlab/bench/compare.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"

namespace inferlab::bench {
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

}  // namespace

std::string latency_verdict(const Interval& interval, double confidence) {
  if (interval.high < 0) return "faster";
  if (interval.low > 0) return "slower";
  return "no significant difference at " + confidence_words(confidence);
}

std::vector<MetricComparison> compare_runs(const std::vector<RequestRecord>& a, const std::vector<RequestRecord>& b,
                                           const CompareOptions& options) {
  const RunGroups ga = groups_of(a), gb = groups_of(b);
  // One seed per metric, derived from the user's: each metric's interval is reproducible alone.
  return {compare_metric("TTFT", ga.ttft, gb.ttft, options, options.seed),
          compare_metric("TPOT", ga.tpot, gb.tpot, options, options.seed + 1),
          compare_metric("ITL", ga.itl, gb.itl, options, options.seed + 2),
          compare_metric("E2E", ga.e2e, gb.e2e, options, options.seed + 3)};
}

std::string format_comparison(const std::vector<MetricComparison>& rows, const std::string& name_a,
                              const std::string& name_b, const CompareOptions& options) {
  std::string out = fmt::format("A: {}\nB: {}\n", name_a, name_b);
  const std::string ci = confidence_words(options.confidence) + " CI";
  out += fmt::format("{:<12}{:>7}{:>7}{:>11}{:>11}{:>10}  {:<22}{}\n", "Metric (ms)", "n A", "n B", "median A",
                     "median B", "B - A", ci, "verdict");
  for (const auto& r : rows) {
    if (!r.compared) {
      out += fmt::format("{:<12}{:>7}{:>7}  {}\n", r.metric, r.requests_a, r.requests_b, r.verdict);
      continue;
    }
    out += fmt::format("{:<12}{:>7}{:>7}{:>11.2f}{:>11.2f}{:>+10.2f}  {:<22}{}\n", r.metric, r.requests_a,
                       r.requests_b, r.median_a, r.median_b, r.difference,
                       fmt::format("[{:+.2f}, {:+.2f}]", r.interval.low, r.interval.high), r.verdict);
  }
  out += fmt::format(
      "B - A is the difference of medians (numpy's) over successful requests; n counts requests. CI: percentile "
      "bootstrap, {} resamples of requests, seed {}. faster/slower: the whole CI is below/above 0.\n",
      options.resamples, options.seed);
  return out;
}

nlohmann::json comparison_json(const std::vector<MetricComparison>& rows, const std::string& name_a,
                               const std::string& name_b, const CompareOptions& options) {
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& r : rows) {
    nlohmann::json m = {{"requests_a", r.requests_a}, {"requests_b", r.requests_b}, {"verdict", r.verdict}};
    if (r.compared) {
      m["median_a_ms"] = r.median_a;
      m["median_b_ms"] = r.median_b;
      m["difference_ms"] = r.difference;
      m["ci_low_ms"] = r.interval.low;
      m["ci_high_ms"] = r.interval.high;
    }
    metrics[r.metric] = m;
  }
  return {{"a", name_a},
          {"b", name_b},
          {"statistic", "median(B) - median(A), successful requests"},
          {"ci_method", "percentile bootstrap over requests"},
          {"confidence", options.confidence},
          {"resamples", options.resamples},
          {"seed", options.seed},
          {"metrics", metrics}};
}

}  // namespace inferlab::bench
