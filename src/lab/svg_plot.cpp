#include "lab/svg_plot.h"

#include <fmt/format.h>

namespace inferlab::lab::svg {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

std::string open(double width, double height) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
}

std::string title(double width, const std::string& text) {
  return fmt::format("<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n", width / 2,
                     escape(text));
}

std::string axes(const Frame& f, int ticks, int x_digits, int y_digits, const std::string& x_label,
                 const std::string& y_label) {
  std::string svg = fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", f.left,
                                f.bottom, f.right);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", f.left, f.bottom, f.top);
  for (int i = 0; i <= ticks; ++i) {
    const double xv = f.x_min + (f.x_max - f.x_min) * i / ticks, yv = f.y_min + (f.y_max - f.y_min) * i / ticks;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.{}f}</text>\n", f.px(xv),
                       f.bottom + 16, xv, x_digits);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:.{}f}</text>\n", f.left - 6,
                       f.py(yv) + 4, yv, y_digits);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n", f.left,
                       f.py(yv), f.right);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (f.left + f.right) / 2,
                     f.bottom + 40, escape(x_label));
  svg += fmt::format(
      "<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" transform=\"rotate(-90 {0} {1})\">{2}</text>\n",
      f.left - 54, (f.top + f.bottom) / 2, escape(y_label));
  return svg;
}

}  // namespace inferlab::lab::svg
