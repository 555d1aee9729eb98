// Statistics shared by the server's metrics, the scheduler and the benchmarks. Each percentile
// method is the one a figure it feeds is compared against: nearest rank for the course's report,
// numpy's median for the latency experiment.
#pragma once
#include <cstdint>
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
// numpy.median: the middle value, or the mean of the middle two for even n. Non-empty values.
double median(std::vector<double> values);
// The arithmetic mean (summed in order); 0 for no values.
double mean(const std::vector<double>& values);
// The sample standard deviation (n - 1 in the denominator, as numpy's std(ddof=1)); 0 below two values.
double sample_stddev(const std::vector<double>& values);

}  // namespace inferlab
