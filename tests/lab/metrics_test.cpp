// requests.csv and the report's metrics: the course's figures, goodput, malformed rows.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "inferlab/lab/metrics.h"
#include "inferlab/util/error.h"

using namespace inferlab::lab;

namespace {

const char* kCourseCsv =
    "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms\n"
    "r01,ok,0,400,128,20,92\n"
    "r02,ok,15,465,128,22,107\n"
    "r03,timeout,20,520,128,,\n";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const inferlab::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Report, CourseExampleGivesTheCourseFigures) {
  Summary s = summarize(parse_requests_csv(kCourseCsv, "requests.csv"));
  EXPECT_EQ(s.successful, 2u);
  EXPECT_EQ(s.requests, 3u);
  EXPECT_DOUBLE_EQ(s.window_s, 0.52);
  EXPECT_EQ(s.output_tokens, 42);
  std::string report = format_report(s);
  EXPECT_EQ(report.substr(0, report.find("Failed:")),
            "Success: 2/3\n"
            "Window: 0.520 s\n"
            "Successful output throughput: 80.77 token/s\n"
            "P50 TTFT: 92.00 ms (nearest rank, n=2)\n"
            "P95 TTFT: 107.00 ms (nearest rank, n=2)\n");
  EXPECT_NE(report.find("Failed: 1 (timeout 1)"), std::string::npos);
  // TPOT derived: (400-92)/19 and (450-107)/21.
  EXPECT_EQ(s.tpot.n, 2u);
  EXPECT_NEAR(s.tpot.mean, ((400.0 - 92) / 19 + (450.0 - 107) / 21) / 2, 1e-9);
  EXPECT_TRUE(s.tpot_derived);
  EXPECT_EQ(s.e2e.p50, 400);
  EXPECT_EQ(s.e2e.p99, 450);
  EXPECT_NEAR(s.request_throughput, 2 / 0.52, 1e-9);
}

TEST(Report, Goodput) {
  Summary s = summarize(parse_requests_csv(kCourseCsv, "x"), parse_slo("ttft_ms=100,tpot_ms=20"));
  EXPECT_EQ(s.slo_met, 1u);  // r01 (92 ms, 16.2 ms) meets it; r02's TTFT is 107
  EXPECT_NEAR(s.goodput, 1 / 0.52, 1e-9);
  EXPECT_NE(format_report(s).find("Goodput: 1.92 req/s (1/3 requests met TTFT <= 100 ms, TPOT <= 20 ms)"),
            std::string::npos);
  EXPECT_EQ(summarize(parse_requests_csv(kCourseCsv, "x"), parse_slo("e2e_ms=450")).slo_met, 2u);
  EXPECT_NE(error_of([] { parse_slo("ttft=abc"); }).find("positive number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_slo("speed=3"); }).find("unknown key 'speed'"), std::string::npos);
}

TEST(Report, EdgeCases) {
  EXPECT_EQ(error_of([] { summarize(parse_requests_csv("", "x")); }), "No requests recorded.");
  EXPECT_EQ(error_of([] { summarize(parse_requests_csv(
                              "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms\n", "x")); }),
            "No requests recorded.");
  EXPECT_EQ(error_of([] {
              summarize(parse_requests_csv("request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms\n"
                                           "a,ok,5,5,1,1,1\n", "x"));
            }),
            "The measurement window must be positive.");
  // All failed: the counts and a zero throughput, no TTFT lines (the course prints none).
  Summary failed = summarize(parse_requests_csv(
      "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms\na,timeout,0,100,5,,\nb,http_500,0,50,5,,\n",
      "x"));
  std::string report = format_report(failed);
  EXPECT_EQ(report.substr(0, report.find("Failed")),
            "Success: 0/2\nWindow: 0.100 s\nSuccessful output throughput: 0.00 token/s\n");
  EXPECT_NE(report.find("Failed: 2 (http_500 1, timeout 1)"), std::string::npos);
  // A successful row without ttft: counted, but not in the TTFT percentiles.
  Summary no_ttft = summarize(parse_requests_csv(
      "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms\na,ok,0,100,5,10,\nb,ok,0,200,5,10,30\n", "x"));
  EXPECT_EQ(no_ttft.ttft.n, 1u);
  EXPECT_EQ(no_ttft.output_tokens, 20);
  EXPECT_NE(format_report(no_ttft).find("P50 TTFT: 30.00 ms (nearest rank, n=1)"), std::string::npos);
}

TEST(Report, MalformedRowsNameTheirLine) {
  const std::string header = "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms\n";
  EXPECT_EQ(error_of([&] { parse_requests_csv(header + "a,ok,0,1,2,3,4\nb,ok,0,1\n", "req.csv"); }),
            "req.csv line 3: 4 fields, but the header has 7 columns");
  EXPECT_EQ(error_of([&] { parse_requests_csv(header + "a,ok,zero,1,2,3,4\n", "req.csv"); }),
            "req.csv line 2: start_ms is not a number: 'zero'");
  EXPECT_EQ(error_of([&] { parse_requests_csv(header + "a,ok,0,1,2,3.5,4\n", "req.csv"); }),
            "req.csv line 2: output_tokens is not a number: '3.5'");
  EXPECT_EQ(error_of([&] { parse_requests_csv(header + "a,ok,0,10,2,,4\n", "req.csv"); }),
            "req.csv line 2: output_tokens is empty for a successful request");
  EXPECT_NE(error_of([&] { parse_requests_csv(header + "a,ok,0,1,2,3,4\nb,o\"k,0,1,2,3,4\n", "req.csv"); })
                .find("req.csv line 3: malformed CSV"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_requests_csv(header + "a,ok,0,1,2,3,\"4\n", "req.csv"); }).find("line 2"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_requests_csv("request_id,status\nx,ok\n", "req.csv"); })
                .find("req.csv line 1: the header has no 'start_ms' column"),
            std::string::npos);
}

TEST(Report, ExtraColumnsQuotedFieldsAndLineNumbersAcrossEmbeddedNewlines) {
  std::string text =
      "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms,gpu,error\n"
      "a,ok,0,100,5,10,20,\"H100, SXM\",\n"
      "b,error,0,50,5,,,x,\"server said \"\"no\"\",\nthen closed\"\n"
      "c,ok,0,bad,5,10,20,x,\n";
  EXPECT_EQ(error_of([&] { parse_requests_csv(text, "r.csv"); }), "r.csv line 5: end_ms is not a number: 'bad'");
  auto records = parse_requests_csv(text.substr(0, text.rfind("c,ok")), "r.csv");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].error, "server said \"no\",\nthen closed");
}

TEST(Report, CsvRoundTrip) {
  std::vector<RequestRecord> records(2);
  records[0] = {"r1", "ok", 0.5, 120.25, 16, 4, 30.125, 30.0417, {29.5, 30, 31.25}, true, "", 0};
  records[1] = {"r2", "http_400", 1, 3, 16, std::nullopt, std::nullopt, std::nullopt, {}, true,
                "bad \"max_tokens\", must be > 0\nreally", 0};
  std::string text = requests_csv(records);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms,tpot_ms,itl_ms,error,"
            "server_queue_ms,server_prefill_ms,server_decode_ms,server_ttft_ms,cached_tokens,preemptions");
  auto back = parse_requests_csv(text, "x");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].itl_ms, (std::vector<double>{29.5, 30, 31.25}));
  EXPECT_DOUBLE_EQ(*back[0].ttft_ms, 30.125);
  EXPECT_EQ(back[1].error, records[1].error);
  EXPECT_FALSE(back[1].output_tokens);
  Summary s = summarize(back);
  EXPECT_EQ(s.itl.n, 3u);
  EXPECT_EQ(s.itl.p50, 30);
}

TEST(Report, ServerTimingsColumnsRoundTrip) {
  std::vector<RequestRecord> records(2);
  records[0] = {"r1", "ok", 0, 100, 20, 4, 30.5, std::nullopt, {}, true, "", 0};
  records[0].server = {.queue_ms = 1.25, .prefill_ms = 20.125, .decode_ms = 60, .ttft_ms = 21.375,
                       .cached_tokens = 16, .preemptions = 1};
  records[1] = {"r2", "ok", 0, 90, 12, 4, 40, std::nullopt, {}, true, "", 0};  // a server without timings
  std::string text = requests_csv(records);
  EXPECT_NE(text.find(",1.25,20.125,60,21.375,16,1\n"), std::string::npos) << text;
  auto back = parse_requests_csv(text, "x");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(*back[0].server.queue_ms, 1.25);
  EXPECT_EQ(*back[0].server.prefill_ms, 20.125);
  EXPECT_EQ(*back[0].server.decode_ms, 60);
  EXPECT_EQ(*back[0].server.ttft_ms, 21.375);
  EXPECT_EQ(*back[0].server.cached_tokens, 16);
  EXPECT_EQ(*back[0].server.preemptions, 1);
  EXPECT_FALSE(back[1].server.queue_ms || back[1].server.ttft_ms || back[1].server.cached_tokens);
  EXPECT_NE(error_of([] {
              parse_requests_csv("request_id,status,start_ms,end_ms,output_tokens,server_queue_ms\nr,ok,0,1,1,fast\n", "q.csv");
            }).find("q.csv line 2: server_queue_ms is not a number: 'fast'"),
            std::string::npos);
}

TEST(Report, TtftSplitAndPrefixCache) {
  // Client TTFTs 30 and 50; the server saw 21.5 and 44: transport 8.5 and 6.
  const std::string csv =
      "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms,server_queue_ms,server_prefill_ms,"
      "server_ttft_ms,cached_tokens\n"
      "a,ok,0,100,20,5,30,1.5,20,21.5,16\n"
      "b,ok,0,120,40,5,50,4,40,44,0\n";
  Summary s = summarize(parse_requests_csv(csv, "x"));
  EXPECT_EQ(s.server_queue.n, 2u);
  EXPECT_DOUBLE_EQ(s.server_queue.mean, 2.75);
  EXPECT_DOUBLE_EQ(s.server_prefill.mean, 30);
  EXPECT_EQ(s.transport.n, 2u);
  EXPECT_DOUBLE_EQ(s.transport.mean, 7.25);
  EXPECT_EQ(s.cached_tokens, 16);
  EXPECT_EQ(s.cache_reported_input, 60);
  std::string report = format_report(s);
  EXPECT_NE(report.find(" queue           2      2.75      1.50"), std::string::npos) << report;
  EXPECT_NE(report.find(" transport       2      7.25      6.00"), std::string::npos) << report;
  EXPECT_NE(report.find("Prefix cache: 16 of 60 prompt tokens (26.7%) were cached (2 requests reported cached_tokens)"),
            std::string::npos)
      << report;
  // Old CSVs (no server columns): the report is what it was, no split, no prefix-cache line.
  std::string old = format_report(summarize(parse_requests_csv(
      "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms\na,ok,0,100,20,5,30\n", "x")));
  EXPECT_EQ(old.find("queue"), std::string::npos);
  EXPECT_EQ(old.find("Prefix cache"), std::string::npos);
}

// Multi-turn runs: conversation_id and turn columns (only when some row has them), and per turn the
// TTFT, the mean prompt and the share of it the server's prefix cache held.
TEST(Report, MultiTurnColumnsAndPerTurnFigures) {
  const std::string csv =
      "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms,cached_tokens,conversation_id,turn\n"
      "r1,ok,0,100,10,3,20,0,c1,1\n"
      "r2,ok,0,110,10,3,40,0,c2,1\n"
      "r3,ok,100,200,23,3,10,13,c1,2\n"
      "r4,http_500,110,120,,,,,c2,2\n"
      "r5,skipped,120,120,,,,,c2,3\n"
      "r6,ok,200,300,36,3,12,26,c1,3\n";
  const auto records = parse_requests_csv(csv, "x");
  EXPECT_EQ(records[2].conversation_id, "c1");
  EXPECT_EQ(records[2].turn.value_or(0), 2);
  const std::string written = requests_csv(records);
  EXPECT_NE(written.find("preemptions,conversation_id,turn\n"), std::string::npos) << written;
  EXPECT_NE(written.find(",c2,3\n"), std::string::npos) << written;
  Summary s = summarize(records);
  EXPECT_EQ(s.conversations, 2u);
  ASSERT_EQ(s.turns.size(), 3u);
  EXPECT_EQ(s.turns[0].requests, 2u);
  EXPECT_EQ(s.turns[0].ttft.p50, 20);
  EXPECT_EQ(s.turns[0].ttft.p95, 40);
  EXPECT_EQ(s.turns[1].successful, 1u);
  EXPECT_EQ(s.turns[1].cached_tokens, 13);
  EXPECT_EQ(s.turns[1].cache_reported_input, 23);
  EXPECT_DOUBLE_EQ(s.turns[2].mean_input_tokens, 36);
  EXPECT_EQ(s.failures.at("skipped"), 1u);
  const std::string report = format_report(s);
  EXPECT_NE(report.find("Multi-turn: 2 conversations"), std::string::npos) << report;
  EXPECT_NE(report.find("1          2     2       20.00       40.00          10.0      0.0%"), std::string::npos) << report;
  EXPECT_NE(report.find("2          2     1       10.00       10.00          23.0     56.5%"), std::string::npos) << report;
  EXPECT_NE(report.find("Prefix cache: 39 of 79 prompt tokens (49.4%)"), std::string::npos) << report;
  const nlohmann::json j = summary_json(s);
  EXPECT_EQ(j["multi_turn"]["conversations"], 2);
  EXPECT_EQ(j["multi_turn"]["turns"][1]["prefix_cache"]["cached_tokens"], 13);
  EXPECT_DOUBLE_EQ(j["prefix_cache"]["hit_rate"].get<double>(), 39.0 / 79.0);
  // A CSV of single requests keeps its columns.
  EXPECT_EQ(requests_csv(parse_requests_csv(kCourseCsv, "x")).find("conversation_id"), std::string::npos);
}
