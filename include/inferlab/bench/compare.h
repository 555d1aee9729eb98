// Two runs' requests.csv compared per metric: the difference of medians B - A with a seeded
// percentile-bootstrap confidence interval over requests, and a verdict a user can act on.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "inferlab/bench/metrics.h"

namespace inferlab::bench {

struct CompareOptions {
  int resamples = 2000;
  double confidence = 0.95;
  uint64_t seed = 0;
};

struct MetricComparison {
  std::string metric;          // "TTFT", "TPOT", "ITL", "E2E"
  std::size_t requests_a = 0;  // successful requests with a value on each side
  std::size_t requests_b = 0;
  double median_a = 0, median_b = 0, difference = 0;  // difference = median_b - median_a (ms)
  Interval interval;                                  // of the difference
  std::string verdict;  // "faster", "slower", "no significant difference at 95 %", or why none
  bool compared = false;  // false when a side has no values for this metric
};

// The verdict of one difference interval for a latency (lower is better): B is "faster" when the
// whole interval lies below zero, "slower" when above, else no significant difference.
std::string latency_verdict(const Interval& interval, double confidence);

// TTFT, TPOT, ITL and E2E of the successful requests of each run. ITL resamples requests (all of a
// request's gaps together), as its gaps are not independent.
std::vector<MetricComparison> compare_runs(const std::vector<RequestRecord>& a, const std::vector<RequestRecord>& b,
                                           const CompareOptions& options = {});

std::string format_comparison(const std::vector<MetricComparison>& rows, const std::string& name_a,
                              const std::string& name_b, const CompareOptions& options);
nlohmann::json comparison_json(const std::vector<MetricComparison>& rows, const std::string& name_a,
                               const std::string& name_b, const CompareOptions& options);

}  // namespace inferlab::bench
