// Statistics shared by the server's metrics, the scheduler and the benchmarks. Each percentile
// method is the one a figure it feeds is compared against: nearest rank for the course's report,
// numpy's median for the latency experiment, linear interpolation for figures compared with
// numpy / vLLM, and a seeded bootstrap for confidence intervals (docs/measurement.md).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace inferlab {

// Prometheus-style histogram: fixed upper bounds, counts per bucket, sum and count.
struct Histogram {
  std::vector<double> bounds;      // upper bounds, ascending; one more bucket for +Inf
  std::vector<uint64_t> counts;    // per bucket (not cumulative)
  double sum = 0.0;
  uint64_t count = 0;
  explicit Histogram(std::vector<double> upper_bounds = {});
  void observe(double value);
};

// The course's nearest rank on sorted, non-empty values: sorted[ceil(p * n) - 1] (rank clamped to 1..n).
double nearest_rank(const std::vector<double>& sorted, double p);
// numpy.percentile's default ("linear", as vLLM's bench serve): sorted[h] interpolated at
// h = (n - 1) * p. Sorted, non-empty values.
double linear_percentile(const std::vector<double>& sorted, double p);

enum class PercentileMethod { NearestRank, Linear };
double percentile(const std::vector<double>& sorted, double p, PercentileMethod method);
// "nearest-rank" | "linear"; throws Error naming both on anything else.
PercentileMethod parse_percentile_method(const std::string& name);
std::string percentile_method_name(PercentileMethod method);  // the name parse accepts

// numpy.median: the middle value, or the mean of the middle two for even n. Non-empty values.
double median(std::vector<double> values);
// The arithmetic mean (summed in order); 0 for no values.
double mean(const std::vector<double>& values);
// The sample standard deviation (n - 1 in the denominator, as numpy's std(ddof=1)); 0 below two values.
double sample_stddev(const std::vector<double>& values);
// The coefficient of variation: sample_stddev / |mean|; 0 below two values or for a zero mean.
double coefficient_of_variation(const std::vector<double>& values);

// A two-sided confidence interval.
struct Interval {
  double low = 0, high = 0;
  bool contains(double x) const { return low <= x && x <= high; }
};

// Percentile-bootstrap interval of median(B) - median(A). Each side is a list of groups (one
// request's values: one TTFT, or all its inter-token gaps); a resample draws groups with
// replacement, so values from one request stay together. Seeded: the same inputs give the same
// interval. Each side needs at least one non-empty group.
Interval bootstrap_median_difference(const std::vector<std::vector<double>>& a,
                                     const std::vector<std::vector<double>>& b, int resamples,
                                     double confidence, uint64_t seed);

// Percentile-bootstrap interval of statistic(B) - statistic(A) for any statistic of a resample:
// each side's items (count_a, count_b of them) are drawn with replacement and the statistic gets
// the drawn indices (e.g. a run's throughput from its resampled requests). Seeded as the above.
using ResampleStatistic = std::function<double(const std::vector<std::size_t>& indices)>;
Interval bootstrap_difference(std::size_t count_a, const ResampleStatistic& statistic_a, std::size_t count_b,
                              const ResampleStatistic& statistic_b, int resamples, double confidence, uint64_t seed);

// Percentile-bootstrap interval of the median of values (resampled one by one), e.g. a metric's
// medians over repeated runs. Non-empty values.
Interval bootstrap_median(const std::vector<double>& values, int resamples, double confidence, uint64_t seed);

}  // namespace inferlab
