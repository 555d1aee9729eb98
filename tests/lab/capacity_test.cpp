// The capacity search's pieces without a server: SLO parsing, the objective's value over a run,
// the sweep / bisection / CI rule driven by a latency model written here, the knee, the outputs.
#include "inferlab/lab/capacity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"

using namespace inferlab;
using namespace inferlab::lab;

namespace {

RequestRecord ok(double ttft, double e2e, int64_t tokens) {
  RequestRecord r;
  r.request_id = "r";
  r.status = "ok";
  r.start_ms = 0;
  r.end_ms = e2e;
  r.ttft_ms = ttft;
  r.output_tokens = tokens;
  return r;
}

RequestRecord failed() {
  RequestRecord r;
  r.request_id = "r";
  r.status = "timeout";
  r.end_ms = 1;
  return r;
}

// A run of 20 requests whose TTFT is `ttft(load)`, plus `wobble` on odd runs and minus it on even ones.
RunLoad model(std::function<double(double)> ttft, double wobble = 0) {
  return [ttft, wobble](double load, int run) {
    CapacityRun out;
    for (int i = 0; i < 20; ++i) {
      RequestRecord r = ok(ttft(load) + (run % 2 ? wobble : -wobble), ttft(load) + 50, 6);
      r.start_ms = i * 10;
      r.end_ms += r.start_ms;
      out.records.push_back(r);
    }
    return out;
  };
}

}  // namespace

TEST(Capacity, ParsesObjectives) {
  auto slo = parse_capacity_slo("ttft_p95_ms=200, tpot_p99.9_ms=50,e2e_p50_ms=1e3");
  ASSERT_EQ(slo.size(), 3u);
  EXPECT_EQ(slo[0].key, "ttft_p95_ms");
  EXPECT_EQ(slo[0].metric, "ttft");
  EXPECT_DOUBLE_EQ(slo[0].percentile, 0.95);
  EXPECT_EQ(slo[0].bound_ms, 200);
  EXPECT_DOUBLE_EQ(slo[1].percentile, 0.999);
  EXPECT_EQ(slo[2].bound_ms, 1000);
  for (const char* bad : {"", "ttft_ms=200", "itl_p95_ms=5", "ttft_p95_ms", "ttft_p95_ms=-1", "ttft_p95_ms=2x",
                          "ttft_p0_ms=5", "ttft_p101_ms=5", "ttft_p95_ms=1,ttft_p95_ms=2"})
    EXPECT_THROW(parse_capacity_slo(bad), Error) << bad;
}

TEST(Capacity, ObjectiveValueRanksFailuresLast) {
  const SloObjective ttft95{.key = "ttft_p95_ms", .metric = "ttft", .percentile = 0.95, .bound_ms = 100};
  std::vector<RequestRecord> run;
  for (int i = 1; i <= 19; ++i) run.push_back(ok(i, 100, 5));
  run.push_back(failed());
  EXPECT_EQ(objective_value(ttft95, run), 19);  // 1 failure in 20: the 19th value is the p95
  run.back() = failed(), run[0] = failed();
  EXPECT_EQ(objective_value(ttft95, run), std::numeric_limits<double>::infinity());  // 2 in 20: more than 5 %
  const SloObjective tpot50{.key = "tpot_p50_ms", .metric = "tpot", .percentile = 0.5, .bound_ms = 10};
  EXPECT_EQ(objective_value(tpot50, {ok(10, 10, 1), ok(10, 10, 1), ok(10, 50, 5)}), 0);  // one token: no decode step
  EXPECT_EQ(objective_value(tpot50, {ok(10, 50, 5), ok(10, 90, 5), ok(10, 10, 1)}), 10);  // (50-10)/4
  const SloObjective e2e99{.key = "e2e_p99_ms", .metric = "e2e", .percentile = 0.99, .bound_ms = 10};
  EXPECT_EQ(objective_value(e2e99, {ok(1, 30, 2), ok(1, 70, 2)}), 70);
}

// TTFT = 10 ms below 40 req/s, then growing fast: capacity for 100 ms is where 10 + 9 (x - 40) = 100, 50 req/s.
TEST(Capacity, SweepThenBisectionBracketTheAnswer) {
  CapacityOptions o;
  o.low = 1, o.high = 256, o.resolution = 0.05;
  o.slo = parse_capacity_slo("ttft_p95_ms=100");
  auto ttft = [](double x) { return x < 40 ? 10.0 : 10 + 9 * (x - 40); };
  std::vector<double> loads;
  CapacityResult r = search_capacity(o, model(ttft), [&](const CapacityPoint& p) { loads.push_back(p.load); });
  ASSERT_EQ(r.outcome, "found");
  EXPECT_LE(*r.capacity, 50);
  EXPECT_GT(*r.first_failing, 50);
  EXPECT_LE(*r.first_failing / *r.capacity, 1.05);
  EXPECT_EQ(std::vector<double>(loads.begin(), loads.begin() + 7), (std::vector<double>{1, 2, 4, 8, 16, 32, 64}));
  for (const auto& p : r.points) {
    EXPECT_EQ(p.runs.size(), 2u);  // identical runs: the CI is a point, decided after the minimum of 2
    EXPECT_EQ(p.decided_by, "ci");
    EXPECT_EQ(p.meets, p.load <= 50);
  }
  ASSERT_TRUE(r.knee);
  EXPECT_GE(*r.knee, 32);  // the curve is flat, then climbs: the bend is at 40 or the point before the climb
  EXPECT_LE(*r.knee, 50);
}

TEST(Capacity, StraddlingPointsRunKTimesAndTheMedianDecides) {
  CapacityOptions o;
  o.kind = LoadKind::Concurrency;
  o.low = 1, o.high = 8, o.repeat = 4;
  o.slo = parse_capacity_slo("ttft_p50_ms=40");
  // 10 ms per stream; runs wobble by +-6 ms: 4 streams (40 +- 6) straddles the bound.
  CapacityResult r = search_capacity(o, model([](double c) { return 10 * c; }, 6));
  ASSERT_EQ(r.outcome, "found");
  EXPECT_EQ(*r.capacity, 4);
  EXPECT_EQ(*r.first_failing, 5);
  int straddled = 0;
  for (const auto& p : r.points) {
    if (p.load == 4) {
      EXPECT_EQ(p.runs.size(), 4u);
      EXPECT_EQ(p.decided_by, "median");
      EXPECT_TRUE(p.meets);  // the median of 34, 46, 34, 46 is 40: <= 40
      ++straddled;
    }
  }
  EXPECT_EQ(straddled, 1);
  EXPECT_NE(format_capacity(r, o).find("CI straddles; median decided"), std::string::npos);
  EXPECT_NE(format_capacity(r, o).find("Capacity: 4 streams"), std::string::npos);
}

TEST(Capacity, OutsideTheRangeSaysSo) {
  CapacityOptions o;
  o.low = 2, o.high = 16, o.repeat = 1;
  o.slo = parse_capacity_slo("ttft_p95_ms=100");
  CapacityResult fast = search_capacity(o, model([](double) { return 5.0; }));
  EXPECT_EQ(fast.outcome, "above range");
  EXPECT_EQ(*fast.capacity, 16);
  EXPECT_EQ(fast.points.back().decided_by, "single run");
  CapacityResult slow = search_capacity(o, model([](double) { return 500.0; }));
  EXPECT_EQ(slow.outcome, "below range");
  EXPECT_FALSE(slow.capacity);
  EXPECT_EQ(slow.points.size(), 1u);
  EXPECT_NE(format_capacity(slow, o).find("below the range"), std::string::npos);
}

TEST(Capacity, FailuresFailThePointAndJsonSaysNull) {
  CapacityOptions o;
  o.low = 1, o.high = 4, o.repeat = 2;
  o.slo = parse_capacity_slo("ttft_p95_ms=100");
  RunLoad broken = [](double load, int) {
    CapacityRun out;
    for (int i = 0; i < 10; ++i) out.records.push_back(load >= 2 && i < 3 ? failed() : ok(5, 20, 4));
    return out;
  };
  CapacityResult r = search_capacity(o, broken);
  EXPECT_EQ(r.outcome, "found");
  EXPECT_LT(*r.capacity, 2);
  EXPECT_EQ(*r.first_failing, 2);
  nlohmann::json j = capacity_json(r, o);
  EXPECT_TRUE(j["points"][1]["objectives"]["ttft_p95_ms"]["median"].is_null());
  EXPECT_EQ(j["points"][1]["failed"], 6);
  EXPECT_FALSE(j["points"][1]["meets"]);
  const std::string svg = capacity_svg(r, o, "a <b>");
  EXPECT_NE(svg.find("a &lt;b&gt;"), std::string::npos);
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
}

TEST(Capacity, BadOptionsAreErrors) {
  CapacityOptions o;
  o.slo = parse_capacity_slo("ttft_p95_ms=100");
  auto never = [](double, int) -> CapacityRun { throw std::logic_error("no run expected"); };
  for (auto change : std::vector<std::function<void(CapacityOptions&)>>{
           [](CapacityOptions& x) { x.low = 0; }, [](CapacityOptions& x) { x.high = 0.1; },
           [](CapacityOptions& x) { x.sweep_factor = 1; }, [](CapacityOptions& x) { x.resolution = 0; },
           [](CapacityOptions& x) { x.slo.clear(); },
           [](CapacityOptions& x) { x.kind = LoadKind::Concurrency, x.low = 1.5; }}) {
    CapacityOptions bad = o;
    change(bad);
    EXPECT_THROW(search_capacity(bad, never), Error);
  }
}

TEST(Capacity, KneeOfAConvexCurve) {
  EXPECT_EQ(find_knee({1, 2, 3, 4, 5}, {10, 10, 11, 30, 100}), 4);
  EXPECT_FALSE(find_knee({1, 2, 3}, {1, 2, 3}));  // a straight line does not bend
  EXPECT_FALSE(find_knee({1, 2}, {1, 100}));
  // A late dip (noise) is not a knee: the running maximum keeps the curve increasing.
  EXPECT_EQ(find_knee({4, 4.76, 5.19, 5.66, 8}, {364, 444, 2527, 1089, 609}), 4.76);
  EXPECT_EQ(find_knee({5, 3, 4, 1, 2}, {100, 11, 30, 10, 10}), 4);  // the first case, shuffled
}
