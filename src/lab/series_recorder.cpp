// The scrape thread (see series_recorder.h).
#include "inferlab/lab/series_recorder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "inferlab/lab/prometheus_text.h"
#include "inferlab/util/error.h"
#include "lab/host_cpu.h"
#include "lab/http_client.h"

namespace inferlab::lab {

std::string probe_metrics(const std::string& url, const std::string& api_key, double timeout_s) {
  HttpResponse r = fetch({.url = url, .api_key = api_key, .timeout_ms = static_cast<long>(timeout_s * 1000)});
  if (r.outcome.end != TransferOutcome::End::answered) return fmt::format("GET {}: {}", url, r.outcome.error);
  if (r.outcome.status != 200) return fmt::format("GET {}: HTTP {}", url, r.outcome.status);
  try {
    if (parse_prometheus(r.body).empty()) return fmt::format("GET {}: no samples in the answer", url);
  } catch (const Error& e) {
    return fmt::format("GET {}: not Prometheus text ({})", url, e.what());
  }
  return "";
}

double parse_interval(const std::string& text, const char* flag) {
  std::string number = text;
  double scale = 1;
  if (number.ends_with("ms")) number.resize(number.size() - 2), scale = 0.001;
  else if (number.ends_with("s")) number.resize(number.size() - 1);
  double v = 0;
  std::size_t used = 0;
  try {
    v = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (number.empty() || used != number.size() || !std::isfinite(v))
    fail("{}: '{}' is not a duration (write e.g. 1s, 500ms or 0.5)", flag, text);
  v *= scale;
  if (v < 0.01) fail("{}: {} is below 10ms", flag, text);
  return v;
}

SeriesRecorder::SeriesRecorder(ScrapeOptions options) : options_(std::move(options)) {
  for (const auto& [name, t] : read_proc_stat()) previous_ticks_[name] = {t.busy, t.total};  // the first sample's baseline
  if (!options_.metrics_url.empty())
    rows_.push_back({Clock::now(),
                     {.time_ms = 0, .source = "scrape", .type = "info", .name = "scrape_target_info",
                      .labels = prometheus_labels({{"url", options_.metrics_url},
                                                   {"interval_s", prometheus_number(options_.interval_s)}}),
                      .value = 1}});
  thread_ = std::thread([this] { loop(); });
}

SeriesRecorder::~SeriesRecorder() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
}

void SeriesRecorder::sample_once() {
  if (!options_.metrics_url.empty()) {
    const auto begin = Clock::now();
    HttpResponse r = fetch({.url = options_.metrics_url, .api_key = options_.api_key,
                            .timeout_ms = static_cast<long>(std::max(1.0, options_.interval_s) * 1000)});
    const auto end = Clock::now();
    const auto at = begin + (end - begin) / 2;  // the server answered somewhere in between
    std::string error;
    if (r.outcome.end != TransferOutcome::End::answered) error = r.outcome.error;
    else if (r.outcome.status != 200) error = fmt::format("HTTP {}", r.outcome.status);
    if (error.empty()) {
      try {
        PrometheusText text = parse_prometheus_text(r.body);
        for (auto& s : text.samples)
          rows_.push_back({at, {.time_ms = 0, .source = "server", .type = text.type_of(s.name), .name = s.name,
                                .labels = prometheus_labels(s.labels), .value = s.value}});
      } catch (const Error& e) {
        error = e.what();
      }
    }
    if (!error.empty() && first_error_.empty()) first_error_ = fmt::format("GET {}: {}", options_.metrics_url, error);
    auto scrape_row = [&](const char* name, double value) {
      rows_.push_back({at, {.time_ms = 0, .source = "scrape", .type = "gauge", .name = name, .labels = "", .value = value}});
    };
    scrape_row("up", error.empty() ? 1 : 0);
    scrape_row("scrape_duration_seconds", std::chrono::duration<double>(end - begin).count());
  }
  const auto at = Clock::now();
  auto host_row = [&](const char* name, const std::string& labels, double value, const char* type = "gauge") {
    rows_.push_back({at, {.time_ms = 0, .source = "host", .type = type, .name = name, .labels = labels, .value = value}});
  };
  for (const auto& [name, t] : read_proc_stat()) {
    auto it = previous_ticks_.find(name);
    if (it != previous_ticks_.end()) {
      const double u = cpu_utilization({it->second.first, it->second.second}, t);
      if (u >= 0)
        host_row("cpu_utilization_ratio", name == "cpu" ? "" : prometheus_labels({{"cpu", name.substr(3)}}), u);
    }
    previous_ticks_[name] = {t.busy, t.total};
  }
  const CpuFrequencies f = read_cpu_frequencies();
  if (!frequency_source_written_) {
    host_row("cpu_frequency_info", prometheus_labels({{"source", f.source.empty() ? "not readable" : f.source}}), 1, "info");
    frequency_source_written_ = true;
  }
  for (const auto& [cpu, mhz] : f.mhz) host_row("cpu_frequency_mhz", prometheus_labels({{"cpu", std::to_string(cpu)}}), mhz);
}

void SeriesRecorder::loop() {
  const auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.interval_s));
  auto next = Clock::now();
  while (true) {
    sample_once();
    next += interval;
    if (next < Clock::now()) next = Clock::now();  // a scrape slower than the interval: the next one at once
    std::unique_lock lock(mutex_);
    if (wake_.wait_until(lock, next, [this] { return stopping_; })) break;
  }
  sample_once();  // the state after the run's last request
}

std::vector<SeriesSample> SeriesRecorder::stop(Clock::time_point origin) {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<SeriesSample> out;
  out.reserve(rows_.size());
  for (auto& row : rows_) {
    // Rounded as the CSV writes it (to the microsecond), so the summary of these rows and of the file agree.
    row.sample.time_ms = std::round(std::chrono::duration<double, std::milli>(row.at - origin).count() * 1000) / 1000;
    out.push_back(std::move(row.sample));
  }
  return out;
}

}  // namespace inferlab::lab
