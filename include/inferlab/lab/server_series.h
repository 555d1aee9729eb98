// What the server and the machine did during a `bench serve` run: the server's /metrics scraped at
// an interval and the host's CPU utilisation and frequency, as one long table (one row per value
// per sample) stored beside requests.csv as <name>.series.csv, on the same time axis (ms since the
// run's start), and what the report makes of it (docs/measurement.md, "The server and the machine
// during the run").
#pragma once
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace inferlab::lab {

// One value of one sample. source: "server" (a /metrics sample), "host" (this machine: CPU
// utilisation and frequency), "scrape" (about the scrape itself: up, scrape_duration_seconds,
// scrape_target_info). type: the family's # TYPE (counter, gauge, histogram, summary, untyped; host
// and scrape rows are gauges or info). labels: Prometheus's own text, e.g. {le="0.1"}, or "".
struct SeriesSample {
  double time_ms = 0;
  std::string source, type, name, labels;
  double value = 0;
};

// requests.csv -> requests.series.csv (any other name: NAME.series.csv).
std::filesystem::path series_path_for(const std::filesystem::path& requests_csv);

// The CSV: time_ms,source,type,name,labels,value (times to the microsecond; NaN, +Inf, -Inf as
// Prometheus writes them).
std::string series_csv(const std::vector<SeriesSample>& samples);
void write_series_csv(const std::filesystem::path& path, const std::vector<SeriesSample>& samples);
// Throws Error naming the file and line of a malformed row.
std::vector<SeriesSample> parse_series_csv(const std::string& text, const std::string& source);
std::vector<SeriesSample> read_series_csv(const std::filesystem::path& path);

// A curve of one role or one series over time (ms since the run's start).
struct SeriesPoint {
  double time_ms = 0, value = 0;
};
// The metric names each role is read from, the first present winning: inferlab's, vLLM's,
// SGLang's, llama.cpp's. Gauges: "running", "waiting", "kv_cache_usage" (0..1); counters:
// "generation_tokens", "prompt_tokens".
const std::vector<std::string>& role_metric_names(const std::string& role);
// The role's metric in these samples ("" when none).
std::string role_metric(const std::vector<SeriesSample>& samples, const std::string& role);
// A gauge role at each scrape (summed over label sets; kv_cache_usage averaged).
std::vector<SeriesPoint> gauge_role_curve(const std::vector<SeriesSample>& samples, const std::string& role);
// A counter role as a rate per second between consecutive scrapes, at the middle of each interval
// (summed over label sets; a counter that went down restarted, and its new value is the increase).
std::vector<SeriesPoint> counter_role_rate(const std::vector<SeriesSample>& samples, const std::string& role);
// A host gauge: the all-CPU utilisation (0..1) or the mean frequency over CPUs (MHz) at each sample.
std::vector<SeriesPoint> host_curve(const std::vector<SeriesSample>& samples, const std::string& name);

// The summary (`server_series` in report --json and bench serve's summary): scrapes, each role,
// every gauge (min / mean / max / last), counter (increase, mean and largest rate), histogram
// (observations, mean, p50 / p95 estimated from the buckets as Prometheus's histogram_quantile
// does) and the host's CPU utilisation and frequency ("not readable" when it was not).
nlohmann::json series_json(const std::vector<SeriesSample>& samples);
// A few lines for the text report: the roles and the host.
std::string format_series(const nlohmann::json& summary);

// Prometheus's histogram_quantile over (upper bound, cumulative count) buckets, +Inf last: linear
// inside the bucket holding the rank; none without observations.
std::optional<double> histogram_quantile(double q, const std::vector<std::pair<double, double>>& cumulative_buckets);

}  // namespace inferlab::lab
