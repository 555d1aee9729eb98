#include "inferlab/util/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace inferlab {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::size_t i = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[i];
  sum += value;
  ++count;
}

double nearest_rank(const std::vector<double>& sorted, double p) {
  // Same float arithmetic as the course's ceil(p * len(ttft)) - 1.
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double sample_stddev(const std::vector<double>& values) {
  if (values.size() < 2) return 0.0;
  const double m = mean(values);
  double squares = 0;
  for (double v : values) squares += (v - m) * (v - m);
  return std::sqrt(squares / static_cast<double>(values.size() - 1));
}

}  // namespace inferlab
