// dashboard_stats: /metrics' text read back into JSON (same names, same values), histograms as
// per-bucket counts, the running batch's rows.
#include "server/dashboard.h"

#include <gtest/gtest.h>

namespace inferlab::api {
namespace {

MetricsSnapshot sample() {
  MetricsSnapshot m;
  m.model_ready = true;
  m.active_streams = 2;
  SchedulerStats s;
  s.running = 3;
  s.waiting = 1;
  s.kv_blocks_total = 100;
  s.kv_blocks_in_use = 40;
  s.kv_blocks_cached = 7;
  s.prompt_tokens = 1000;
  s.prefix_cache_hit_tokens = 250;
  s.generation_tokens = 4321;
  s.requests_finished[static_cast<int>(FinishReason::stop)] = 5;
  s.requests_finished[static_cast<int>(FinishReason::length)] = 6;
  s.time_to_first_token.observe(0.003);
  s.time_to_first_token.observe(0.03);
  s.time_to_first_token.observe(0.03);
  s.time_to_first_token.observe(9999);
  m.engine = s;
  return m;
}

TEST(Dashboard, StatsAreTheMetricsUnderTheirPrometheusNames) {
  const json j = dashboard_stats(sample(), {}, "demo", Clock::now());
  EXPECT_EQ(j["model"], "demo");
  const json& m = j["metrics"];
  EXPECT_EQ(m["inferlab_running_requests"], 3);
  EXPECT_EQ(m["inferlab_queue_length"], 1);
  EXPECT_EQ(m["inferlab_kv_cache_blocks_total"], 100);
  EXPECT_EQ(m["inferlab_kv_cache_blocks_used"], 40);
  EXPECT_EQ(m["inferlab_kv_cache_blocks_cached"], 7);
  EXPECT_EQ(m["inferlab_generation_tokens_total"], 4321);
  EXPECT_EQ(m["inferlab_prefix_cache_hit_tokens_total"], 250);
  EXPECT_EQ(m["inferlab_active_streams"], 2);
  EXPECT_DOUBLE_EQ(m["inferlab_kv_cache_usage_ratio"].get<double>(), 0.4);
  EXPECT_EQ(j["labelled"]["inferlab_requests_finished_total"]["reason=\"stop\""], 5);
  EXPECT_EQ(j["finished_total"], 11);
  // Histogram series leave the scalars and become per-bucket counts, +Inf last.
  EXPECT_FALSE(m.contains("inferlab_time_to_first_token_seconds_sum"));
  const json& h = j["histograms"]["inferlab_time_to_first_token_seconds"];
  ASSERT_EQ(h["counts"].size(), h["bounds"].size() + 1);
  EXPECT_EQ(h["bounds"][0], 0.001);
  EXPECT_EQ(h["counts"][1], 1);  // 0.003 in (0.001, 0.005]
  EXPECT_EQ(h["counts"][4], 2);  // 0.03 in (0.02, 0.04]
  EXPECT_EQ(h["counts"].back(), 1);
  EXPECT_EQ(h["count"], 4);
  EXPECT_TRUE(j["sequences"].empty());
}

TEST(Dashboard, RunningRowsCarryTheirStageAndTimes) {
  const Clock::time_point t0 = Clock::now();
  SequenceSnapshot prefill{.id = 4, .prompt_tokens = 64, .cached_tokens = 16, .computed_tokens = 32, .max_tokens = 20,
                           .kv_blocks = 2, .arrival = t0, .scheduled = t0 + std::chrono::milliseconds(5), .first_token = std::nullopt};
  SequenceSnapshot decode{.id = 5, .prompt_tokens = 8, .computed_tokens = 18, .generated_tokens = 11, .max_tokens = 20,
                          .kv_blocks = 2, .arrival = t0, .scheduled = t0 + std::chrono::milliseconds(1),
                          .first_token = t0 + std::chrono::milliseconds(10)};
  const json j = dashboard_stats(sample(), {prefill, decode}, "demo", t0 + std::chrono::milliseconds(1010));
  ASSERT_EQ(j["sequences"].size(), 2u);
  const json& a = j["sequences"][0];
  EXPECT_EQ(a["id"], 4);
  EXPECT_EQ(a["stage"], "prefill");
  EXPECT_EQ(a["queue_ms"], 5.0);
  EXPECT_TRUE(a["ttft_ms"].is_null());
  EXPECT_EQ(a["age_ms"], 1010.0);
  const json& b = j["sequences"][1];
  EXPECT_EQ(b["stage"], "decode");
  EXPECT_EQ(b["ttft_ms"], 10.0);
  EXPECT_EQ(b["decode_tokens_per_s"], 10.0);  // 10 tokens after the first in 1 s
}

TEST(Dashboard, PageIsTheCompiledInHtml) {
  const std::string& page = dashboard_page();
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("/dashboard/stats"), std::string::npos);
  EXPECT_NE(page.find("</html>"), std::string::npos);
}

}  // namespace
}  // namespace inferlab::api
