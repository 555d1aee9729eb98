#include "inferlab/lab/latency_sweep.h"

#include <algorithm>
#include <fmt/format.h>

#include "inferlab/util/error.h"
#include "lab/svg_plot.h"

namespace inferlab::lab {
namespace {

// Python's f"{s:<width}" pads by code points, not bytes or display columns.
std::string pad_right(const std::string& s, std::size_t width) {
  std::size_t code_points = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++code_points;
  return code_points >= width ? s : s + std::string(width - code_points, ' ');
}

}  // namespace

LinearFit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) fail("a linear fit needs at least two points");
  double n = static_cast<double>(x.size()), mx = 0, my = 0;
  for (std::size_t i = 0; i < x.size(); ++i) mx += x[i] / n, my += y[i] / n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
  if (sxx == 0) fail("a linear fit needs at least two different input lengths");
  LinearFit fit;
  fit.slope = sxy / sxx;
  fit.intercept = my - fit.slope * mx;
  return fit;
}

bool increases_monotonically(const std::vector<double>& values, double wobble, std::string* detail) {
  for (std::size_t i = 1; i < values.size(); ++i)
    if (values[i] < values[i - 1] * (1 - wobble)) {
      if (detail) *detail = fmt::format("point {} ({:.4f}) is more than {:.0f}% below point {} ({:.4f})", i + 1,
                                        values[i], wobble * 100, i, values[i - 1]);
      return false;
    }
  if (values.size() >= 2 && !(values.back() > values.front())) {
    if (detail) *detail = "the last point is not above the first";
    return false;
  }
  return true;
}

std::string course_table(const LatencySweep& sweep) {
  std::string out = pad_right("输入长度", 10) + pad_right("推理延迟(秒)", 15) + "\n";
  for (const auto& p : sweep.points) out += pad_right(std::to_string(p.input_len), 10) + fmt::format("{:.4f}\n", p.latency_s);
  out += fmt::format("\n线性拟合斜率（秒/输入 token）: {:.6f}\n", sweep.fit.slope);
  return out;
}

std::string latency_csv(const std::vector<LatencySweep>& runs) {
  std::string out = "run,input_len,latency_s,prefill_s,decode_s_per_token,samples_s\n";
  for (std::size_t r = 0; r < runs.size(); ++r)
    for (const auto& p : runs[r].points) {
      std::string samples;
      for (double s : p.samples_s) samples += fmt::format("{}{:.6f}", samples.empty() ? "" : ";", s);
      out += fmt::format("{},{},{:.6f},{:.6f},{:.6f},{}\n", r + 1, p.input_len, p.latency_s, p.prefill_s,
                         p.decode_s_per_token, samples);
    }
  return out;
}

std::string latency_svg(const LatencySweep& sweep, const std::string& title) {
  const double width = 640, height = 420;
  double max_x = 0, max_y = 0;
  for (const auto& p : sweep.points) {
    max_x = std::max(max_x, static_cast<double>(p.input_len));
    for (double s : p.samples_s) max_y = std::max(max_y, s);
  }
  max_x *= 1.05;
  max_y = std::max(max_y, sweep.fit.intercept + sweep.fit.slope * max_x) * 1.1;
  const svg::Frame frame{.left = 70, .right = width - 20, .top = 40, .bottom = height - 55, .x_max = max_x, .y_max = max_y};
  auto px = [&](double x) { return frame.px(x); };
  auto py = [&](double y) { return frame.py(y); };
  std::string out = svg::open(width, height) + svg::title(width, title);
  out += svg::axes(frame, 5, 0, 3, "input length (tokens)", "latency (s)");
  out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#d62728\" stroke-width=\"2\"/>\n",
                     px(0), py(sweep.fit.intercept), px(max_x), py(sweep.fit.intercept + sweep.fit.slope * max_x));
  for (const auto& p : sweep.points) {
    for (double s : p.samples_s)
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\" fill=\"#9ecae1\"/>\n", px(p.input_len), py(s));
    out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4.5\" fill=\"#1f77b4\"><title>{} tokens: {:.4f} s</title></circle>\n",
                       px(p.input_len), py(p.latency_s), p.input_len, p.latency_s);
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#d62728\">fit: {:.3e} s/token + {:.4f} s</text>\n", frame.left + 10,
                     frame.top + 14, sweep.fit.slope, sweep.fit.intercept);
  out += "</svg>\n";
  return out;
}

}  // namespace inferlab::lab
