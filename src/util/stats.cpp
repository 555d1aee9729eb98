#include "inferlab/util/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "inferlab/util/error.h"

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

double linear_percentile(const std::vector<double>& sorted, double p) {
  const double h = (static_cast<double>(sorted.size()) - 1) * std::clamp(p, 0.0, 1.0);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  // numpy's _lerp: a + (b - a) * t, so equal neighbours give exactly their value. Returning a
  // directly then changes no finite result, and keeps an infinite value (a capacity run whose
  // failures rank last) from becoming inf - inf = NaN.
  const double t = h - static_cast<double>(lo);
  if (t == 0 || sorted[lo] == sorted[lo + 1]) return sorted[lo];
  return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * t;
}

double percentile(const std::vector<double>& sorted, double p, PercentileMethod method) {
  return method == PercentileMethod::Linear ? linear_percentile(sorted, p) : nearest_rank(sorted, p);
}

PercentileMethod parse_percentile_method(const std::string& name) {
  if (name == "nearest-rank") return PercentileMethod::NearestRank;
  if (name == "linear") return PercentileMethod::Linear;
  fail("--percentiles: '{}' is not a method (nearest-rank: the course's sorted[ceil(p*n)-1]; linear: numpy's "
       "default, as vLLM)",
       name);
}

std::string percentile_method_name(PercentileMethod method) {
  return method == PercentileMethod::Linear ? "linear" : "nearest-rank";
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

namespace {

// An index in [0, n) from 53 random bits: the same draws on every standard library (unlike
// std::uniform_int_distribution), so a seeded interval is reproducible anywhere.
std::size_t draw_index(std::mt19937_64& rng, std::size_t n) {
  return static_cast<std::size_t>(static_cast<double>(rng() >> 11) * 0x1.0p-53 * static_cast<double>(n));
}

// numpy's median by partial sort; reorders values (a resample's scratch, kept for the next one).
double median_in_place(std::vector<double>& values) {
  const std::size_t n = values.size(), mid = n / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (n % 2) return values[mid];
  return (*std::max_element(values.begin(), values.begin() + mid) + values[mid]) / 2;
}

// The median of a resample of groups, drawn with replacement; scratch is reused between calls.
double resampled_median(const std::vector<std::vector<double>>& groups, std::mt19937_64& rng,
                        std::vector<double>& scratch) {
  scratch.clear();
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[draw_index(rng, groups.size())];
    scratch.insert(scratch.end(), g.begin(), g.end());
  }
  // A resample may draw only empty groups (ITL of one-token replies): draw again.
  while (scratch.empty()) {
    const auto& g = groups[draw_index(rng, groups.size())];
    scratch.insert(scratch.end(), g.begin(), g.end());
  }
  return median_in_place(scratch);
}

Interval percentile_interval(std::vector<double> estimates, double confidence) {
  std::sort(estimates.begin(), estimates.end());
  const double tail = (1 - confidence) / 2;
  return {linear_percentile(estimates, tail), linear_percentile(estimates, 1 - tail)};
}

void check_bootstrap_arguments(int resamples, double confidence) {
  if (resamples < 1) fail("bootstrap: resamples must be positive, got {}", resamples);
  if (!(confidence > 0 && confidence < 1)) fail("bootstrap: confidence must be in (0, 1), got {}", confidence);
}

bool has_values(const std::vector<std::vector<double>>& groups) {
  return std::any_of(groups.begin(), groups.end(), [](const auto& g) { return !g.empty(); });
}

}  // namespace

Interval bootstrap_median_difference(const std::vector<std::vector<double>>& a,
                                     const std::vector<std::vector<double>>& b, int resamples,
                                     double confidence, uint64_t seed) {
  check_bootstrap_arguments(resamples, confidence);
  if (!has_values(a) || !has_values(b)) fail("bootstrap: each side needs at least one value");
  std::mt19937_64 rng(seed);
  std::vector<double> differences, scratch;
  differences.reserve(resamples);
  for (int i = 0; i < resamples; ++i) {
    const double median_a = resampled_median(a, rng, scratch);
    differences.push_back(resampled_median(b, rng, scratch) - median_a);
  }
  return percentile_interval(std::move(differences), confidence);
}

double coefficient_of_variation(const std::vector<double>& values) {
  const double m = mean(values);
  return values.size() < 2 || m == 0 ? 0.0 : sample_stddev(values) / std::abs(m);
}

Interval bootstrap_difference(std::size_t count_a, const ResampleStatistic& statistic_a, std::size_t count_b,
                              const ResampleStatistic& statistic_b, int resamples, double confidence, uint64_t seed) {
  check_bootstrap_arguments(resamples, confidence);
  if (count_a == 0 || count_b == 0) fail("bootstrap: each side needs at least one value");
  std::mt19937_64 rng(seed);
  std::vector<double> differences;
  std::vector<std::size_t> indices;
  auto draw = [&](std::size_t n, const ResampleStatistic& statistic) {
    indices.clear();
    for (std::size_t i = 0; i < n; ++i) indices.push_back(draw_index(rng, n));
    return statistic(indices);
  };
  differences.reserve(resamples);
  for (int i = 0; i < resamples; ++i) {
    const double a = draw(count_a, statistic_a);
    differences.push_back(draw(count_b, statistic_b) - a);
  }
  return percentile_interval(std::move(differences), confidence);
}

Interval bootstrap_median(const std::vector<double>& values, int resamples, double confidence, uint64_t seed) {
  check_bootstrap_arguments(resamples, confidence);
  if (values.empty()) fail("bootstrap: no values");
  std::vector<std::vector<double>> groups;
  for (double v : values) groups.push_back({v});
  std::mt19937_64 rng(seed);
  std::vector<double> medians, scratch;
  medians.reserve(resamples);
  for (int i = 0; i < resamples; ++i) medians.push_back(resampled_median(groups, rng, scratch));
  return percentile_interval(std::move(medians), confidence);
}

}  // namespace inferlab
