#include "inferlab/lab/replica_metrics.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"

namespace inferlab::lab {
namespace {

// The shape of inferlab's /metrics (src/server/prometheus.cpp), counters only.
std::string inferlab_text(int stop, int length, int cancelled, int rejected, int generated, int prompt) {
  return "# HELP inferlab_requests_rejected_total refused\n# TYPE inferlab_requests_rejected_total counter\n"
         "inferlab_requests_rejected_total " + std::to_string(rejected) + "\n"
         "inferlab_requests_finished_total{reason=\"stop\"} " + std::to_string(stop) + "\n"
         "inferlab_requests_finished_total{reason=\"length\"} " + std::to_string(length) + "\n"
         "inferlab_requests_finished_total{reason=\"cancelled\"} " + std::to_string(cancelled) + "\n"
         "inferlab_requests_finished_total{reason=\"timeout\"} 0\n"
         "inferlab_requests_finished_total{reason=\"error\"} 0\n"
         "inferlab_generation_tokens_total " + std::to_string(generated) + "\n"
         "inferlab_prompt_tokens_total " + std::to_string(prompt) + "\n"
         "inferlab_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n";
}

ReplicaScrape scraped(const std::string& replica, const std::string& text) {
  return {.replica = replica, .metrics_url = replica + "/metrics", .counters = replica_counters(parse_prometheus(text)), .error = {}};
}

ReplicaScrape unreachable(const std::string& replica) {
  return {.replica = replica, .metrics_url = replica + "/metrics", .counters = {}, .error = "GET x: Couldn't connect to server"};
}

TEST(PrometheusText, SamplesWithLabelsEscapesAndTimestamps) {
  const auto samples = parse_prometheus(
      "# a comment\n\nup 1\nx{a=\"1\",b=\"q\\\"uo te\"} 2.5 1700000000\r\ny{le=\"+Inf\",} +Inf\n");
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[1].name, "x");
  EXPECT_EQ(samples[1].label("b"), "q\"uo te");
  EXPECT_EQ(samples[1].label("missing"), "");
  EXPECT_DOUBLE_EQ(samples[1].value, 2.5);
  EXPECT_TRUE(std::isinf(samples[2].value));
}

TEST(PrometheusText, MalformedLineNamesItsNumber) {
  try {
    parse_prometheus("ok 1\nbroken{a=\"1\" two\n");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_prometheus("name notanumber\n"), Error);
  EXPECT_THROW(parse_prometheus("name_without_value\n"), Error);
}

TEST(ReplicaCounters, InferlabNames) {
  const auto c = replica_counters(parse_prometheus(inferlab_text(3, 4, 2, 1, 90, 40)));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->names, "inferlab");
  EXPECT_EQ(c->completed, 7);
  EXPECT_EQ(c->failed, 3);  // cancelled + rejected
  EXPECT_EQ(c->generated_tokens, 90);
  EXPECT_EQ(c->prompt_tokens, 40);
}

TEST(ReplicaCounters, VllmNamesSummedOverModelNames) {
  const auto c = replica_counters(parse_prometheus(
      "vllm:request_success_total{finished_reason=\"stop\",model_name=\"a\"} 2.0\n"
      "vllm:request_success_total{finished_reason=\"length\",model_name=\"a\"} 5.0\n"
      "vllm:request_success_total{finished_reason=\"abort\",model_name=\"a\"} 1.0\n"
      "vllm:request_success_total{finished_reason=\"stop\",model_name=\"b\"} 1.0\n"
      "vllm:generation_tokens_total{model_name=\"a\"} 100.0\n"
      "vllm:generation_tokens_total{model_name=\"b\"} 7.0\n"
      "vllm:prompt_tokens_total{model_name=\"a\"} 30.0\n"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->names, "vllm");
  EXPECT_EQ(c->completed, 8);
  EXPECT_EQ(c->failed, 1);
  EXPECT_EQ(c->generated_tokens, 107);
  EXPECT_EQ(c->prompt_tokens, 30);
}

TEST(ReplicaCounters, NoneWithoutRequestCounters) {
  // A server still loading exposes its HTTP counters but no engine counters.
  EXPECT_FALSE(replica_counters(parse_prometheus("inferlab_model_ready 0\nprocess_resident_memory_bytes 1e6\n")));
}

TEST(ReplicaMetricsUrl, AcceptsRootsV1AndMetricsUrls) {
  EXPECT_EQ(replica_metrics_url("http://127.0.0.1:30001"), "http://127.0.0.1:30001/metrics");
  EXPECT_EQ(replica_metrics_url("http://127.0.0.1:30001/"), "http://127.0.0.1:30001/metrics");
  EXPECT_EQ(replica_metrics_url("http://h:1/v1"), "http://h:1/metrics");
  EXPECT_EQ(replica_metrics_url("https://h/metrics"), "https://h/metrics");
  EXPECT_THROW(replica_metrics_url("127.0.0.1:30001"), Error);
  EXPECT_THROW(replica_metrics_url(""), Error);
}

TEST(ReplicaReport, DeltasSharesAndMatches) {
  const std::vector<ReplicaScrape> before = {scraped("http://a", inferlab_text(1, 0, 0, 0, 10, 5)),
                                             scraped("http://b", inferlab_text(0, 0, 0, 0, 0, 0))};
  const std::vector<ReplicaScrape> after = {scraped("http://a", inferlab_text(1, 3, 0, 0, 40, 20)),
                                            scraped("http://b", inferlab_text(0, 1, 0, 0, 10, 5))};
  const ReplicaReport r = replica_report(before, after, 4, 40);
  ASSERT_EQ(r.rows.size(), 2u);
  ASSERT_TRUE(r.rows[0].delta && r.rows[1].delta);
  EXPECT_EQ(r.rows[0].delta->completed, 3);
  EXPECT_EQ(r.rows[0].delta->generated_tokens, 30);
  EXPECT_DOUBLE_EQ(r.rows[0].share, 0.75);
  EXPECT_DOUBLE_EQ(r.rows[1].share, 0.25);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.requests_match, true);
  EXPECT_EQ(r.tokens_match, true);
  const nlohmann::json j = replica_report_json(r);
  EXPECT_EQ(j["rows"][0]["completed"], 3);
  EXPECT_EQ(j["sum"]["completed"], 4);
  EXPECT_EQ(j["requests_match"], true);
  const std::string text = format_replica_report(r);
  EXPECT_NE(text.find("75.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("requests yes, generated tokens yes"), std::string::npos) << text;

  // The client counted one more request than the replicas served: other traffic, a missing replica.
  const ReplicaReport off = replica_report(before, after, 5, 40);
  EXPECT_EQ(off.requests_match, false);
  EXPECT_NE(format_replica_report(off).find("requests NO"), std::string::npos);
}

TEST(ReplicaReport, UnscrapedReplicaIsAMarkedRowNeverDropped) {
  const std::vector<ReplicaScrape> before = {scraped("http://a", inferlab_text(0, 0, 0, 0, 0, 0)),
                                             scraped("http://b", inferlab_text(0, 0, 0, 0, 0, 0))};
  const std::vector<ReplicaScrape> after = {scraped("http://a", inferlab_text(0, 2, 0, 0, 20, 0)), unreachable("http://b")};
  const ReplicaReport r = replica_report(before, after, 4, 40);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_FALSE(r.rows[1].delta);
  EXPECT_NE(r.rows[1].error.find("after the run"), std::string::npos);
  EXPECT_FALSE(r.complete);
  EXPECT_FALSE(r.requests_match.has_value());
  const std::string text = format_replica_report(r);
  EXPECT_NE(text.find("http://b"), std::string::npos);
  EXPECT_NE(text.find("NOT COUNTED"), std::string::npos) << text;
  EXPECT_NE(text.find("sum (partial)"), std::string::npos) << text;
  EXPECT_NE(text.find("unknown"), std::string::npos) << text;
  const nlohmann::json j = replica_report_json(r);
  EXPECT_EQ(j["rows"].size(), 2u);
  EXPECT_TRUE(j["rows"][1]["error"].is_string());
  EXPECT_TRUE(j["requests_match"].is_null());
  EXPECT_EQ(j["complete"], false);
}

TEST(ReplicaReport, RestartedReplicaIsMarked) {
  // The counters went down: the replica restarted mid-run, its counts before the restart are lost.
  const ReplicaReport r = replica_report({scraped("http://a", inferlab_text(5, 5, 0, 0, 100, 10))},
                                         {scraped("http://a", inferlab_text(1, 0, 0, 0, 5, 1))}, 1, 5);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_FALSE(r.rows[0].delta);
  EXPECT_NE(r.rows[0].error.find("restarted"), std::string::npos);
  EXPECT_FALSE(r.complete);
}

}  // namespace
}  // namespace inferlab::lab
