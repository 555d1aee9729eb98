// Statistics shared by the server's metrics, the scheduler and the benchmarks.
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

}  // namespace inferlab
