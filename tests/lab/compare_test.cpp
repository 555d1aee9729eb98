// report --compare's statistics on synthetic runs with a known shift and with none.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "inferlab/lab/compare.h"
#include "inferlab/util/error.h"

#include <nlohmann/json.hpp>

using namespace inferlab;
using namespace inferlab::lab;

namespace {

// n successful requests whose TTFT and E2E are log-normal around scale_ms (a latency's long
// right tail), shifted by shift_ms; one output token each, so there is no TPOT or ITL.
std::vector<RequestRecord> synthetic_run(std::mt19937_64& rng, int n, double scale_ms, double shift_ms) {
  std::lognormal_distribution<double> latency(0.0, 0.5);
  std::vector<RequestRecord> records;
  for (int i = 0; i < n; ++i) {
    RequestRecord r;
    r.request_id = "r" + std::to_string(i);
    r.status = "ok";
    r.start_ms = 10.0 * i;
    r.ttft_ms = scale_ms * latency(rng) + shift_ms;
    r.end_ms = r.start_ms + *r.ttft_ms + 4 * scale_ms * latency(rng) + shift_ms;
    r.output_tokens = 1;
    records.push_back(r);
  }
  return records;
}

// A copy: callers pass compare_runs(...)'s temporary, which a returned reference would outlive.
MetricComparison row(const std::vector<MetricComparison>& rows, const std::string& metric) {
  for (const auto& r : rows)
    if (r.metric == metric) return r;
  throw std::runtime_error("no row " + metric);
}

}  // namespace

TEST(Compare, NoShiftSaysNoSignificantDifferenceInAtLeast95PercentOf200Trials) {
  std::mt19937_64 rng(2024);
  CompareOptions options;
  options.resamples = 1000;
  int quiet_ttft = 0, quiet_e2e = 0;
  for (int trial = 0; trial < 200; ++trial) {
    auto a = synthetic_run(rng, 100, 50, 0), b = synthetic_run(rng, 100, 50, 0);
    options.seed = trial;
    auto rows = compare_runs(a, b, options);
    quiet_ttft += row(rows, "TTFT").verdict == "no significant difference at 95 %";
    quiet_e2e += row(rows, "E2E").verdict == "no significant difference at 95 %";
  }
  std::printf("no shift, 200 trials: TTFT %d, E2E %d said no significant difference\n", quiet_ttft, quiet_e2e);
  EXPECT_GE(quiet_ttft, 190) << "false 'faster'/'slower' verdicts: " << 200 - quiet_ttft;
  EXPECT_GE(quiet_e2e, 190) << "false 'faster'/'slower' verdicts: " << 200 - quiet_e2e;
}

TEST(Compare, AKnownShiftIsDetectedWithItsSign) {
  std::mt19937_64 rng(7);
  CompareOptions options;
  options.resamples = 1000;
  int slower = 0, faster = 0, covered = 0;
  for (int trial = 0; trial < 50; ++trial) {
    // B's TTFT is 20 ms later than A's (the median TTFT is about 50 ms).
    auto a = synthetic_run(rng, 100, 50, 0), b = synthetic_run(rng, 100, 50, 20);
    options.seed = trial;
    const auto& up = row(compare_runs(a, b, options), "TTFT");
    slower += up.verdict == "slower";
    covered += up.interval.contains(20.0);
    faster += row(compare_runs(b, a, options), "TTFT").verdict == "faster";
  }
  std::printf("20 ms shift, 50 trials: %d slower, %d faster reversed, CI held the shift %d times\n", slower, faster,
              covered);
  EXPECT_GE(slower, 48);
  EXPECT_GE(faster, 48);
  // The percentile bootstrap of a median difference runs a little short of its nominal 95 % at
  // n = 100 (44 of these 50): the bound catches an interval that is wrong, not that one.
  EXPECT_GE(covered, 42) << "the 95 % interval should hold the true shift about 95 % of the time";
}

TEST(Compare, IntervalIsSeededAndItlResamplesRequests) {
  std::vector<RequestRecord> a, b;
  for (int i = 0; i < 40; ++i) {
    RequestRecord r;
    r.request_id = std::to_string(i);
    r.status = i == 0 ? "timeout" : "ok";  // failed requests are left out
    r.start_ms = i;
    r.end_ms = i + 100 + i % 7;
    r.ttft_ms = 10 + i % 5;
    r.output_tokens = 4;
    r.itl_ms = {5.0 + i % 3, 6.0, 7.0};
    r.has_itl = true;
    a.push_back(r);
    r.itl_ms = {8.0 + i % 3, 9.0, 10.0};
    b.push_back(r);
  }
  auto first = compare_runs(a, b, {500, 0.95, 3}), again = compare_runs(a, b, {500, 0.95, 3});
  const auto& itl = row(first, "ITL");
  EXPECT_EQ(itl.requests_a, 39u);
  EXPECT_EQ(itl.median_a, 6.0);
  EXPECT_EQ(itl.median_b, 9.0);
  EXPECT_EQ(itl.verdict, "slower");
  EXPECT_EQ(itl.interval.low, row(again, "ITL").interval.low);
  EXPECT_EQ(row(first, "TTFT").verdict, "no significant difference at 95 %");  // same TTFT both sides
  EXPECT_EQ(row(first, "TTFT").difference, 0);
  EXPECT_TRUE(row(first, "TPOT").compared);  // derived from E2E and TTFT
}

TEST(Compare, AMetricMissingOnOneSideIsNotCompared) {
  RequestRecord r;
  r.status = "ok";
  r.end_ms = 100;
  r.output_tokens = 1;
  std::vector<RequestRecord> without_ttft = {r};
  r.ttft_ms = 20;
  std::vector<RequestRecord> with_ttft = {r};
  auto rows = compare_runs(without_ttft, with_ttft);
  EXPECT_FALSE(row(rows, "TTFT").compared);
  EXPECT_EQ(row(rows, "TTFT").verdict, "not compared (no values in A)");
  EXPECT_EQ(row(rows, "ITL").verdict, "not compared (no values in A nor B)");
  EXPECT_TRUE(row(rows, "E2E").compared);
}

TEST(Compare, VerdictFollowsTheInterval) {
  EXPECT_EQ(latency_verdict({-3, -1}, 0.95), "faster");
  EXPECT_EQ(latency_verdict({1, 3}, 0.95), "slower");
  EXPECT_EQ(latency_verdict({-1, 3}, 0.95), "no significant difference at 95 %");
  EXPECT_EQ(latency_verdict({0, 3}, 0.95), "no significant difference at 95 %");
  EXPECT_EQ(latency_verdict({-1, 1}, 0.99), "no significant difference at 99 %");
}

// Output throughput: B serves the same tokens in half the window, so it is faster; a run against
// itself shows no difference.
TEST(Compare, OutputThroughputHigherIsFaster) {
  auto run = [](double gap_ms) {
    std::vector<RequestRecord> records;
    for (int i = 0; i < 60; ++i) {
      RequestRecord r;
      r.request_id = "r" + std::to_string(i);
      r.status = "ok";
      r.start_ms = gap_ms * i;
      r.end_ms = r.start_ms + 50 + (i % 7);
      r.ttft_ms = 10;
      r.output_tokens = 8 + i % 5;
      records.push_back(r);
    }
    return records;
  };
  auto slow = run(20), fast = run(10);
  const MetricComparison& faster = row(compare_runs(slow, fast), "Output");
  EXPECT_EQ(faster.unit, "token/s");
  EXPECT_NEAR(faster.median_b / faster.median_a, 2, 0.1);
  EXPECT_EQ(faster.verdict, "faster");
  EXPECT_GT(faster.interval.low, 0);
  EXPECT_EQ(row(compare_runs(fast, slow), "Output").verdict, "slower");
  EXPECT_EQ(row(compare_runs(slow, slow), "Output").verdict, "no significant difference at 95 %");
}

// Summaries of repeated runs: the medians over runs, a CI over runs, latency and throughput verdicts.
TEST(Compare, SummariesOfRepeatedRunsCompareTheRunMedians) {
  auto summary = [](std::vector<double> ttft, std::vector<double> throughput) {
    return nlohmann::json{{"repeat",
                           {{"runs", ttft.size()},
                            {"metrics",
                             {{"ttft_p50_ms", {{"per_run", ttft}}}, {"output_throughput", {{"per_run", throughput}}}}}}}};
  };
  const auto a = summary({40, 41, 42, 40, 41}, {100, 101, 99, 100, 102});
  const auto b = summary({60, 61, 62, 60, 63}, {150, 149, 151, 152, 150});
  auto rows = compare_repeated(a, b, "a.json", "b.json");
  const MetricComparison& ttft = row(rows, "ttft_p50_ms");
  EXPECT_EQ(ttft.requests_a, 5u);
  EXPECT_EQ(ttft.median_a, 41);
  EXPECT_EQ(ttft.median_b, 61);
  EXPECT_EQ(ttft.difference, 20);
  EXPECT_TRUE(ttft.interval.contains(20));
  EXPECT_EQ(ttft.verdict, "slower");
  const MetricComparison& tput = row(rows, "output_throughput");
  EXPECT_EQ(tput.unit, "token/s");
  EXPECT_EQ(tput.verdict, "faster");
  EXPECT_EQ(row(compare_repeated(a, a, "a.json", "a.json"), "ttft_p50_ms").verdict, "no significant difference at 95 %");
  const std::string text = format_comparison(rows, "a.json", "b.json", {}, true);
  EXPECT_NE(text.find("resamples of runs"), std::string::npos);
  EXPECT_THROW(compare_repeated(nlohmann::json{{"ttft_ms", 1}}, b, "single.json", "b.json"), Error);
  try {
    compare_repeated(nlohmann::json::object(), b, "single.json", "b.json");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("single.json: not a summary of repeated runs"), std::string::npos);
  }
}
