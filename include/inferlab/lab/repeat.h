// `bench serve --repeat K`: the same load run K times against one server. Per metric (TTFT/TPOT/
// ITL/E2E medians and p95s, throughputs) the K per-run values, their median, a seeded percentile-
// bootstrap 95 % CI of that median and the coefficient of variation (docs/measurement.md).
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "inferlab/lab/metrics.h"
#include "inferlab/util/stats.h"

namespace inferlab::lab {

struct RepeatOptions {
  int resamples = 2000;
  double confidence = 0.95;
  uint64_t seed = 0;
  double cv_warning = 0.10;  // a CV above this is flagged: the runs disagree
};

struct RepeatedMetric {
  std::string name;  // e.g. "ttft_p50_ms", "output_throughput"
  std::string label;  // e.g. "P50 TTFT (ms)"
  std::vector<double> per_run;
  double median = 0;
  Interval ci;
  double cv = 0;
  bool unstable = false;  // cv > RepeatOptions::cv_warning
};

// One row per metric every run has (ITL only when every run recorded it; TPOT when every run has
// one). Needs at least one run.
std::vector<RepeatedMetric> repeat_metrics(const std::vector<Summary>& runs, const RepeatOptions& options);
std::string format_repeat(const std::vector<RepeatedMetric>& metrics, std::size_t runs, const RepeatOptions& options);
nlohmann::json repeat_json(const std::vector<RepeatedMetric>& metrics, std::size_t runs, const RepeatOptions& options);

}  // namespace inferlab::lab
