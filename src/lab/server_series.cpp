// The run's time series and their summary (see server_series.h).
#include "inferlab/lab/server_series.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>

#include "inferlab/lab/csv.h"
#include "inferlab/lab/prometheus_text.h"
#include "inferlab/util/error.h"

namespace inferlab::lab {
namespace {

using nlohmann::json;

const char* kHeader = "time_ms,source,type,name,labels,value";

// One series (source, name, labels) in time order.
using SeriesKey = std::tuple<std::string, std::string, std::string>;
std::map<SeriesKey, std::vector<const SeriesSample*>> by_series(const std::vector<SeriesSample>& samples,
                                                                 const std::string& source) {
  std::map<SeriesKey, std::vector<const SeriesSample*>> out;
  for (const auto& s : samples)
    if (s.source == source) out[{s.source, s.name, s.labels}].push_back(&s);
  for (auto& [key, v] : out)
    std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->time_ms < b->time_ms; });
  return out;
}

// The sum (or mean) over label sets of `name` at each sample time.
std::vector<SeriesPoint> per_time(const std::vector<SeriesSample>& samples, const std::string& source,
                                  const std::string& name, bool mean) {
  std::map<double, std::pair<double, int>> at;
  for (const auto& s : samples)
    if (s.source == source && s.name == name && !std::isnan(s.value)) {
      auto& [sum, n] = at[s.time_ms];
      sum += s.value;
      ++n;
    }
  std::vector<SeriesPoint> out;
  for (const auto& [t, v] : at) out.push_back({t, mean ? v.first / v.second : v.first});
  return out;
}

struct CounterFigures {
  double increase = 0, mean_rate = 0, max_rate = 0;
  int resets = 0;
  std::vector<SeriesPoint> rates;  // at the middle of each interval
};

// Increase and rates of a counter's values in time order; a drop is a restart, the new value the increase.
CounterFigures counter_figures(const std::vector<SeriesPoint>& values) {
  CounterFigures f;
  for (std::size_t i = 1; i < values.size(); ++i) {
    const double dv = values[i].value >= values[i - 1].value ? values[i].value - values[i - 1].value : values[i].value;
    if (values[i].value < values[i - 1].value) ++f.resets;
    const double dt_s = (values[i].time_ms - values[i - 1].time_ms) / 1000;
    f.increase += dv;
    if (dt_s > 0) {
      f.rates.push_back({(values[i].time_ms + values[i - 1].time_ms) / 2, dv / dt_s});
      f.max_rate = std::max(f.max_rate, dv / dt_s);
    }
  }
  if (values.size() > 1 && values.back().time_ms > values.front().time_ms)
    f.mean_rate = f.increase / ((values.back().time_ms - values.front().time_ms) / 1000);
  return f;
}

json gauge_figures(const std::vector<SeriesPoint>& points) {
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  std::size_t n = 0;
  for (const auto& p : points)
    if (std::isfinite(p.value)) lo = std::min(lo, p.value), hi = std::max(hi, p.value), sum += p.value, ++n;
  if (n == 0) return {{"samples", points.size()}, {"min", nullptr}, {"mean", nullptr}, {"max", nullptr}, {"last", nullptr}};
  return {{"samples", points.size()}, {"min", lo}, {"mean", sum / static_cast<double>(n)}, {"max", hi},
          {"last", std::isfinite(points.back().value) ? json(points.back().value) : json(nullptr)}};
}

json optional_number(std::optional<double> v) { return v && std::isfinite(*v) ? json(*v) : json(nullptr); }

std::vector<SeriesPoint> points_of(const std::vector<const SeriesSample*>& series) {
  std::vector<SeriesPoint> out;
  for (const auto* s : series) out.push_back({s->time_ms, s->value});
  return out;
}

bool is_counter(const SeriesSample& s) { return s.type == "counter" || (s.type == "untyped" && s.name.ends_with("_total")); }

// The labels text without `le` (a histogram bucket's bound), and that bound.
std::pair<std::string, double> split_le(const std::string& labels) {
  if (labels.empty()) return {"", INFINITY};
  auto samples = parse_prometheus("x" + labels + " 0\n");
  auto pairs = samples.front().labels;
  double le = INFINITY;
  for (auto it = pairs.begin(); it != pairs.end();)
    if (it->first == "le") {
      if (!parse_prometheus_number(it->second, le)) le = NAN;
      it = pairs.erase(it);
    } else {
      ++it;
    }
  return {prometheus_labels(pairs), le};
}

}  // namespace

std::filesystem::path series_path_for(const std::filesystem::path& requests_csv) {
  std::filesystem::path p = requests_csv;
  if (p.extension() == ".csv") p.replace_extension();
  p += ".series.csv";
  return p;
}

std::string series_csv(const std::vector<SeriesSample>& samples) {
  std::string out = std::string(kHeader) + "\n";
  for (const auto& s : samples)
    out += csv_line({fmt::format("{:.3f}", s.time_ms), s.source, s.type, s.name, s.labels, prometheus_number(s.value)});
  return out;
}

void write_series_csv(const std::filesystem::path& path, const std::vector<SeriesSample>& samples) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !(out << series_csv(samples)) || !out.flush()) fail("cannot write {}", path.string());
}

std::vector<SeriesSample> parse_series_csv(const std::string& text, const std::string& source) {
  const std::vector<CsvRecord> records = parse_csv(text, source);
  if (records.empty()) fail("{}: empty; expected the header {}", source, kHeader);
  std::string header;
  for (std::size_t i = 0; i < records[0].fields.size(); ++i) header += (i ? "," : "") + records[0].fields[i];
  if (header != kHeader) fail("{} line 1: the header is '{}', expected '{}'", source, header, kHeader);
  std::vector<SeriesSample> out;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& rec = records[r];
    if (rec.fields.size() != 6)
      fail("{} line {}: {} fields, but the header has 6 columns", source, rec.line, rec.fields.size());
    SeriesSample s{.time_ms = 0, .source = rec.fields[1], .type = rec.fields[2], .name = rec.fields[3],
                   .labels = rec.fields[4], .value = 0};
    if (!parse_prometheus_number(rec.fields[0], s.time_ms) || !std::isfinite(s.time_ms))
      fail("{} line {}: time_ms is not a number: '{}'", source, rec.line, rec.fields[0]);
    if (!parse_prometheus_number(rec.fields[5], s.value))
      fail("{} line {}: value is not a number: '{}'", source, rec.line, rec.fields[5]);
    if (s.source.empty() || s.name.empty()) fail("{} line {}: source and name must not be empty", source, rec.line);
    if (!s.labels.empty()) {
      try {
        parse_prometheus("x" + s.labels + " 0\n");
      } catch (const Error&) {
        fail("{} line {}: labels are not Prometheus labels: '{}'", source, rec.line, s.labels);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<SeriesSample> read_series_csv(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}: no such file or not readable", path.string());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_series_csv(text, path.string());
}

const std::vector<std::string>& role_metric_names(const std::string& role) {
  static const std::map<std::string, std::vector<std::string>> names = {
      {"running", {"inferlab_running_requests", "vllm:num_requests_running", "sglang:num_running_reqs",
                   "llamacpp:requests_processing"}},
      {"waiting", {"inferlab_queue_length", "vllm:num_requests_waiting", "sglang:num_queue_reqs",
                   "llamacpp:requests_deferred"}},
      {"kv_cache_usage", {"inferlab_kv_cache_usage_ratio", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
                          "sglang:token_usage", "llamacpp:kv_cache_usage_ratio"}},
      {"generation_tokens", {"inferlab_generation_tokens_total", "vllm:generation_tokens_total",
                             "sglang:generation_tokens_total", "llamacpp:tokens_predicted_total"}},
      {"prompt_tokens", {"inferlab_prompt_tokens_total", "vllm:prompt_tokens_total", "sglang:prompt_tokens_total",
                         "llamacpp:prompt_tokens_total"}}};
  auto it = names.find(role);
  if (it == names.end()) fail("no such series role: {}", role);
  return it->second;
}

std::string role_metric(const std::vector<SeriesSample>& samples, const std::string& role) {
  for (const std::string& name : role_metric_names(role))
    for (const auto& s : samples)
      if (s.source == "server" && s.name == name) return name;
  return "";
}

std::vector<SeriesPoint> gauge_role_curve(const std::vector<SeriesSample>& samples, const std::string& role) {
  const std::string name = role_metric(samples, role);
  return name.empty() ? std::vector<SeriesPoint>{} : per_time(samples, "server", name, role == "kv_cache_usage");
}

std::vector<SeriesPoint> counter_role_rate(const std::vector<SeriesSample>& samples, const std::string& role) {
  const std::string name = role_metric(samples, role);
  return name.empty() ? std::vector<SeriesPoint>{} : counter_figures(per_time(samples, "server", name, false)).rates;
}

std::vector<SeriesPoint> host_curve(const std::vector<SeriesSample>& samples, const std::string& name) {
  // The all-CPU utilisation row has no labels; the frequency is averaged over the CPUs' rows.
  if (name == "cpu_utilization_ratio") {
    std::vector<SeriesPoint> out;
    for (const auto& s : samples)
      if (s.source == "host" && s.name == name && s.labels.empty()) out.push_back({s.time_ms, s.value});
    return out;
  }
  return per_time(samples, "host", name, true);
}

std::optional<double> histogram_quantile(double q, const std::vector<std::pair<double, double>>& buckets) {
  if (buckets.empty() || !(buckets.back().second > 0)) return std::nullopt;
  const double total = buckets.back().second, rank = q * total;
  double lower = 0, below = 0;
  for (const auto& [upper, cumulative] : buckets) {
    if (cumulative >= rank) {
      if (std::isinf(upper)) return lower;  // the rank is in the +Inf bucket: its lower bound, as Prometheus
      if (cumulative == below) return upper;
      return lower + (upper - lower) * (rank - below) / (cumulative - below);
    }
    lower = upper;
    below = cumulative;
  }
  return std::nullopt;
}

json series_json(const std::vector<SeriesSample>& samples) {
  json j;
  // The scrape: target, interval, how many answered.
  std::size_t scrapes = 0, failed = 0;
  json target = nullptr, interval = nullptr;
  for (const auto& s : samples) {
    if (s.source != "scrape") continue;
    if (s.name == "up") {
      ++scrapes;
      failed += s.value == 0;
    } else if (s.name == "scrape_target_info") {
      const auto labels = parse_prometheus("x" + s.labels + " 0\n").front();
      target = labels.label("url");
      double v = 0;
      if (parse_prometheus_number(labels.label("interval_s"), v)) interval = v;
    }
  }
  j["metrics_url"] = target;
  j["interval_s"] = interval;
  j["scrapes"] = scrapes;
  j["failed_scrapes"] = failed;
  j["rows"] = samples.size();
  double first = INFINITY, last = -INFINITY;
  for (const auto& s : samples) first = std::min(first, s.time_ms), last = std::max(last, s.time_ms);
  j["first_ms"] = samples.empty() ? json(nullptr) : json(first);
  j["last_ms"] = samples.empty() ? json(nullptr) : json(last);

  json roles = json::object();
  for (const char* role : {"running", "waiting", "kv_cache_usage"}) {
    const std::string name = role_metric(samples, role);
    if (name.empty()) continue;
    json g = gauge_figures(gauge_role_curve(samples, role));
    g["metric"] = name;
    roles[role] = g;
  }
  for (const char* role : {"generation_tokens", "prompt_tokens"}) {
    const std::string name = role_metric(samples, role);
    if (name.empty()) continue;
    const CounterFigures f = counter_figures(per_time(samples, "server", name, false));
    roles[role] = {{"metric", name}, {"increase", f.increase}, {"mean_rate_per_s", f.mean_rate},
                   {"max_rate_per_s", f.max_rate}, {"resets", f.resets}};
  }
  j["roles"] = roles;

  json gauges = json::array(), counters = json::array();
  // Histograms by family and labels without le: (bound, cumulative increase) per bucket, count, sum.
  struct Histogram {
    std::map<double, double> buckets;
    double count = 0, sum = 0;
  };
  std::map<std::pair<std::string, std::string>, Histogram> histograms;
  for (const auto& [key, series] : by_series(samples, "server")) {
    const auto& name = std::get<1>(key);
    const auto& labels = std::get<2>(key);
    const SeriesSample& first_sample = *series.front();
    const std::vector<SeriesPoint> points = points_of(series);
    if (first_sample.type == "histogram") {
      const double increase = counter_figures(points).increase;
      if (name.ends_with("_bucket")) {
        auto [rest, le] = split_le(labels);
        if (!std::isnan(le)) histograms[{name.substr(0, name.size() - 7), rest}].buckets[le] = increase;
      } else if (name.ends_with("_count")) {
        histograms[{name.substr(0, name.size() - 6), labels}].count = increase;
      } else if (name.ends_with("_sum")) {
        // A sum can fall (negative observations); its change is the last minus the first value.
        histograms[{name.substr(0, name.size() - 4), labels}].sum = points.back().value - points.front().value;
      }
    } else if (is_counter(first_sample)) {
      const CounterFigures f = counter_figures(points);
      counters.push_back({{"name", name}, {"labels", labels}, {"increase", f.increase}, {"mean_rate_per_s", f.mean_rate},
                          {"max_rate_per_s", f.max_rate}, {"resets", f.resets}});
    } else if (first_sample.type == "gauge" || first_sample.type == "untyped") {
      json g = gauge_figures(points);
      g["name"] = name;
      g["labels"] = labels;
      gauges.push_back(std::move(g));
    }
  }
  json hist = json::array();
  for (const auto& [key, h] : histograms) {
    std::vector<std::pair<double, double>> cumulative(h.buckets.begin(), h.buckets.end());
    hist.push_back({{"name", key.first}, {"labels", key.second}, {"count_increase", h.count},
                    {"sum_increase", h.sum}, {"mean", h.count > 0 ? json(h.sum / h.count) : json(nullptr)},
                    {"p50", optional_number(histogram_quantile(0.5, cumulative))},
                    {"p95", optional_number(histogram_quantile(0.95, cumulative))}});
  }
  j["gauges"] = gauges;
  j["counters"] = counters;
  j["histograms"] = hist;

  json host = json::object();
  const std::vector<SeriesPoint> util = host_curve(samples, "cpu_utilization_ratio");
  host["cpu_utilization"] = util.empty() ? json("not readable") : gauge_figures(util);
  std::string frequency_source = "not readable";
  for (const auto& s : samples)
    if (s.source == "host" && s.name == "cpu_frequency_info")
      frequency_source = parse_prometheus("x" + s.labels + " 0\n").front().label("source");
  const std::vector<SeriesPoint> mhz = host_curve(samples, "cpu_frequency_mhz");
  host["cpu_frequency_source"] = frequency_source;
  host["cpu_frequency_mhz"] = mhz.empty() ? json("not readable") : gauge_figures(mhz);
  j["host"] = host;
  return j;
}

std::string format_series(const json& j) {
  std::string out = j["metrics_url"].is_string()
                        ? fmt::format("Server and machine during the run ({} scrapes of {}, {} failed):\n",
                                      j["scrapes"].get<std::size_t>(), j["metrics_url"].get<std::string>(),
                                      j["failed_scrapes"].get<std::size_t>())
                        : std::string("Machine during the run (the server's /metrics not scraped):\n");
  auto number = [](const json& v) { return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : std::string("-"); };
  const json& roles = j["roles"];
  for (const char* role : {"running", "waiting", "kv_cache_usage"})
    if (roles.contains(role))
      out += fmt::format("  {:<20} mean {:>9}  max {:>9}   ({})\n", role, number(roles[role]["mean"]),
                         number(roles[role]["max"]), roles[role]["metric"].get<std::string>());
  for (const char* role : {"generation_tokens", "prompt_tokens"})
    if (roles.contains(role))
      out += fmt::format("  {:<20} mean {:>9}  max {:>9} token/s ({}, +{:.0f})\n", role + std::string("/s"),
                         number(roles[role]["mean_rate_per_s"]), number(roles[role]["max_rate_per_s"]),
                         roles[role]["metric"].get<std::string>(), roles[role]["increase"].get<double>());
  const json& host = j["host"];
  auto host_line = [&](const char* what, const json& v, double scale, const char* unit) {
    if (v.is_string()) return fmt::format("  {:<20} {}\n", what, v.get<std::string>());
    return fmt::format("  {:<20} mean {:>9}  max {:>9} {}\n", what, number(json(v["mean"].get<double>() * scale)),
                       number(json(v["max"].get<double>() * scale)), unit);
  };
  out += host_line("host CPU busy", host["cpu_utilization"], 100, "% of all CPUs");
  out += host_line("host CPU MHz", host["cpu_frequency_mhz"], 1,
                   fmt::format("MHz ({})", host["cpu_frequency_source"].get<std::string>()).c_str());
  return out;
}

}  // namespace inferlab::lab
