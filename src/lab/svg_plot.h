// The few pieces of an SVG chart the bench's plots share (latency vs input length, the capacity
// curve): escaping, the document head, a plot frame mapping data to pixels, its axes and ticks.
#pragma once
#include <string>

namespace inferlab::lab::svg {

std::string escape(const std::string& text);

// "<svg ...>" with a white background; close with "</svg>\n".
std::string open(double width, double height);
// The chart's title, centred at the top.
std::string title(double width, const std::string& text);

// A plot area [left, right] x [top, bottom] in pixels showing [x_min, x_max] x [y_min, y_max].
struct Frame {
  double left = 0, right = 0, top = 0, bottom = 0;
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  double px(double x) const { return left + (x - x_min) / (x_max - x_min) * (right - left); }
  double py(double y) const { return bottom - (y - y_min) / (y_max - y_min) * (bottom - top); }
};

// The two axis lines, `ticks` + 1 labelled ticks on each with horizontal grid lines, and the axis
// labels. x_digits / y_digits: decimals of the tick labels.
std::string axes(const Frame& frame, int ticks, int x_digits, int y_digits, const std::string& x_label,
                 const std::string& y_label);

}  // namespace inferlab::lab::svg
