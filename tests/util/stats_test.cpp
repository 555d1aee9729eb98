// The shared statistics, against the figures the course and numpy give.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "inferlab/util/error.h"
#include "inferlab/util/stats.h"

using namespace inferlab;

TEST(Stats, NearestRankMatchesTheCourseFormula) {
  std::vector<double> sorted;
  for (int i = 1; i <= 20; ++i) sorted.push_back(i);
  EXPECT_EQ(nearest_rank(sorted, 0.50), 10);
  EXPECT_EQ(nearest_rank(sorted, 0.95), 19);  // ceil(0.95 * 20) = 19 in double arithmetic
  EXPECT_EQ(nearest_rank(sorted, 0.99), 20);
  EXPECT_EQ(nearest_rank(sorted, 0.0), 1);    // rank clamped to the first value
  EXPECT_EQ(nearest_rank({7.0}, 0.5), 7);
  EXPECT_EQ(nearest_rank({92, 107}, 0.50), 92);   // the course's P50 TTFT of its two requests
  EXPECT_EQ(nearest_rank({92, 107}, 0.95), 107);  // and its P95
}

TEST(Stats, MedianIsNumpys) {
  EXPECT_EQ(median({3, 1, 2}), 2);           // numpy.median([3, 1, 2]) == 2.0
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);      // even n: the mean of the middle two
  EXPECT_EQ(median({0.1, 0.3}), (0.1 + 0.3) / 2);
  EXPECT_EQ(median({5}), 5);
}

TEST(Stats, MeanAndSampleStddev) {
  EXPECT_EQ(mean({1, 2, 3, 4}), 2.5);
  EXPECT_EQ(mean({}), 0);
  // numpy.std([2, 4, 4, 4, 5, 5, 7, 9], ddof=1) == sqrt(32 / 7)
  EXPECT_DOUBLE_EQ(sample_stddev({2, 4, 4, 4, 5, 5, 7, 9}), 2.138089935299395);
  EXPECT_EQ(sample_stddev({3}), 0);
  EXPECT_EQ(sample_stddev({}), 0);
}

TEST(Stats, HistogramBucketsByUpperBoundInclusive) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 5.0, 7.0}) h.observe(v);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 1, 1, 1}));  // le=1, le=2, le=5, +Inf
  EXPECT_EQ(h.count, 5u);
  EXPECT_DOUBLE_EQ(h.sum, 15.0);
  EXPECT_EQ(Histogram().counts, (std::vector<uint64_t>{0}));
}

TEST(Stats, LinearPercentileIsNumpysDefault) {
  std::vector<double> sorted;
  for (int i = 1; i <= 20; ++i) sorted.push_back(i);
  // numpy.percentile(range(1, 21), [50, 90, 95, 99]) == [10.5, 18.1, 19.05, 19.81]
  EXPECT_DOUBLE_EQ(linear_percentile(sorted, 0.50), 10.5);
  EXPECT_DOUBLE_EQ(linear_percentile(sorted, 0.90), 18.1);
  EXPECT_DOUBLE_EQ(linear_percentile(sorted, 0.95), 19.05);
  EXPECT_DOUBLE_EQ(linear_percentile(sorted, 0.99), 19.81);
  EXPECT_DOUBLE_EQ(linear_percentile({92, 107}, 0.50), 99.5);   // where nearest rank says 92
  EXPECT_DOUBLE_EQ(linear_percentile({92, 107}, 0.95), 106.25);
  EXPECT_DOUBLE_EQ(linear_percentile({0.1, 0.2, 0.5, 3.0, 7.5}, 0.99), 7.32);
  EXPECT_EQ(linear_percentile({5}, 0.9), 5);
  EXPECT_EQ(linear_percentile(sorted, 1.0), 20);
  EXPECT_EQ(linear_percentile(sorted, 0.0), 1);
}

// Infinite values (capacity runs whose failures rank last) stay infinite, never NaN.
TEST(Stats, LinearPercentileKeepsInfinities) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(linear_percentile({1, inf, inf}, 0.9), inf);
  EXPECT_EQ(linear_percentile({1, 2, inf}, 0.9), inf);  // between 2 and inf
  EXPECT_EQ(linear_percentile({1, 2, inf}, 0.5), 2);    // exactly on 2
  EXPECT_DOUBLE_EQ(linear_percentile({1, 2, inf}, 0.25), 1.5);
  const Interval ci = bootstrap_median({inf, inf, 3}, 500, 0.95, 1);
  EXPECT_EQ(ci.high, inf);
  EXPECT_FALSE(std::isnan(ci.low));
}

TEST(Stats, PercentileMethodByName) {
  EXPECT_EQ(parse_percentile_method("linear"), PercentileMethod::Linear);
  EXPECT_EQ(parse_percentile_method("nearest-rank"), PercentileMethod::NearestRank);
  EXPECT_EQ(percentile_method_name(parse_percentile_method("linear")), "linear");
  EXPECT_EQ(percentile({92, 107}, 0.5, PercentileMethod::NearestRank), 92);
  EXPECT_EQ(percentile({92, 107}, 0.5, PercentileMethod::Linear), 99.5);
  try {
    parse_percentile_method("numpy");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'numpy' is not a method"), std::string::npos) << e.what();
  }
}

TEST(Stats, BootstrapIsSeededAndBracketsTheEstimate) {
  std::vector<std::vector<double>> a, b;
  for (int i = 0; i < 50; ++i) a.push_back({static_cast<double>(i)}), b.push_back({i + 10.0});
  Interval first = bootstrap_median_difference(a, b, 500, 0.95, 7);
  Interval again = bootstrap_median_difference(a, b, 500, 0.95, 7);
  EXPECT_EQ(first.low, again.low);
  EXPECT_EQ(first.high, again.high);
  EXPECT_TRUE(first.contains(10.0)) << first.low << " .. " << first.high;  // the true shift
  EXPECT_GT(first.low, 0);
  EXPECT_LT(first.low, first.high);
  // Identical samples: the interval straddles zero.
  Interval none = bootstrap_median_difference(a, a, 500, 0.95, 7);
  EXPECT_TRUE(none.contains(0.0));
  Interval m = bootstrap_median({1, 2, 3, 4, 5, 6, 7, 8, 9}, 500, 0.95, 1);
  EXPECT_TRUE(m.contains(5.0));
  EXPECT_GE(m.low, 1);
  EXPECT_LE(m.high, 9);
}

TEST(Stats, BootstrapRejectsBadArguments) {
  EXPECT_THROW(bootstrap_median_difference({}, {{1.0}}, 100, 0.95, 0), Error);
  EXPECT_THROW(bootstrap_median_difference({{}}, {{1.0}}, 100, 0.95, 0), Error);  // only empty groups
  EXPECT_THROW(bootstrap_median_difference({{1.0}}, {{1.0}}, 0, 0.95, 0), Error);
  EXPECT_THROW(bootstrap_median({1.0}, 100, 1.0, 0), Error);
  EXPECT_THROW(bootstrap_median({}, 100, 0.95, 0), Error);
}

TEST(Stats, CoefficientOfVariation) {
  // numpy: np.std([10, 12, 14], ddof=1) / np.mean([10, 12, 14]) = 2 / 12
  EXPECT_NEAR(coefficient_of_variation({10, 12, 14}), 2.0 / 12.0, 1e-12);
  EXPECT_NEAR(coefficient_of_variation({-10, -12, -14}), 2.0 / 12.0, 1e-12);  // relative to |mean|
  EXPECT_EQ(coefficient_of_variation({5, 5, 5}), 0.0);
  EXPECT_EQ(coefficient_of_variation({7}), 0.0);  // one run: no spread to measure
  EXPECT_EQ(coefficient_of_variation({}), 0.0);
  EXPECT_EQ(coefficient_of_variation({-1, 1}), 0.0);  // zero mean: undefined, reported as 0
}

TEST(Stats, BootstrapMedianIsSeededAndDegenerateForEqualValues) {
  const std::vector<double> runs = {101.0, 97.5, 103.2, 99.9, 100.4};
  Interval a = bootstrap_median(runs, 1000, 0.95, 42), b = bootstrap_median(runs, 1000, 0.95, 42);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
  EXPECT_TRUE(a.contains(median(runs)));
  Interval same = bootstrap_median({3.0, 3.0, 3.0}, 200, 0.95, 1);
  EXPECT_EQ(same.low, 3.0);
  EXPECT_EQ(same.high, 3.0);
}

// Any statistic of a resample: here the mean of 0..99 against the same shifted by 10.
TEST(Stats, BootstrapDifferenceOfAnyStatistic) {
  std::vector<double> a, b;
  for (int i = 0; i < 100; ++i) a.push_back(i), b.push_back(i + 10);
  auto mean_of = [](const std::vector<double>& v) {
    return [&v](const std::vector<std::size_t>& idx) {
      double sum = 0;
      for (std::size_t i : idx) sum += v[i];
      return sum / static_cast<double>(idx.size());
    };
  };
  const Interval ci = bootstrap_difference(a.size(), mean_of(a), b.size(), mean_of(b), 1000, 0.95, 7);
  EXPECT_TRUE(ci.contains(10));
  EXPECT_GT(ci.low, 0);
  const Interval again = bootstrap_difference(a.size(), mean_of(a), b.size(), mean_of(b), 1000, 0.95, 7);
  EXPECT_EQ(ci.low, again.low);
  EXPECT_EQ(ci.high, again.high);
  EXPECT_THROW(bootstrap_difference(0, mean_of(a), b.size(), mean_of(b), 1000, 0.95, 7), Error);
}
