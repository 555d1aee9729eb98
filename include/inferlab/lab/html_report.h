// The report as one self-contained HTML page: inline CSS and inline SVG charts written here, no
// script and no network asset, so the file opens anywhere (mailed, attached to CI) and shows the
// same as it did when written. A page is a list of sections; each kind of run adds its own
// (a new benchmark adds one function returning an HtmlSection).
#pragma once
#include <string>
#include <vector>

#include "inferlab/lab/capacity.h"
#include "inferlab/lab/latency_sweep.h"
#include "inferlab/lab/metrics.h"
#include "inferlab/lab/server_series.h"
#include <nlohmann/json_fwd.hpp>

namespace inferlab::lab {

struct HtmlSection {
  std::string id;     // the section's anchor; its numbers' ids start with it
  std::string title;
  std::string html;   // the section's body: tables, <svg> charts, notes
};

// The whole page: a title, a line under it (where the data came from), the sections in order.
std::string html_page(const std::string& title, const std::string& subtitle, const std::vector<HtmlSection>& sections);

// Every number of the text report (format_report) in tables. Each number's cell carries
// data-key (its path in summary_json / `report --json`, e.g. "ttft_ms.p95"), data-value (the
// JSON's value, same digits) and an id (the key with '.' -> '-'), so a test or a script can read
// the page back.
HtmlSection summary_section(const Summary& summary);
// TTFT and E2E as empirical CDFs (successful requests).
HtmlSection latency_cdf_section(const std::vector<RequestRecord>& records);
// The pooled inter-token gaps as a histogram.
HtmlSection itl_histogram_section(const std::vector<RequestRecord>& records);
// Output tokens per second of the run, in time bins over the window.
HtmlSection throughput_section(const std::vector<RequestRecord>& records);
// One bar per request on the run's time axis: queue / prefill / transport / decode when the
// server sent its timings, else waiting for the first token / decode; failures in red.
HtmlSection timeline_section(const std::vector<RequestRecord>& records);

// What the server and the machine did during the run (the series of <name>.series.csv), drawn over
// the same time axis as the output tokens/s chart: the client's tokens/s beside the server's
// generation rate, running and waiting requests, KV cache use, this machine's CPU utilisation and
// frequency; and the summary's numbers (data-key: their path in `report --json`, under
// "server_series", e.g. "server_series.roles.running.mean", "server_series.histograms.2.p95").
HtmlSection series_section(const std::vector<RequestRecord>& records, const std::vector<SeriesSample>& series);

// `report --html`, `bench serve --html`: all the sections above (the series' when given).
std::string requests_report_html(const std::vector<RequestRecord>& records, const Summary& summary,
                                 const std::string& source, const std::vector<SeriesSample>* series = nullptr);

// `bench sweep --html`: the Pareto plot (pareto_svg) and every point's figures (data-key: their
// path in sweep.json / `bench sweep --json`, e.g. "points.1.figures.output_throughput_token_per_s").
HtmlSection sweep_section(const nlohmann::json& sweep);
std::string sweep_report_html(const nlohmann::json& sweep, const std::string& subtitle);

// `bench latency --html`: latency against input length with the fit, and the points' table
// (data-key "run1.len32.latency_s" and so on, the --csv's figures).
HtmlSection latency_sweep_section(const std::vector<LatencySweep>& runs, const std::string& title);
std::string latency_report_html(const std::vector<LatencySweep>& runs, const std::string& title,
                                const std::string& subtitle);

// `bench capacity --html`: the capacity curve (capacity_svg: p95 latencies with their CIs against
// the objectives, throughput and goodput; the capacity and the knee marked), the outcome and every
// point's objectives and curve metrics with CIs (data-key: their path in capacity.json, e.g.
// "capacity", "points.3.objectives.ttft_p95_ms.ci_high", "points.0.metrics.goodput.median").
HtmlSection capacity_section(const CapacityResult& result, const CapacityOptions& options, const std::string& title);
std::string capacity_report_html(const CapacityResult& result, const CapacityOptions& options, const std::string& title,
                                 const std::string& subtitle);

}  // namespace inferlab::lab
