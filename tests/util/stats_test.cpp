// The shared statistics, against the figures the course and numpy give.
#include <gtest/gtest.h>

#include <cmath>

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
