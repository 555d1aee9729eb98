// Two runs compared per metric, with a seeded percentile-bootstrap confidence interval of the
// difference B - A and a verdict a user can act on: two requests.csv (medians of the requests'
// latencies, and the output throughput; resampled by request), or two `bench serve --repeat`
// summaries (the medians of the runs' figures; resampled by run).
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "inferlab/lab/metrics.h"

namespace inferlab::lab {

struct CompareOptions {
  int resamples = 2000;
  double confidence = 0.95;
  uint64_t seed = 0;
};

struct MetricComparison {
  std::string metric;          // "TTFT", "TPOT", "ITL", "E2E", "Output"; summaries: the repeat block's names
  std::size_t requests_a = 0;  // successful requests with a value on each side (summaries: runs)
  std::size_t requests_b = 0;
  double median_a = 0, median_b = 0, difference = 0;  // difference = median_b - median_a
  std::string unit = "ms";        // "token/s", "req/s" for throughputs
  bool higher_is_better = false;  // throughputs
  Interval interval;                                  // of the difference
  std::string verdict;  // "faster", "slower", "no significant difference at 95 %", or why none
  bool compared = false;  // false when a side has no values for this metric
};

// The verdict of one difference interval for a latency (lower is better): B is "faster" when the
// whole interval lies below zero, "slower" when above, else no significant difference.
std::string latency_verdict(const Interval& interval, double confidence);
// The same for a throughput (higher is better): "faster" when the whole interval lies above zero.
std::string throughput_verdict(const Interval& interval, double confidence);

// TTFT, TPOT, ITL and E2E of the successful requests of each run, and the output throughput
// (successful output tokens / window; "Output", token/s). ITL resamples requests (all of a
// request's gaps together), as its gaps are not independent; the throughput resamples requests
// and recomputes tokens and window.
std::vector<MetricComparison> compare_runs(const std::vector<RequestRecord>& a, const std::vector<RequestRecord>& b,
                                           const CompareOptions& options = {});

// Two summary JSONs of `bench serve --repeat K` (their "repeat" block): per metric both have, the
// median over runs of each side, B - A, a bootstrap CI over runs and the verdict. Throws Error
// naming the file when a summary has no repeat block.
std::vector<MetricComparison> compare_repeated(const nlohmann::json& a, const nlohmann::json& b,
                                               const std::string& name_a, const std::string& name_b,
                                               const CompareOptions& options = {});

// over_runs: the rows come from compare_repeated (n counts runs; the CI resamples runs).
std::string format_comparison(const std::vector<MetricComparison>& rows, const std::string& name_a,
                              const std::string& name_b, const CompareOptions& options, bool over_runs = false);
nlohmann::json comparison_json(const std::vector<MetricComparison>& rows, const std::string& name_a,
                               const std::string& name_b, const CompareOptions& options, bool over_runs = false);

}  // namespace inferlab::lab
