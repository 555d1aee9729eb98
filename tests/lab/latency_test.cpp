// The latency experiment's fit, verdict and course table.
#include <gtest/gtest.h>

#include "inferlab/lab/latency_sweep.h"
#include "inferlab/util/error.h"

using namespace inferlab::lab;

TEST(Latency, LinearFitIsLeastSquares) {
  LinearFit fit = fit_line({8, 16, 32, 64}, {0.5 + 8e-3, 0.5 + 16e-3, 0.5 + 32e-3, 0.5 + 64e-3});
  EXPECT_NEAR(fit.slope, 1e-3, 1e-12);
  EXPECT_NEAR(fit.intercept, 0.5, 1e-12);
  // numpy.polyfit([1,2,3,4], [1,3,2,5], 1) = [1.1, 0]
  fit = fit_line({1, 2, 3, 4}, {1, 3, 2, 5});
  EXPECT_NEAR(fit.slope, 1.1, 1e-12);
  EXPECT_NEAR(fit.intercept, 0.0, 1e-12);
  EXPECT_THROW(fit_line({3, 3}, {1, 2}), inferlab::Error);
}

TEST(Latency, MonotonicAllowsSmallWobbleOnly) {
  std::string why;
  EXPECT_TRUE(increases_monotonically({1.0, 1.2, 1.17, 1.5}, kLatencyWobble, &why));  // -2.5 %: wobble
  EXPECT_FALSE(increases_monotonically({1.0, 1.2, 1.1, 1.5}, kLatencyWobble, &why));  // -8 %
  EXPECT_NE(why.find("point 3"), std::string::npos);
  EXPECT_FALSE(increases_monotonically({1.0, 0.99, 0.98, 1.0}, kLatencyWobble, &why));  // flat: last not above first
}

TEST(Latency, CourseTablePadsByCharactersLikePython) {
  LatencySweep sweep;
  sweep.points = {{8, 0.12345, 0, 0, {}}, {256, 1.5, 0, 0, {}}};
  sweep.fit = {0.0012345, 0.1};
  // print(f"{'输入长度':<10}{'推理延迟(秒)':<15}"); print(f"{length:<10}{latency:.4f}"); slope with :.6f
  EXPECT_EQ(course_table(sweep),
            "输入长度      推理延迟(秒)        \n"
            "8         0.1235\n"
            "256       1.5000\n"
            "\n线性拟合斜率（秒/输入 token）: 0.001234\n");
  std::string svg = latency_svg(sweep, "a <b>");
  EXPECT_NE(svg.find("a &lt;b&gt;"), std::string::npos);
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
}
