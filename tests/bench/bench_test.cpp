// Unit tests of the measurement part: CSV, metrics (the course's numbers), SSE parser, chunk parsing.
#include <gtest/gtest.h>

#include <random>

#include "inferlab/bench/csv.h"
#include "inferlab/bench/load_generator.h"
#include "inferlab/bench/metrics.h"
#include "inferlab/bench/openai_client.h"
#include "inferlab/bench/sse.h"
#include "inferlab/util/error.h"

using namespace inferlab::bench;

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

TEST(Report, NearestRankMatchesTheCourseFormula) {
  std::vector<double> sorted;
  for (int i = 1; i <= 20; ++i) sorted.push_back(i);
  EXPECT_EQ(nearest_rank(sorted, 0.50), 10);
  EXPECT_EQ(nearest_rank(sorted, 0.95), 19);  // ceil(0.95 * 20) = 19 in double arithmetic
  EXPECT_EQ(nearest_rank(sorted, 0.99), 20);
  EXPECT_EQ(nearest_rank({7.0}, 0.5), 7);
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
            "request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms,tpot_ms,itl_ms,error");
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

TEST(Csv, BlankLinesAndBom) {
  auto rows = parse_csv("\xEF\xBB\xBF" "a,b\n\nc,d\r\n", "x");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].fields[0], "a");
  EXPECT_EQ(rows[1].fields[1], "d");
  EXPECT_EQ(rows[1].line, 3u);
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
}

// ---------------------------------------------------------------- SSE

namespace {
std::vector<SseEvent> parse_split(const std::string& stream, const std::vector<std::size_t>& cuts) {
  std::vector<SseEvent> events;
  SseParser parser([&](const SseEvent& e) { events.push_back(e); });
  std::size_t pos = 0;
  for (std::size_t cut : cuts) {
    parser.feed(std::string_view(stream).substr(pos, cut - pos));
    pos = cut;
  }
  parser.feed(std::string_view(stream).substr(pos));
  parser.finish();
  return events;
}
}  // namespace

TEST(Sse, EveryFieldKindAndLineEnding) {
  std::string stream =
      "\xEF\xBB\xBF: keep-alive comment\n"
      "data: {\"a\":1}\n\n"
      "event: ping\r\ndata:no-space\r\ndata:  two spaces\r\n\r\n"
      "id: 7\rdata: cr only\r\r"
      "retry: 100\nunknown: x\n\n"  // no data: not dispatched
      "data\n\n"                    // a field with no colon: empty data, dispatched
      "data: 中文🙂\n\n"
      "data: [DONE]\n\n"
      "data: never terminated";
  auto events = parse_split(stream, {});
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0].data, "{\"a\":1}");
  EXPECT_EQ(events[1].event, "ping");
  EXPECT_EQ(events[1].data, "no-space\n two spaces");
  EXPECT_EQ(events[2].data, "cr only");
  EXPECT_EQ(events[2].id, "7");
  EXPECT_EQ(events[3].data, "");
  EXPECT_EQ(events[3].id, "7");  // the last event id persists
  EXPECT_EQ(events[4].data, "中文🙂");
  EXPECT_EQ(events[5].data, "[DONE]");
}

TEST(Sse, SplitAtEveryBytePositionGivesTheSameEvents) {
  std::string stream =
      "\xEF\xBB\xBF" "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\r\n\r\n"
      ": comment\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"中文🙂\"}}]}\n\n"
      "event: e\rdata: a\rdata: b\r\r"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\r\n\r\n"
      "data: [DONE]\n\n";
  auto whole = parse_split(stream, {});
  ASSERT_EQ(whole.size(), 5u);
  for (std::size_t i = 0; i <= stream.size(); ++i) {
    auto two = parse_split(stream, {i});
    ASSERT_EQ(two.size(), whole.size()) << "split at " << i;
    for (std::size_t k = 0; k < whole.size(); ++k) {
      EXPECT_EQ(two[k].data, whole[k].data) << "split at " << i;
      EXPECT_EQ(two[k].event, whole[k].event) << "split at " << i;
    }
    for (std::size_t j = i; j <= stream.size(); j += 7) {  // and at every pair (i, j) on a stride
      auto three = parse_split(stream, {i, j});
      ASSERT_EQ(three.size(), whole.size()) << "split at " << i << "," << j;
      for (std::size_t k = 0; k < whole.size(); ++k) EXPECT_EQ(three[k].data, whole[k].data);
    }
  }
  // One byte at a time.
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < stream.size(); ++i) every.push_back(i);
  auto bytes = parse_split(stream, every);
  ASSERT_EQ(bytes.size(), whole.size());
  for (std::size_t k = 0; k < whole.size(); ++k) EXPECT_EQ(bytes[k].data, whole[k].data);
}

TEST(Sse, EventDispatchedOnlyAtItsBlankLine) {
  std::vector<SseEvent> events;
  SseParser parser([&](const SseEvent& e) { events.push_back(e); });
  parser.feed("data: x\n");
  EXPECT_TRUE(events.empty());
  parser.feed("\r");
  EXPECT_EQ(events.size(), 1u);  // \r alone ends the line
  parser.feed("\n");             // ... and the \n after it is not a second blank line
  parser.feed("data: y\n");
  EXPECT_TRUE(parser.finish());  // an unterminated event is dropped at the end
  EXPECT_EQ(events.size(), 1u);
}

TEST(Sse, OverlongLineIsAnError) {
  SseParser parser([](const SseEvent&) {}, 64);
  EXPECT_THROW(parser.feed("data: " + std::string(100, 'x')), inferlab::Error);
}

TEST(StreamChunk, ChatCompletionsUsageErrorsDone) {
  EXPECT_TRUE(parse_stream_chunk("[DONE]").done);
  auto role = parse_stream_chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})");
  EXPECT_EQ(role.content, "");
  auto piece = parse_stream_chunk(R"({"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]})");
  EXPECT_EQ(piece.content, "Hi");
  EXPECT_EQ(parse_stream_chunk(R"({"choices":[{"text":" there","index":0}]})").content, " there");
  auto usage = parse_stream_chunk(R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}})");
  EXPECT_EQ(*usage.prompt_tokens, 9);
  EXPECT_EQ(*usage.completion_tokens, 4);
  EXPECT_EQ(*parse_stream_chunk(R"({"error":{"message":"boom","type":"x"}})").error, "boom");
  EXPECT_THROW(parse_stream_chunk("{not json"), inferlab::Error);
  EXPECT_EQ(error_message_from_body(R"({"error":{"message":"max_tokens must be positive"}})"),
            "max_tokens must be positive");
  EXPECT_EQ(error_message_from_body("plain text\n"), "plain text");
}

TEST(LoadGenerator, ArrivalsArePoissonWithTheGivenRate) {
  auto offsets = arrival_offsets(20000, 50.0, 1.0, 1);
  EXPECT_EQ(offsets[0], 0);
  for (std::size_t i = 1; i < offsets.size(); ++i) ASSERT_GE(offsets[i], offsets[i - 1]);
  double mean_gap = offsets.back() / (offsets.size() - 1);
  EXPECT_NEAR(mean_gap, 1.0 / 50, 0.001);
  // Poisson gaps: standard deviation equals the mean; burstiness 4 makes them regular (cv 0.5).
  auto cv = [](const std::vector<double>& t) {
    double mean = t.back() / (t.size() - 1), var = 0;
    for (std::size_t i = 1; i < t.size(); ++i) var += (t[i] - t[i - 1] - mean) * (t[i] - t[i - 1] - mean);
    return std::sqrt(var / (t.size() - 1)) / mean;
  };
  EXPECT_NEAR(cv(offsets), 1.0, 0.05);
  EXPECT_NEAR(cv(arrival_offsets(20000, 50.0, 4.0, 1)), 0.5, 0.03);
  EXPECT_EQ(arrival_offsets(3, 0, 1, 1), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(arrival_offsets(50, 10, 1, 7), arrival_offsets(50, 10, 1, 7));  // seeded
}

TEST(LoadGenerator, RequestBodiesAskForUsage) {
  ServeOptions options;
  options.model = "m";
  options.ignore_eos = true;
  BenchPrompt prompt{"hello", std::nullopt, 16};
  auto chat = nlohmann::json::parse(request_body(options, prompt));
  EXPECT_EQ(chat["messages"][0]["content"], "hello");
  EXPECT_EQ(chat["stream"], true);
  EXPECT_EQ(chat["stream_options"]["include_usage"], true);
  EXPECT_EQ(chat["max_tokens"], 16);
  EXPECT_EQ(chat["ignore_eos"], true);
  options.endpoint = "completions";
  EXPECT_EQ(nlohmann::json::parse(request_body(options, prompt))["prompt"], "hello");
  auto words = random_prompts(3, 12, 5, 42, nullptr);
  EXPECT_EQ(std::count(words[0].text.begin(), words[0].text.end(), ' '), 11);
  EXPECT_EQ(random_prompts(3, 12, 5, 42, nullptr)[2].text, words[2].text);
}

TEST(OpenAiClient, ApiRoot) {
  EXPECT_EQ(api_root("http://127.0.0.1:30000"), "http://127.0.0.1:30000/v1");
  EXPECT_EQ(api_root("http://127.0.0.1:30000/v1/"), "http://127.0.0.1:30000/v1");
  EXPECT_NE(error_of([] { api_root("127.0.0.1:30000"); }).find("http://"), std::string::npos);
}

// ---------------------------------------------------------------- latency experiment helpers

#include "inferlab/bench/latency.h"

TEST(Latency, LinearFitIsLeastSquares) {
  LinearFit fit = fit_line({8, 16, 32, 64}, {0.5 + 8e-3, 0.5 + 16e-3, 0.5 + 32e-3, 0.5 + 64e-3});
  EXPECT_NEAR(fit.slope, 1e-3, 1e-12);
  EXPECT_NEAR(fit.intercept, 0.5, 1e-12);
  // numpy.polyfit([1,2,3,4], [1,3,2,5], 1) = [1.1, 0]
  fit = fit_line({1, 2, 3, 4}, {1, 3, 2, 5});
  EXPECT_NEAR(fit.slope, 1.1, 1e-12);
  EXPECT_NEAR(fit.intercept, 0.0, 1e-12);
  EXPECT_THROW(fit_line({3, 3}, {1, 2}), inferlab::Error);
}

TEST(Latency, MonotonicAllowsSmallWobbleOnly) {
  std::string why;
  EXPECT_TRUE(increases_monotonically({1.0, 1.2, 1.17, 1.5}, kLatencyWobble, &why));  // -2.5 %: wobble
  EXPECT_FALSE(increases_monotonically({1.0, 1.2, 1.1, 1.5}, kLatencyWobble, &why));  // -8 %
  EXPECT_NE(why.find("point 3"), std::string::npos);
  EXPECT_FALSE(increases_monotonically({1.0, 0.99, 0.98, 1.0}, kLatencyWobble, &why));  // flat: last not above first
}

TEST(Latency, CourseTablePadsByCharactersLikePython) {
  LatencySweep sweep;
  sweep.points = {{8, 0.12345, 0, 0, {}}, {256, 1.5, 0, 0, {}}};
  sweep.fit = {0.0012345, 0.1};
  // print(f"{'输入长度':<10}{'推理延迟(秒)':<15}"); print(f"{length:<10}{latency:.4f}"); slope with :.6f
  EXPECT_EQ(course_table(sweep),
            "输入长度      推理延迟(秒)        \n"
            "8         0.1235\n"
            "256       1.5000\n"
            "\n线性拟合斜率（秒/输入 token）: 0.001234\n");
  std::string svg = latency_svg(sweep, "a <b>");
  EXPECT_NE(svg.find("a &lt;b&gt;"), std::string::npos);
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
}
