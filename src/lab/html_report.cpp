// The report as one HTML page (see html_report.h): tables of the text report's numbers and inline
// SVG charts. Inline SVG written here rather than a JS plotting library: the page then needs no
// script at all, renders the same in any browser or image viewer, and its numbers sit in the
// static DOM for tests to read back.
#include "inferlab/lab/html_report.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "inferlab/lab/sweep.h"
#include "lab/svg_plot.h"

namespace inferlab::lab {
namespace {

using nlohmann::json;

constexpr const char* kStyle = R"(body{font-family:system-ui,sans-serif;margin:24px auto;max-width:980px;color:#222}
h1{font-size:22px;margin-bottom:2px} .sub{color:#666;margin-top:0} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums} td,th{padding:3px 10px;border-bottom:1px solid #eee}
th{text-align:left;background:#f6f6f6} td.num{text-align:right} .note{color:#555;font-size:13px;max-width:900px}
.legend span{display:inline-block;margin-right:14px;font-size:13px} .legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
svg{max-width:100%;height:auto})";

const char* kQueue = "#9467bd";
const char* kPrefill = "#ff7f0e";
const char* kTransport = "#bbbbbb";
const char* kDecode = "#1f77b4";
const char* kFailed = "#d62728";

std::string esc(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string element_id(std::string key) {
  std::replace(key.begin(), key.end(), '.', '-');
  return key;
}

// A table cell holding one number of the JSON: the value as the JSON writes it (data-value) and
// shown with the text report's decimals.
std::string number_cell(const std::string& key, const json& value, int decimals) {
  const std::string shown = value.is_number_float() ? fmt::format("{:.{}f}", value.get<double>(), decimals)
                            : value.is_null()        ? "—"  // none, e.g. no knee, or an objective at +inf
                                                     : value.dump();
  return fmt::format("<td class=\"num\" id=\"{}\" data-key=\"{}\" data-value=\"{}\">{}</td>", esc(element_id(key)), esc(key),
                     esc(value.dump()), shown);
}

// The smallest round span (5 ticks of 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten)
// holding `span`, so the axes' ticks fall on round numbers without much room wasted.
double nice_span(double span) {
  const double raw = span / 5, magnitude = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
    if (m * magnitude >= raw * (1 - 1e-9)) return 5 * m * magnitude;
  return span;
}

// Decimals a tick label needs for a span split in 5 (2.5 -> 1, 0.25 -> 2, 20 -> 0).
int tick_digits(double span) {
  const double step = span / 5;
  int digits = 0;
  while (digits < 6 && std::abs(step * std::pow(10, digits) - std::round(step * std::pow(10, digits))) > 1e-6) ++digits;
  return digits;
}

struct Chart {
  double width = 760, height = 300;
  svg::Frame frame;
  std::string marks;
  // Round spans on both axes unless `exact_y` (the timeline's rows).
  Chart(double x_min, double x_max, double y_min, double y_max, double h = 300, bool exact_y = false) : height(h) {
    if (!(x_max > x_min)) x_max = x_min + 1;
    if (!(y_max > y_min)) y_max = y_min + 1;
    x_max = x_min + nice_span(x_max - x_min);
    if (!exact_y) y_max = y_min + nice_span(y_max - y_min);
    frame = svg::Frame{.left = 78, .right = width - 20, .top = 14, .bottom = height - 48,
                       .x_min = x_min, .x_max = x_max, .y_min = y_min, .y_max = y_max};
  }
  std::string render(const std::string& label, const std::string& x_label, const std::string& y_label) const {
    std::string out = svg::open(width, height);
    out.insert(4, fmt::format(" role=\"img\" aria-label=\"{}\"", esc(label)));
    out += svg::axes(frame, 5, tick_digits(frame.x_max - frame.x_min), tick_digits(frame.y_max - frame.y_min), x_label,
                     y_label);
    return out + marks + "</svg>\n";
  }
};

std::string legend(const std::vector<std::pair<const char*, std::string>>& items) {
  std::string out = "<div class=\"legend\">";
  for (const auto& [color, name] : items) out += fmt::format("<span><i style=\"background:{}\"></i>{}</span>", color, esc(name));
  return out + "</div>\n";
}

std::vector<const RequestRecord*> successful(const std::vector<RequestRecord>& records) {
  std::vector<const RequestRecord*> ok;
  for (const auto& r : records)
    if (r.status == "ok") ok.push_back(&r);
  return ok;
}

// One CDF chart: the step function of the sorted values, the median and P95 marked.
std::string cdf_chart(std::vector<double> values, const std::string& name, const char* color) {
  if (values.empty()) return fmt::format("<p class=\"note\">No {} values (no successful request has one).</p>\n", esc(name));
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  Chart chart(0, values.back(), 0, 1);
  const svg::Frame& f = chart.frame;
  // At most ~1500 steps drawn: the shape is the same, the file stays small.
  const std::size_t stride = std::max<std::size_t>(1, n / 1500);
  std::string path = fmt::format("M{:.1f},{:.1f}", f.px(0), f.py(0));
  for (std::size_t i = 0; i < n; i += stride) {
    const std::size_t last = std::min(n, i + stride) - 1;
    path += fmt::format(" H{:.1f} V{:.1f}", f.px(values[i]), f.py(static_cast<double>(last + 1) / n));
  }
  chart.marks += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", path, color);
  for (double q : {0.5, 0.95}) {
    const double v = values[static_cast<std::size_t>(std::ceil(q * n)) - 1];  // nearest rank, as the report's default
    const bool near_right = f.px(v) > f.right - 100;  // label on the left of the point there
    chart.marks += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>P{:.0f} (nearest rank): {:.2f} ms</title></circle>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"{}\">P{:.0f} {:.2f} ms</text>\n",
        f.px(v), f.py(q), color, q * 100, v, f.px(v) + (near_right ? -7 : 7), f.py(q) + 12,
        near_right ? "end" : "start", q * 100, v);
  }
  return chart.render(name + " CDF", name + " (ms)", "fraction of requests ≤ x");
}

}  // namespace

std::string html_page(const std::string& title, const std::string& subtitle, const std::vector<HtmlSection>& sections) {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{0}</title>\n"
      "<meta name=\"generator\" content=\"inferlab\">\n<style>\n{1}\n</style>\n</head>\n<body>\n<h1>{0}</h1>\n"
      "<p class=\"sub\">{2}</p>\n",
      esc(title), kStyle, esc(subtitle));
  out += "<nav class=\"note\">";
  for (std::size_t i = 0; i < sections.size(); ++i)
    out += fmt::format("{}<a href=\"#{}\">{}</a>", i ? " · " : "", sections[i].id, esc(sections[i].title));
  out += "</nav>\n";
  for (const auto& s : sections)
    out += fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n{}</section>\n", s.id, esc(s.title), s.html);
  return out + "</body>\n</html>\n";
}

HtmlSection summary_section(const Summary& s) {
  const json j = summary_json(s);
  std::string html = "<table id=\"summary-run\">\n<tr><th>figure</th><th>value</th><th></th></tr>\n";
  auto value_row = [&](const std::string& name, const std::string& key, const json& value, int decimals,
                       const std::string& unit) {
    html += fmt::format("<tr><td>{}</td>{}<td>{}</td></tr>\n", esc(name), number_cell(key, value, decimals), esc(unit));
  };
  auto row = [&](const std::string& name, const std::string& key, int decimals, const std::string& unit) {
    const auto dot = key.find('.');
    value_row(name, key, dot == std::string::npos ? j.at(key) : j.at(key.substr(0, dot)).at(key.substr(dot + 1)),
              decimals, unit);
  };
  row("Requests", "requests", 0, "");
  row("Successful", "successful", 0, "");
  row("Failed", "failed", 0, "");
  for (const auto& [status, count] : s.failures) value_row("  " + status, "failures." + status, count, 0, "requests");
  row("Window", "window_s", 3, "s");
  row("Successful output throughput", "output_throughput_token_per_s", 2, "token/s");
  row("Request throughput", "request_throughput_req_per_s", 2, "req/s");
  row("Input tokens", "input_tokens", 0, "successful requests");
  row("Output tokens", "output_tokens", 0, "successful requests");
  if (j.contains("prefix_cache")) {
    row("Prefix cache: cached prompt tokens", "prefix_cache.cached_tokens", 0, "");
    row("Prefix cache: prompt tokens", "prefix_cache.prompt_tokens", 0, "of requests that reported cached_tokens");
  }
  if (j.contains("goodput")) {
    row("Goodput", "goodput.req_per_s", 2, "req/s");
    row("Requests meeting the SLO", "goodput.met", 0, "");
  }
  html += "</table>\n";

  html += "<table id=\"summary-metrics\">\n<tr><th>metric (ms)</th>";
  for (const char* c : {"n", "mean", "median", "p90", "p95", "p99", "min", "max"}) html += fmt::format("<th>{}</th>", c);
  html += "</tr>\n";
  auto metric = [&](const std::string& name, const json& d, const std::string& key) {
    html += fmt::format("<tr><td>{}</td>{}", esc(name), number_cell(key + ".n", d.at("n"), 0));
    if (d.at("n").get<std::size_t>() == 0) {
      html += "<td colspan=\"7\" class=\"note\">no values</td></tr>\n";
      return;
    }
    for (const char* stat : {"mean", "p50", "p90", "p95", "p99", "min", "max"})
      html += number_cell(key + "." + stat, d.at(stat), 2);
    html += "</tr>\n";
  };
  metric("TTFT", j.at("ttft_ms"), "ttft_ms");
  metric("TPOT", j.at("tpot_ms"), "tpot_ms");
  metric("ITL", j.at("itl_ms"), "itl_ms");
  metric("E2E", j.at("e2e_ms"), "e2e_ms");
  if (j.contains("ttft_split_ms")) {
    metric("  queue (server)", j["ttft_split_ms"]["server_queue"], "ttft_split_ms.server_queue");
    metric("  prefill (server)", j["ttft_split_ms"]["server_prefill"], "ttft_split_ms.server_prefill");
    metric("  transport", j["ttft_split_ms"]["transport"], "ttft_split_ms.transport");
  }
  html += "</table>\n";
  html += fmt::format("<p class=\"note\" id=\"percentile-method\" data-key=\"percentiles\" data-value=\"{}\">"
                      "Percentiles: {}; median = P50.{}{}</p>\n",
                      j.at("percentiles").get<std::string>(), esc(j.at("percentile_method").get<std::string>()),
                      s.tpot_derived ? " TPOT = (E2E − TTFT) / (output_tokens − 1) where no tpot_ms is given." : "",
                      s.has_ttft_split() ? " TTFT split from the server's timings: queue (arrival to scheduled), prefill "
                                           "(to its first token), transport = client TTFT − server TTFT."
                                         : "");
  return {"summary", "Summary (the numbers of inferlab report)", html};
}

// Multi-turn runs: per turn index, its requests, TTFT and prefix-cache hit rate (the turns block of
// report --json), so a page shows whether later turns reuse the earlier ones' KV cache.
HtmlSection turns_section(const Summary& s) {
  const json j = summary_json(s).at("multi_turn");
  std::string html = fmt::format("<p id=\"conversations\">{} conversations; turn k of each conversation was sent after "
                                 "its turn k−1 answered, with the whole history.</p>\n",
                                 j.at("conversations").get<std::size_t>());
  html += "<table id=\"turns\">\n<tr><th>turn</th><th>requests</th><th>successful</th><th>TTFT p50 (ms)</th>"
          "<th>TTFT p95 (ms)</th><th>mean prompt tokens</th><th>cached tokens</th><th>hit rate</th></tr>\n";
  const json& turns = j.at("turns");
  for (std::size_t i = 0; i < turns.size(); ++i) {
    const json& t = turns[i];
    const std::string key = fmt::format("multi_turn.turns.{}", i);
    html += "<tr>" + number_cell(key + ".turn", t.at("turn"), 0) + number_cell(key + ".requests", t.at("requests"), 0) +
            number_cell(key + ".successful", t.at("successful"), 0);
    if (t.at("ttft_ms").at("n").get<std::size_t>() > 0)
      html += number_cell(key + ".ttft_ms.p50", t.at("ttft_ms").at("p50"), 2) + number_cell(key + ".ttft_ms.p95", t.at("ttft_ms").at("p95"), 2);
    else
      html += "<td class=\"note\">—</td><td class=\"note\">—</td>";
    html += number_cell(key + ".mean_input_tokens", t.at("mean_input_tokens"), 1);
    if (t.contains("prefix_cache"))
      html += number_cell(key + ".prefix_cache.cached_tokens", t.at("prefix_cache").at("cached_tokens"), 0) +
              number_cell(key + ".prefix_cache.hit_rate", t.at("prefix_cache").at("hit_rate"), 3);
    else
      html += "<td class=\"note\" colspan=\"2\">not reported</td>";
    html += "</tr>\n";
  }
  html += "</table>\n<p class=\"note\">Hit rate: cached prompt tokens over prompt tokens, of the requests whose answer "
          "reported usage.prompt_tokens_details.cached_tokens.</p>\n";
  return {"turns", "Multi-turn conversations, by turn", html};
}

HtmlSection latency_cdf_section(const std::vector<RequestRecord>& records) {
  std::vector<double> ttft, e2e;
  for (const RequestRecord* r : successful(records)) {
    if (r->ttft_ms) ttft.push_back(*r->ttft_ms);
    e2e.push_back(r->end_ms - r->start_ms);
  }
  std::string html = "<h3>TTFT</h3>\n" + cdf_chart(ttft, "TTFT", kPrefill) + "<h3>E2E latency</h3>\n" +
                     cdf_chart(e2e, "E2E", kDecode) +
                     "<p class=\"note\">Empirical CDFs over successful requests: the height at x is the fraction of "
                     "requests that took at most x.</p>\n";
  return {"cdf", "TTFT and E2E distributions", html};
}

HtmlSection itl_histogram_section(const std::vector<RequestRecord>& records) {
  std::vector<double> gaps;
  for (const RequestRecord* r : successful(records)) gaps.insert(gaps.end(), r->itl_ms.begin(), r->itl_ms.end());
  if (gaps.empty()) return {"itl", "Inter-token latency", "<p class=\"note\">No inter-token gaps recorded (no itl_ms values).</p>\n"};
  std::sort(gaps.begin(), gaps.end());
  // Bins up to the P99 so one stall does not squeeze the rest into one bar; the tail is counted apart.
  const double hi = std::max(gaps[static_cast<std::size_t>(std::ceil(0.99 * gaps.size())) - 1], gaps.front() + 1e-9);
  const int bins = 40;
  const double width = hi / bins;
  std::vector<std::size_t> counts(bins, 0);
  std::size_t above = 0;
  for (double g : gaps) {
    if (g > hi) {
      ++above;
      continue;
    }
    counts[std::min(bins - 1, static_cast<int>(g / width))]++;
  }
  const std::size_t top = *std::max_element(counts.begin(), counts.end());
  Chart chart(0, hi, 0, static_cast<double>(top) * 1.1);
  const svg::Frame& f = chart.frame;
  for (int b = 0; b < bins; ++b) {
    if (!counts[b]) continue;
    chart.marks += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{:.2f}–{:.2f} ms: {} gaps</title></rect>\n",
        f.px(b * width) + 0.5, f.py(static_cast<double>(counts[b])), std::max(1.0, f.px(width) - f.px(0) - 1),
        f.py(0) - f.py(static_cast<double>(counts[b])), kDecode, b * width, (b + 1) * width, counts[b]);
  }
  std::string html = chart.render("ITL histogram", "gap between consecutive content chunks (ms)", "gaps");
  html += fmt::format("<p class=\"note\">{} gaps pooled over successful requests, {} bins of {:.3f} ms up to the P99 "
                      "({:.2f} ms); {} larger gaps (max {:.2f} ms) not drawn.</p>\n",
                      gaps.size(), bins, width, hi, above, gaps.back());
  return {"itl", "Inter-token latency", html};
}

namespace {

// The client's output tokens/s in about 60 bins of a round number of ms from the first request's
// start: the throughput chart's curve, and the series chart's time axis.
struct TokenBins {
  double t0 = 0, bin_ms = 1;
  std::vector<double> per_s;
  double x_max_s() const { return static_cast<double>(per_s.size()) * bin_ms / 1000; }
};

TokenBins client_token_bins(const std::vector<RequestRecord>& records) {
  TokenBins b;
  double t0 = records.front().start_ms, t1 = records.front().end_ms;
  for (const auto& r : records) t0 = std::min(t0, r.start_ms), t1 = std::max(t1, r.end_ms);
  const double span = std::max(t1 - t0, 1e-3);
  double bin = span / 60;
  const double magnitude = std::pow(10, std::floor(std::log10(bin)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= bin) {
      bin = m * magnitude;
      break;
    }
  const int bins = std::max(1, static_cast<int>(std::ceil(span / bin)));
  std::vector<double> tokens(bins, 0);
  auto add = [&](double at_ms, double amount) {
    tokens[std::clamp(static_cast<int>((at_ms - t0) / bin), 0, bins - 1)] += amount;
  };
  for (const RequestRecord* r : successful(records)) {
    const double out = static_cast<double>(r->output_tokens.value_or(0));
    if (out <= 0) continue;
    if (r->ttft_ms && !r->itl_ms.empty()) {
      // The chunks' arrival times; the tokens shared evenly among them.
      const double per_chunk = out / static_cast<double>(r->itl_ms.size() + 1);
      double at = r->start_ms + *r->ttft_ms;
      add(at, per_chunk);
      for (double gap : r->itl_ms) add(at += gap, per_chunk);
    } else {
      // No chunk times: spread evenly from the first token (or the start) to the end.
      const double from = r->start_ms + r->ttft_ms.value_or(0);
      const int pieces = std::max(1, static_cast<int>(std::min(out, 200.0)));
      for (int k = 0; k < pieces; ++k) add(from + (r->end_ms - from) * (k + 0.5) / pieces, out / pieces);
    }
  }
  for (double& t : tokens) t /= bin / 1000;
  b.t0 = t0;
  b.bin_ms = bin;
  b.per_s = std::move(tokens);
  return b;
}

// The client's tokens/s as a step path on a chart.
std::string token_bins_path(const TokenBins& b, const svg::Frame& f) {
  std::string path = fmt::format("M{:.1f},{:.1f}", f.px(0), f.py(b.per_s[0]));
  const std::size_t bins = b.per_s.size();
  for (std::size_t i = 0; i < bins; ++i)
    path += fmt::format(" H{:.1f}{}", f.px((i + 1) * b.bin_ms / 1000),
                        i + 1 < bins ? fmt::format(" V{:.1f}", f.py(b.per_s[i + 1])) : std::string());
  return path;
}

}  // namespace

HtmlSection throughput_section(const std::vector<RequestRecord>& records) {
  const TokenBins b = client_token_bins(records);
  const double top = *std::max_element(b.per_s.begin(), b.per_s.end());
  Chart chart(0, b.x_max_s(), 0, top * 1.1);
  chart.marks += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", token_bins_path(b, chart.frame),
                             kDecode);
  std::string html = chart.render("output tokens per second over time", "time since the run's start (s)", "output token/s");
  html += fmt::format("<p class=\"note\">Successful requests' output tokens per {} ms bin, at the arrival time of the "
                      "content chunk that carried them (a request's tokens shared evenly among its chunks; without "
                      "chunk times, spread from its first token to its end).</p>\n",
                      b.bin_ms);
  return {"throughput", "Output tokens/s over time", html};
}

HtmlSection timeline_section(const std::vector<RequestRecord>& records) {
  std::vector<const RequestRecord*> rows;
  for (const auto& r : records) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->start_ms < b->start_ms; });
  constexpr std::size_t kMaxRows = 400;  // beyond, bars are thinner than a pixel
  const std::size_t shown = std::min(rows.size(), kMaxRows);
  double t0 = rows.front()->start_ms, t1 = 0;
  for (std::size_t i = 0; i < shown; ++i) t1 = std::max(t1, rows[i]->end_ms);
  const double row_h = std::clamp(360.0 / static_cast<double>(shown), 1.0, 12.0);
  Chart chart(0, (t1 - t0) / 1000, 0, static_cast<double>(shown), row_h * shown + 62, true);
  const svg::Frame& f = chart.frame;
  bool any_server = false;
  for (std::size_t i = 0; i < shown; ++i) {
    const RequestRecord& r = *rows[i];
    const double y = f.py(static_cast<double>(shown - i)), h = std::max(0.8, row_h * 0.8);
    auto bar = [&](double from_ms, double to_ms, const char* color, const char* stage) {
      if (!(to_ms > from_ms)) return;
      chart.marks += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>{} {}: {:.2f} ms</title></rect>\n",
          f.px((from_ms - t0) / 1000), y, std::max(0.5, f.px((to_ms - t0) / 1000) - f.px((from_ms - t0) / 1000)), h, color,
          esc(r.request_id), stage, to_ms - from_ms);
    };
    if (r.status != "ok") {
      bar(r.start_ms, r.end_ms, kFailed, r.status.c_str());
      continue;
    }
    double at = r.start_ms;
    if (r.server.queue_ms && r.server.prefill_ms) {
      any_server = true;
      bar(at, at + *r.server.queue_ms, kQueue, "queue");
      at += *r.server.queue_ms;
      bar(at, at + *r.server.prefill_ms, kPrefill, "prefill");
      at += *r.server.prefill_ms;
      if (r.ttft_ms) {
        bar(at, r.start_ms + *r.ttft_ms, kTransport, "transport");
        at = std::max(at, r.start_ms + *r.ttft_ms);
      }
    } else if (r.ttft_ms) {
      bar(at, at + *r.ttft_ms, kPrefill, "to first token");
      at += *r.ttft_ms;
    }
    bar(at, r.end_ms, kDecode, "decode");
  }
  std::string html = any_server ? legend({{kQueue, "queue (server)"},
                                          {kPrefill, "prefill (server)"},
                                          {kTransport, "transport (client TTFT − server TTFT)"},
                                          {kDecode, "decode, to the last byte"},
                                          {kFailed, "failed"}})
                                : legend({{kPrefill, "waiting for the first token (TTFT)"},
                                          {kDecode, "decode, to the last byte"},
                                          {kFailed, "failed"}});
  html += chart.render("per-request timeline", "time since the run's start (s)", "requests, by start");
  html += fmt::format("<p class=\"note\">{} of {} requests, one bar each in order of start{}. {}</p>\n", shown,
                      rows.size(), shown < rows.size() ? " (the first ones; the rest not drawn)" : "",
                      any_server ? "The server's stages are drawn from the client's start; transport (the request's "
                                   "way in and the first chunk's way out) is drawn after prefill."
                                 : "The CSV has no server timings (server_queue_ms, server_prefill_ms): each bar is "
                                   "split at the client's TTFT only.");
  return {"timeline", "Per-request timeline", html};
}

namespace {

// A curve of the series on a chart sharing the client's time axis: points outside it are left out.
std::string series_path(const std::vector<SeriesPoint>& points, const svg::Frame& f, double t0_ms, double scale, bool step) {
  std::string path;
  for (const auto& p : points) {
    const double x = (p.time_ms - t0_ms) / 1000;
    if (x < f.x_min || x > f.x_max || !std::isfinite(p.value)) continue;
    const double y = f.py(p.value * scale);
    if (path.empty()) path = fmt::format("M{:.1f},{:.1f}", f.px(x), y);
    else if (step) path += fmt::format(" H{:.1f} V{:.1f}", f.px(x), y);
    else path += fmt::format(" L{:.1f},{:.1f}", f.px(x), y);
  }
  return path;
}

double top_of(const std::vector<SeriesPoint>& points, double scale) {
  double top = 0;
  for (const auto& p : points)
    if (std::isfinite(p.value)) top = std::max(top, p.value * scale);
  return top;
}

}  // namespace

HtmlSection series_section(const std::vector<RequestRecord>& records, const std::vector<SeriesSample>& series) {
  const json j = series_json(series);
  const TokenBins b = client_token_bins(records);
  const std::string x_label = "time since the run's start (s)";
  std::string html;
  auto cell = [](const std::string& key, const json& value, int decimals) {
    return number_cell("server_series." + key, value, decimals);
  };
  html += "<table id=\"series-scrape\">\n<tr><th>scrape</th><th>value</th></tr>\n";
  html += fmt::format("<tr><td>/metrics</td><td>{}</td></tr>\n",
                      j["metrics_url"].is_string() ? esc(j["metrics_url"].get<std::string>()) : "not scraped");
  html += fmt::format("<tr><td>interval (s)</td>{}</tr>\n", cell("interval_s", j["interval_s"], 3));
  html += fmt::format("<tr><td>scrapes</td>{}</tr>\n<tr><td>failed scrapes</td>{}</tr>\n</table>\n",
                      cell("scrapes", j["scrapes"], 0), cell("failed_scrapes", j["failed_scrapes"], 0));

  // 1. Output tokens/s: the client's bins and the server's generation counter as a rate.
  const std::vector<SeriesPoint> generation = counter_role_rate(series, "generation_tokens");
  {
    const double top = std::max(*std::max_element(b.per_s.begin(), b.per_s.end()), top_of(generation, 1));
    Chart chart(0, b.x_max_s(), 0, top * 1.1);
    chart.marks += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", token_bins_path(b, chart.frame),
                               kDecode);
    const std::string path = series_path(generation, chart.frame, b.t0, 1, false);
    if (!path.empty())
      chart.marks += fmt::format("<path class=\"series-generation\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", path,
                                 kPrefill);
    html += "<h3>Output tokens/s</h3>\n" +
            legend({{kDecode, "client: successful requests' output tokens (requests.csv)"},
                    {kPrefill, "server: rate of " + (j["roles"].contains("generation_tokens")
                                                        ? j["roles"]["generation_tokens"]["metric"].get<std::string>()
                                                        : std::string("its generated-token counter (none scraped)"))}}) +
            chart.render("output tokens per second, client and server", x_label, "token/s");
  }
  // 2. Running and waiting requests; 3. KV cache use.
  const std::vector<SeriesPoint> running = gauge_role_curve(series, "running"), waiting = gauge_role_curve(series, "waiting");
  if (!running.empty() || !waiting.empty()) {
    Chart chart(0, b.x_max_s(), 0, std::max({top_of(running, 1), top_of(waiting, 1), 1.0}) * 1.1);
    chart.marks += fmt::format("<path class=\"series-running\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                               series_path(running, chart.frame, b.t0, 1, true), kDecode);
    chart.marks += fmt::format("<path class=\"series-waiting\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                               series_path(waiting, chart.frame, b.t0, 1, true), kQueue);
    html += "<h3>Requests running and waiting (server)</h3>\n" +
            legend({{kDecode, "running"}, {kQueue, "waiting"}}) + chart.render("running and waiting requests", x_label, "requests");
  }
  const std::vector<SeriesPoint> kv = gauge_role_curve(series, "kv_cache_usage");
  if (!kv.empty()) {
    Chart chart(0, b.x_max_s(), 0, std::max(top_of(kv, 100), 1.0) * 1.1);
    chart.marks += fmt::format("<path class=\"series-kv\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                               series_path(kv, chart.frame, b.t0, 100, true), kPrefill);
    html += "<h3>KV cache use (server)</h3>\n" + chart.render("KV cache use", x_label, "% of the KV cache");
  }
  // 4. This machine's CPU.
  const std::vector<SeriesPoint> cpu = host_curve(series, "cpu_utilization_ratio"), mhz = host_curve(series, "cpu_frequency_mhz");
  if (!cpu.empty()) {
    Chart chart(0, b.x_max_s(), 0, 100);
    chart.marks += fmt::format("<path class=\"series-cpu\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                               series_path(cpu, chart.frame, b.t0, 100, false), kFailed);
    html += "<h3>CPU utilisation (this machine, all CPUs)</h3>\n" + chart.render("CPU utilisation", x_label, "% busy");
  }
  if (!mhz.empty()) {
    Chart chart(0, b.x_max_s(), 0, top_of(mhz, 1) * 1.1);
    chart.marks += fmt::format("<path class=\"series-mhz\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                               series_path(mhz, chart.frame, b.t0, 1, false), kQueue);
    html += "<h3>CPU frequency (this machine, mean over CPUs)</h3>\n" + chart.render("CPU frequency", x_label, "MHz");
  }

  // The numbers: roles, host, histograms.
  html += "<table id=\"series-roles\">\n<tr><th>during the run</th><th>metric</th><th>min</th><th>mean</th><th>max</th></tr>\n";
  for (const char* role : {"running", "waiting", "kv_cache_usage"}) {
    if (!j["roles"].contains(role)) continue;
    const json& r = j["roles"][role];
    const std::string key = std::string("roles.") + role;
    html += fmt::format("<tr><td>{}</td><td>{}</td>{}{}{}</tr>\n", role, esc(r["metric"].get<std::string>()), cell(key + ".min", r["min"], 2),
                        cell(key + ".mean", r["mean"], 2), cell(key + ".max", r["max"], 2));
  }
  html += "</table>\n<table id=\"series-counters\">\n<tr><th>counter</th><th>metric</th><th>increase</th><th>mean /s</th>"
          "<th>largest /s</th></tr>\n";
  for (const char* role : {"generation_tokens", "prompt_tokens"}) {
    if (!j["roles"].contains(role)) continue;
    const json& r = j["roles"][role];
    const std::string key = std::string("roles.") + role;
    html += fmt::format("<tr><td>{}</td><td>{}</td>{}{}{}</tr>\n", role, esc(r["metric"].get<std::string>()),
                        cell(key + ".increase", r["increase"], 0), cell(key + ".mean_rate_per_s", r["mean_rate_per_s"], 2),
                        cell(key + ".max_rate_per_s", r["max_rate_per_s"], 2));
  }
  html += "</table>\n<table id=\"series-host\">\n<tr><th>this machine</th><th>mean</th><th>min</th><th>max</th></tr>\n";
  for (const char* what : {"cpu_utilization", "cpu_frequency_mhz"}) {
    const json& v = j["host"][what];
    const std::string key = std::string("host.") + what;
    if (v.is_string()) html += fmt::format("<tr><td>{}</td><td colspan=\"3\" id=\"{}\">{}</td></tr>\n", what, element_id("server_series." + key), esc(v.get<std::string>()));
    else html += fmt::format("<tr><td>{}</td>{}{}{}</tr>\n", what, cell(key + ".mean", v["mean"], 3), cell(key + ".min", v["min"], 3),
                             cell(key + ".max", v["max"], 3));
  }
  html += fmt::format("</table>\n<p class=\"note\">CPU frequency read from: {}. Utilisation is the busy share of /proc/stat's "
                      "ticks between samples (0 to 1).</p>\n", esc(j["host"]["cpu_frequency_source"].get<std::string>()));
  if (!j["histograms"].empty()) {
    html += "<table id=\"series-histograms\">\n<tr><th>histogram (server)</th><th>labels</th><th>observations</th><th>mean</th>"
            "<th>p50</th><th>p95</th></tr>\n";
    for (std::size_t i = 0; i < j["histograms"].size(); ++i) {
      const json& h = j["histograms"][i];
      const std::string key = fmt::format("histograms.{}", i);
      html += fmt::format("<tr><td>{}</td><td>{}</td>{}{}{}{}</tr>\n", esc(h["name"].get<std::string>()), esc(h["labels"].get<std::string>()),
                          cell(key + ".count_increase", h["count_increase"], 0), cell(key + ".mean", h["mean"], 4),
                          cell(key + ".p50", h["p50"], 4), cell(key + ".p95", h["p95"], 4));
    }
    html += "</table>\n";
  }
  html += "<p class=\"note\">The server's /metrics scraped during the run and this machine's CPU, on the time axis of the "
          "charts above (ms since the run's start). Gauges: min / mean / max over the scrapes. Counters: the increase over "
          "the run and its rate between scrapes. Histograms: the observations made during the run, their mean, and p50 / "
          "p95 estimated from the buckets as Prometheus's histogram_quantile does. Every value is in the .series.csv.</p>\n";
  return {"series", "Server and machine during the run", html};
}

std::string requests_report_html(const std::vector<RequestRecord>& records, const Summary& summary,
                                 const std::string& source, const std::vector<SeriesSample>* series) {
  std::vector<HtmlSection> sections = {summary_section(summary)};
  if (!summary.turns.empty()) sections.push_back(turns_section(summary));
  for (HtmlSection section : {latency_cdf_section(records), itl_histogram_section(records), throughput_section(records)})
    sections.push_back(std::move(section));
  if (series && !series->empty()) sections.push_back(series_section(records, *series));
  sections.push_back(timeline_section(records));
  return html_page("inferlab report", source, sections);
}

HtmlSection sweep_section(const json& sweep) {
  std::string html = pareto_svg(sweep, "output tokens/s against tokens/s per user");
  html.insert(4, " role=\"img\" aria-label=\"Pareto plot\"");
  html += "<table id=\"sweep-points\">\n<tr><th>#</th><th>server flags</th><th>load</th><th></th><th>output token/s</th>"
          "<th>token/s per user</th><th>req/s</th><th>TTFT p50</th><th>TTFT p95</th><th>TPOT p50</th><th>E2E p50</th>"
          "<th>ok</th><th>failed</th><th>Pareto</th></tr>\n";
  for (std::size_t i = 0; i < sweep["points"].size(); ++i) {
    const json& p = sweep["points"][i];
    const std::string key = fmt::format("points.{}", i);
    std::string flags;
    for (const auto& a : p["serve_args"]) flags += (flags.empty() ? "" : " ") + a.get<std::string>();
    const bool levels = p["load"]["kind"] == "concurrency";
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td>{}", p["index"].get<int>(), esc(flags.empty() ? "(defaults)" : flags),
                        levels ? "concurrency" : "req/s", number_cell(key + ".load.value", p["load"]["value"], levels ? 0 : 2));
    if (!p.contains("figures")) {
      html += fmt::format("<td colspan=\"10\" class=\"note\">not measured: {}</td></tr>\n",
                          esc(p.contains("error") && p["error"].is_string() ? p["error"].get<std::string>() : "dry run"));
      continue;
    }
    const json& f = p["figures"];
    const std::string fk = key + ".figures.";
    html += number_cell(fk + "output_throughput_token_per_s", f["output_throughput_token_per_s"], 2) +
            number_cell(fk + "tokens_per_user_per_s", f["tokens_per_user_per_s"], 2) +
            number_cell(fk + "request_throughput_req_per_s", f["request_throughput_req_per_s"], 2) +
            number_cell(fk + "ttft_ms.p50", f["ttft_ms"]["p50"], 2) + number_cell(fk + "ttft_ms.p95", f["ttft_ms"]["p95"], 2) +
            number_cell(fk + "tpot_ms.p50", f["tpot_ms"]["p50"], 2) + number_cell(fk + "e2e_ms.p50", f["e2e_ms"]["p50"], 2) +
            number_cell(fk + "successful", f["successful"], 0) + number_cell(fk + "failed", f["failed"], 0);
    html += fmt::format("<td data-key=\"{0}.pareto\" data-value=\"{1}\">{2}</td></tr>\n", key, p["pareto"].get<bool>(),
                        p["pareto"].get<bool>() ? "frontier" : "");
  }
  html += "</table>\n<p class=\"note\">Each point: one start of the server with its flags, one bench serve at its load "
          "(its folder holds requests.csv, the .series.csv, summary.json, report.html and both logs). Tokens/s per user "
          "= output throughput / concurrency, as vLLM's plot_pareto (with a request rate: / the most requests in flight). "
          "The frontier (red): the points no other point beats on both.</p>\n";
  return {"sweep", "Sweep: throughput against throughput per user", html};
}

std::string sweep_report_html(const json& sweep, const std::string& subtitle) {
  return html_page("inferlab bench sweep", subtitle, {sweep_section(sweep)});
}

HtmlSection latency_sweep_section(const std::vector<LatencySweep>& runs, const std::string& title) {
  const LatencySweep& sweep = runs.front();
  double max_x = 0, max_y = 0;
  for (const auto& run : runs)
    for (const auto& p : run.points) {
      max_x = std::max(max_x, static_cast<double>(p.input_len));
      for (double s : p.samples_s) max_y = std::max(max_y, s);
    }
  max_x *= 1.05;
  max_y = std::max(max_y, sweep.fit.intercept + sweep.fit.slope * max_x) * 1.1;
  Chart chart(0, max_x, 0, max_y, 340);
  const svg::Frame& f = chart.frame;
  auto fit_line = [&](const LinearFit& fit, const char* color, const char* dash) {
    chart.marks += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\" "
                               "stroke-dasharray=\"{}\"/>\n",
                               f.px(0), f.py(fit.intercept), f.px(max_x), f.py(fit.intercept + fit.slope * max_x), color, dash);
  };
  fit_line(sweep.fit, kFailed, "");
  fit_line(sweep.prefill_fit, kPrefill, "6 4");
  for (const auto& p : sweep.points) {
    for (double s : p.samples_s)
      chart.marks += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\" fill=\"#9ecae1\"/>\n", f.px(p.input_len), f.py(s));
    chart.marks += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4.5\" fill=\"{}\"><title>{} tokens: {:.4f} s</title></circle>\n",
                               f.px(p.input_len), f.py(p.latency_s), kDecode, p.input_len, p.latency_s);
    chart.marks += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{} tokens: prefill {:.4f} s</title></circle>\n",
                               f.px(p.input_len), f.py(p.prefill_s), kPrefill, p.input_len, p.prefill_s);
  }
  std::string html = legend({{kDecode, "latency (median of repeats; light dots: each repeat)"},
                             {kFailed, "least-squares fit of latency"},
                             {kPrefill, "prefill (time to the first token) and its fit"}});
  html += chart.render(title, "input length (tokens)", "seconds");
  auto cell = [](const std::string& key, double value, int decimals) { return number_cell(key, json(value), decimals); };
  html += "<table id=\"latency-fit\">\n<tr><th>fit (run 1)</th><th>slope (s/token)</th><th>intercept (s)</th></tr>\n";
  html += fmt::format("<tr><td>latency</td>{}{}</tr>\n", cell("fit.slope", sweep.fit.slope, 6), cell("fit.intercept", sweep.fit.intercept, 4));
  html += fmt::format("<tr><td>prefill</td>{}{}</tr>\n</table>\n", cell("prefill_fit.slope", sweep.prefill_fit.slope, 6),
                      cell("prefill_fit.intercept", sweep.prefill_fit.intercept, 4));
  html += "<table id=\"latency-points\">\n<tr><th>run</th><th>input_len</th><th>latency_s</th><th>prefill_s</th>"
          "<th>decode ms/token</th><th>repeats</th></tr>\n";
  for (std::size_t r = 0; r < runs.size(); ++r)
    for (const auto& p : runs[r].points) {
      const std::string key = fmt::format("run{}.len{}", r + 1, p.input_len);
      html += fmt::format("<tr><td>{}</td><td class=\"num\">{}</td>{}{}{}<td class=\"num\">{}</td></tr>\n", r + 1, p.input_len,
                          cell(key + ".latency_s", p.latency_s, 4), cell(key + ".prefill_s", p.prefill_s, 4),
                          cell(key + ".decode_ms_per_token", p.decode_s_per_token * 1000, 3), p.samples_s.size());
    }
  html += "</table>\n<p class=\"note\">Median of the repeats at each length; the fit is numpy.polyfit(x, y, 1) over "
          "the medians of run 1. The same figures as --csv (which rounds to 6 decimals).</p>\n";
  return {"latency", "Latency against input length", html};
}

std::string latency_report_html(const std::vector<LatencySweep>& runs, const std::string& title,
                                const std::string& subtitle) {
  return html_page("inferlab bench latency", subtitle, {latency_sweep_section(runs, title)});
}

HtmlSection capacity_section(const CapacityResult& result, const CapacityOptions& options, const std::string& title) {
  const json j = capacity_json(result, options);
  const std::string unit = load_unit(options.kind);
  std::string html = capacity_svg(result, options, title);
  // capacity_svg is a standalone document; inline, it only needs to scale with the page.
  html.insert(4, " role=\"img\" aria-label=\"capacity curve\"");
  html += "<table id=\"capacity-outcome\">\n<tr><th>figure</th><th>value</th><th></th></tr>\n";
  html += fmt::format("<tr><td>outcome</td><td id=\"outcome\" data-key=\"outcome\" data-value=\"{0}\">{0}</td><td></td></tr>\n",
                      esc(j["outcome"].get<std::string>()));
  for (const auto& [key, name] : std::vector<std::pair<std::string, std::string>>{
           {"capacity", "capacity (highest load meeting the SLO)"}, {"first_failing", "first failing load"},
           {"step", "step between them"}, {"knee", "knee of the latency curve"}})
    html += fmt::format("<tr><td>{}</td>{}<td>{}</td></tr>\n", esc(name), number_cell(key, j[key], 2), esc(unit));
  html += "</table>\n";
  // One row per point measured (in the order measured), the objectives then the curve's metrics.
  html += "<table id=\"capacity-points\">\n<tr><th>load</th><th>phase</th><th>runs</th><th>verdict</th><th>figure</th>"
          "<th>median</th><th>CI low</th><th>CI high</th><th>bound</th></tr>\n";
  const json& points = j["points"];
  for (std::size_t i = 0; i < points.size(); ++i) {
    const json& p = points[i];
    const std::string base = fmt::format("points.{}", i);
    std::vector<std::string> rows;
    auto row = [&](const std::string& group, const std::string& name, const json& v, bool bound) {
      const std::string key = fmt::format("{}.{}.{}", base, group, name);
      rows.push_back(fmt::format("<td>{}</td>{}{}{}{}", esc(name), number_cell(key + ".median", v["median"], 2),
                                 number_cell(key + ".ci_low", v["ci_low"], 2), number_cell(key + ".ci_high", v["ci_high"], 2),
                                 bound ? number_cell(key + ".bound_ms", v["bound_ms"], 2) : "<td></td>"));
    };
    if (p.contains("objectives"))
      for (const auto& [name, v] : p["objectives"].items()) row("objectives", name, v, true);
    if (p.contains("metrics"))
      for (const auto& [name, v] : p["metrics"].items()) row("metrics", name, v, false);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      html += "<tr>";
      if (r == 0)
        html += fmt::format("<td rowspan=\"{0}\" class=\"num\" id=\"{1}\" data-key=\"{2}.load\" data-value=\"{3}\">{4:g} {5}</td>"
                            "<td rowspan=\"{0}\">{6}</td><td rowspan=\"{0}\" class=\"num\">{7}</td><td rowspan=\"{0}\">{8}</td>",
                            rows.size(), element_id(base + ".load"), base, esc(p["load"].dump()), p["load"].get<double>(), esc(unit),
                            esc(p["phase"].get<std::string>()), p["runs"].size(),
                            fmt::format("{} (by {})", p["meets"].get<bool>() ? "meets" : "fails",
                                        esc(p["decided_by"].get<std::string>())));
      html += rows[r] + "</tr>\n";
    }
  }
  html += fmt::format("</table>\n<p class=\"note\">Each point: up to {} runs of the same load; median over its runs and the "
                      "bootstrap {:.0f} % CI of that median. An objective's value is the nearest-rank percentile over all of a "
                      "run's requests, a failed one ranked last (— when it is +inf). docs/measurement.md, \"SLO capacity "
                      "search\".</p>\n",
                      options.repeat, options.statistics.confidence * 100);
  return {"capacity-curve", "Capacity curve", html};
}

std::string capacity_report_html(const CapacityResult& result, const CapacityOptions& options, const std::string& title,
                                 const std::string& subtitle) {
  return html_page("inferlab bench capacity", subtitle, {capacity_section(result, options, title)});
}

}  // namespace inferlab::lab
