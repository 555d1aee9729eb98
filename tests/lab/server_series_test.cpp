#include "inferlab/lab/server_series.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"
#include "lab/host_cpu.h"

namespace inferlab::lab {
namespace {

SeriesSample row(double t, const std::string& name, double v, const std::string& type = "gauge", const std::string& labels = "",
                 const std::string& source = "server") {
  return {.time_ms = t, .source = source, .type = type, .name = name, .labels = labels, .value = v};
}

TEST(SeriesCsv, RoundTripsLabelsAndSpecialValues) {
  const std::vector<SeriesSample> rows = {row(0.001, "x", NAN, "gauge", "{note=\"a, \\\"b\\\"\"}"),
                                          row(12.5, "h_bucket", INFINITY, "histogram", "{le=\"+Inf\"}"),
                                          row(-3.25, "cpu_utilization_ratio", 0.125, "gauge", "", "host")};
  const std::string text = series_csv(rows);
  EXPECT_EQ(text.substr(0, text.find('\n')), "time_ms,source,type,name,labels,value");
  const auto back = parse_series_csv(text, "s.csv");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].labels, rows[0].labels);
  EXPECT_TRUE(std::isnan(back[0].value));
  EXPECT_TRUE(std::isinf(back[1].value));
  EXPECT_EQ(back[2].time_ms, -3.25);
  EXPECT_EQ(back[2].source, "host");
  EXPECT_EQ(series_path_for("out/requests.csv"), "out/requests.series.csv");
  EXPECT_EQ(series_path_for("run.data"), "run.data.series.csv");
}

TEST(SeriesCsv, BadRowsAreNamedByLine) {
  const std::string header = "time_ms,source,type,name,labels,value\n";
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"t,source,type,name,labels,value\n", "s.csv line 1: the header is"},
           {header + "1,server,gauge,x,,1\n2,server,gauge,x,,lots\n", "s.csv line 3: value is not a number: 'lots'"},
           {header + "soon,server,gauge,x,,1\n", "s.csv line 2: time_ms is not a number"},
           {header + "1,server,gauge,x,1\n", "s.csv line 2: 5 fields"},
           {header + "1,server,gauge,x,{a=1},1\n", "s.csv line 2: labels are not Prometheus labels"},
           {"", "s.csv: empty"}}) {
    try {
      parse_series_csv(text, "s.csv");
      FAIL() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

TEST(ServerSeries, CounterRatesSurviveARestartAndSumLabelSets) {
  // Two label sets of vLLM's counter; at 3 s the server restarted (both fell).
  std::vector<SeriesSample> rows;
  const double a[] = {0, 100, 300, 50, 150}, b[] = {10, 10, 110, 0, 0};
  for (int i = 0; i < 5; ++i) {
    rows.push_back(row(i * 1000.0, "vllm:generation_tokens_total", a[i], "counter", "{engine=\"0\"}"));
    rows.push_back(row(i * 1000.0, "vllm:generation_tokens_total", b[i], "counter", "{engine=\"1\"}"));
  }
  EXPECT_EQ(role_metric(rows, "generation_tokens"), "vllm:generation_tokens_total");
  const auto rates = counter_role_rate(rows, "generation_tokens");
  ASSERT_EQ(rates.size(), 4u);
  EXPECT_DOUBLE_EQ(rates[0].time_ms, 500);
  EXPECT_DOUBLE_EQ(rates[0].value, 100);
  EXPECT_DOUBLE_EQ(rates[1].value, 300);
  EXPECT_DOUBLE_EQ(rates[2].value, 50);  // the sum fell 410 -> 50: a restart, 50 counted since it
  EXPECT_DOUBLE_EQ(rates[3].value, 100);
  const auto j = series_json(rows);
  EXPECT_DOUBLE_EQ(j["roles"]["generation_tokens"]["increase"].get<double>(), 550);
  EXPECT_DOUBLE_EQ(j["roles"]["generation_tokens"]["mean_rate_per_s"].get<double>(), 550.0 / 4);
  EXPECT_DOUBLE_EQ(j["roles"]["generation_tokens"]["max_rate_per_s"].get<double>(), 300);
  EXPECT_EQ(j["roles"]["generation_tokens"]["resets"], 1);
  ASSERT_EQ(j["counters"].size(), 2u);  // each label set on its own too
  EXPECT_DOUBLE_EQ(j["counters"][1]["increase"].get<double>(), 100);  // engine 1: +100, then 0 after the restart
}

TEST(ServerSeries, GaugeRolesPreferInferlabNamesAndAverageKvUse) {
  std::vector<SeriesSample> rows = {row(0, "inferlab_running_requests", 2), row(0, "vllm:num_requests_running", 9),
                                    row(1000, "inferlab_running_requests", 4), row(1000, "vllm:num_requests_running", 9),
                                    row(0, "vllm:kv_cache_usage_perc", 0.2, "gauge", "{engine=\"0\"}"),
                                    row(0, "vllm:kv_cache_usage_perc", 0.4, "gauge", "{engine=\"1\"}"),
                                    row(0, "scripted", NAN)};
  const auto running = gauge_role_curve(rows, "running");
  ASSERT_EQ(running.size(), 2u);
  EXPECT_EQ(running[1].value, 4);
  const auto kv = gauge_role_curve(rows, "kv_cache_usage");
  ASSERT_EQ(kv.size(), 1u);
  EXPECT_DOUBLE_EQ(kv[0].value, 0.3);
  const auto j = series_json(rows);
  EXPECT_EQ(j["roles"]["running"]["metric"], "inferlab_running_requests");
  EXPECT_DOUBLE_EQ(j["roles"]["running"]["mean"].get<double>(), 3);
  EXPECT_FALSE(j["roles"].contains("waiting"));
  bool nan_gauge = false;
  for (const auto& g : j["gauges"])
    if (g["name"] == "scripted") nan_gauge = g["mean"].is_null();
  EXPECT_TRUE(nan_gauge);
  EXPECT_EQ(j["host"]["cpu_frequency_mhz"], "not readable");
  EXPECT_EQ(j["host"]["cpu_utilization"], "not readable");
}

TEST(ServerSeries, HistogramFiguresComeFromTheRunsObservations) {
  // Before the run 10 observations at 0.05 (<= 0.1); during it 4 more at 0.05 and 4 at 0.5.
  std::vector<SeriesSample> rows;
  auto scrape = [&](double t, double b01, double b1, double inf, double sum, double count) {
    rows.push_back(row(t, "ttft_bucket", b01, "histogram", "{le=\"0.1\"}"));
    rows.push_back(row(t, "ttft_bucket", b1, "histogram", "{le=\"1\"}"));
    rows.push_back(row(t, "ttft_bucket", inf, "histogram", "{le=\"+Inf\"}"));
    rows.push_back(row(t, "ttft_sum", sum, "histogram"));
    rows.push_back(row(t, "ttft_count", count, "histogram"));
  };
  scrape(0, 10, 10, 10, 0.5, 10);
  scrape(1000, 14, 18, 18, 0.5 + 0.2 + 2.0, 18);
  const auto j = series_json(rows);
  ASSERT_EQ(j["histograms"].size(), 1u);
  const auto& h = j["histograms"][0];
  EXPECT_EQ(h["name"], "ttft");
  EXPECT_EQ(h["labels"], "");
  EXPECT_DOUBLE_EQ(h["count_increase"].get<double>(), 8);
  EXPECT_DOUBLE_EQ(h["mean"].get<double>(), 2.2 / 8);
  EXPECT_DOUBLE_EQ(h["p50"].get<double>(), 0.1);   // rank 4: the last of the first bucket
  EXPECT_DOUBLE_EQ(h["p95"].get<double>(), 0.1 + 0.9 * (7.6 - 4) / 4);
}

TEST(ServerSeries, HistogramQuantileAsPrometheus) {
  const std::vector<std::pair<double, double>> b = {{1, 2}, {2, 6}, {4, 8}, {INFINITY, 10}};
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.1, b), 0.5);      // rank 1 of 2 in [0, 1]
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.4, b), 1.5);      // rank 4: half way through (1, 2]
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.95, b), 4);       // in the +Inf bucket: its lower bound
  EXPECT_FALSE(histogram_quantile(0.5, {{1, 0}, {INFINITY, 0}}).has_value());
  EXPECT_FALSE(histogram_quantile(0.5, {}).has_value());
}

TEST(HostCpu, UtilizationAndFrequencyFromProcText) {
  const auto a = parse_proc_stat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 60 0 20 400 20 0 0 0 0 0\nintr 5\n");
  const auto b = parse_proc_stat("cpu  160 0 70 900 70 0 0 0 0 0\ncpu0 100 0 40 420 20 0 0 0 0 0\n");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a.at("cpu").total, 1000u);
  EXPECT_EQ(a.at("cpu").busy, 150u);
  EXPECT_DOUBLE_EQ(cpu_utilization(a.at("cpu"), b.at("cpu")), 80.0 / 200);  // 60 user + 20 system of 200 ticks
  EXPECT_DOUBLE_EQ(cpu_utilization(a.at("cpu0"), b.at("cpu0")), 60.0 / 80);
  EXPECT_EQ(cpu_utilization(a.at("cpu"), a.at("cpu")), -1);
  const auto mhz = parse_cpuinfo_mhz("processor\t: 0\ncpu MHz\t\t: 2596.122\n\nprocessor\t: 1\nmodel name\t: x\ncpu MHz\t\t: 3000\n");
  ASSERT_EQ(mhz.size(), 2u);
  EXPECT_EQ(mhz[1].first, 1);
  EXPECT_DOUBLE_EQ(mhz[0].second, 2596.122);
  EXPECT_TRUE(parse_cpuinfo_mhz("processor : 0\nBogoMIPS : 50\n").empty());  // e.g. ARM: no MHz, "not readable"
}

}  // namespace
}  // namespace inferlab::lab
