// `inferlab bench capacity`: the highest load (Poisson request rate, or concurrency level) whose
// requests meet a latency SLO. A geometric sweep finds the first failing load, bisection narrows
// the step between the last passing and the first failing one; each point is run again until the
// bootstrap CI of its SLO metrics lies on one side of the objective or K runs are spent
// (docs/measurement.md, "SLO capacity search").
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/lab/metrics.h"
#include "inferlab/lab/repeat.h"
#include "inferlab/util/stats.h"

namespace inferlab::lab {

// One objective: the `percentile` (0..1] of `metric` ("ttft", "tpot" or "e2e") over a run's
// requests at most `bound_ms`. Written ttft_p95_ms=200.
struct SloObjective {
  std::string key;     // as given: "ttft_p95_ms"
  std::string metric;  // "ttft" | "tpot" | "e2e"
  double percentile = 0.95;
  double bound_ms = 0;
};
// "ttft_p95_ms=200,tpot_p95_ms=50" (metrics ttft, tpot, e2e; any percentile p1..p100, e.g. p99.9).
// Throws Error naming the bad part.
std::vector<SloObjective> parse_capacity_slo(const std::string& text);

// The objective's value for one run: the nearest-rank percentile over *all* its requests, a failed
// request (or a successful one without the metric, e.g. no content) ranked last as +inf, a
// one-token answer's TPOT as 0 (no decode step). +inf when more requests failed than the
// percentile allows.
double objective_value(const SloObjective& objective, const std::vector<RequestRecord>& records);

enum class LoadKind { Rate, Concurrency };

struct CapacityOptions {
  LoadKind kind = LoadKind::Rate;
  double low = 0.5, high = 64;  // the load range searched (rates in req/s, or concurrency levels)
  double sweep_factor = 2;      // the sweep multiplies the load by this until a point fails
  double resolution = 0.1;      // rates: bisection stops when first failing / last passing <= 1 + this;
                                // concurrency: when they are adjacent levels
  int repeat = 3;               // most runs per point (K); at least min(2, K)
  std::vector<SloObjective> slo;
  RepeatOptions statistics;     // bootstrap resamples, confidence, seed
};

// One run of one load: the requests it recorded, and whether a signal cut it short.
struct CapacityRun {
  std::vector<RequestRecord> records;
  std::string interrupted_by;
};
// Runs `load` once; `run` numbers the runs of the whole search from 1 (every run gets its own
// arrival seed from it).
using RunLoad = std::function<CapacityRun(double load, int run)>;

struct ObjectiveResult {
  SloObjective objective;
  std::vector<double> per_run;  // objective_value of each run (+inf possible)
  double median = 0;
  Interval ci;
};

struct CapacityPoint {
  double load = 0;
  std::string phase;                 // "sweep" | "bisect"
  std::vector<int> runs;             // the search's run numbers measured here
  std::size_t requests = 0, failed = 0;
  std::vector<RepeatedMetric> curve;  // output/request throughput, goodput, p95 TTFT/TPOT over runs
  std::vector<ObjectiveResult> objectives;
  bool meets = false;
  // "ci": every objective's CI below its bound (meets) or one above (fails); "median": after K
  // runs some CI still straddles its bound, and the medians decided; "single run": K = 1.
  std::string decided_by;
};

struct CapacityResult {
  std::vector<CapacityPoint> points;   // in the order measured
  // "found", "below range" (the lowest load fails), "above range" (the highest passes),
  // "interrupted".
  std::string outcome;
  std::optional<double> capacity;       // the highest load that met the SLO
  std::optional<double> first_failing;  // the lowest load above it that did not
  std::optional<double> knee;           // see find_knee
  std::string interrupted_by;
};

CapacityResult search_capacity(const CapacityOptions& options, const RunLoad& run_load,
                               const std::function<void(const CapacityPoint&)>& on_point = {});

// The knee of a latency curve (Kneedle, Satopaa et al. 2011, for a convex increasing curve): loads
// and values scaled to [0, 1], the load whose point lies farthest below the diagonal; each value
// taken as the running maximum in load order (a noisy dip is not a knee). None below 3 points or
// when no point is at least 0.1 below it (the curve hardly bends).
std::optional<double> find_knee(const std::vector<double>& loads, const std::vector<double>& values);

std::string format_capacity(const CapacityResult& result, const CapacityOptions& options);
nlohmann::json capacity_json(const CapacityResult& result, const CapacityOptions& options);
// Two panels over the load: p95 TTFT and TPOT with their CIs and the objectives; throughput and
// goodput. The capacity and the knee are marked.
std::string capacity_svg(const CapacityResult& result, const CapacityOptions& options, const std::string& title);

const char* load_unit(LoadKind kind);  // "req/s" | "streams"

}  // namespace inferlab::lab
