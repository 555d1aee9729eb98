// The course's chapter-3 latency experiment as data: the points of a sweep (latency against input
// length), its linear fit, the course's verdicts and its table, CSV and plot. Measuring a sweep
// needs the model and lives in inferlab/bench/latency.h; reading and drawing one does not.
#pragma once
#include <string>
#include <vector>

namespace inferlab::lab {

struct LatencyPoint {
  int input_len = 0;
  double latency_s = 0;           // median over repeats of the whole generation
  double prefill_s = 0;           // median time to the first generated token (prompt forward)
  double decode_s_per_token = 0;  // median of (last token - first token) / (gen_len - 1)
  std::vector<double> samples_s;  // every repeat's latency
};

struct LinearFit {
  double slope = 0, intercept = 0;  // least squares, as numpy.polyfit(x, y, 1)
};
LinearFit fit_line(const std::vector<double>& x, const std::vector<double>& y);

struct LatencySweep {
  std::vector<LatencyPoint> points;
  LinearFit fit;             // latency_s against input_len
  LinearFit prefill_fit;     // prefill_s against input_len
};

// "Monotonic increase, small wobble allowed": no point below the one before by more than
// `wobble` (relative), and the last above the first. detail says where it broke.
bool increases_monotonically(const std::vector<double>& values, double wobble, std::string* detail);
constexpr double kLatencyWobble = 0.05;

// The course's table (输入长度 / 推理延迟(秒), Python's padding by characters) and slope line.
std::string course_table(const LatencySweep& sweep);
std::string latency_csv(const std::vector<LatencySweep>& runs);
// A scatter plot of latency against input length with the fitted line, as standalone SVG.
std::string latency_svg(const LatencySweep& sweep, const std::string& title);

}  // namespace inferlab::lab
