#include "inferlab/lab/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>

#include "inferlab/util/error.h"

namespace inferlab::lab {
namespace {

TEST(PrometheusText, LabelValuesUnescapeBackslashQuoteAndNewline) {
  const auto text = parse_prometheus_text("m{a=\"x\\\\y\",b=\"say \\\"hi\\\"\",c=\"two\\nlines\",d=\"a,b}c\"} 1\n");
  ASSERT_EQ(text.samples.size(), 1u);
  const auto& s = text.samples[0];
  EXPECT_EQ(s.label("a"), "x\\y");
  EXPECT_EQ(s.label("b"), "say \"hi\"");
  EXPECT_EQ(s.label("c"), "two\nlines");
  EXPECT_EQ(s.label("d"), "a,b}c");  // commas and braces inside quotes belong to the value
  // Written back as the format does: the same text, and it parses to the same labels.
  EXPECT_EQ(prometheus_labels(s.labels), "{a=\"x\\\\y\",b=\"say \\\"hi\\\"\",c=\"two\\nlines\",d=\"a,b}c\"}");
  EXPECT_EQ(parse_prometheus("m" + prometheus_labels(s.labels) + " 1\n")[0].labels, s.labels);
  EXPECT_EQ(prometheus_labels({}), "");
}

TEST(PrometheusText, HistogramSamplesBelongToTheirFamily) {
  const auto text = parse_prometheus_text(
      "# HELP ttft_seconds time to first token\n# TYPE ttft_seconds histogram\n"
      "ttft_seconds_bucket{le=\"0.1\"} 3\nttft_seconds_bucket{le=\"+Inf\"} 5\nttft_seconds_sum 1.25\nttft_seconds_count 5\n"
      "# TYPE tokens_total counter\ntokens_total 7\n# TYPE running gauge\nrunning 2\nother_count 4\n");
  ASSERT_EQ(text.samples.size(), 7u);
  EXPECT_EQ(text.type_of("ttft_seconds_bucket"), "histogram");
  EXPECT_EQ(text.type_of("ttft_seconds_sum"), "histogram");
  EXPECT_EQ(text.type_of("ttft_seconds_count"), "histogram");
  EXPECT_EQ(text.type_of("tokens_total"), "counter");
  EXPECT_EQ(text.type_of("running"), "gauge");
  EXPECT_EQ(text.type_of("other_count"), "untyped");  // a _count suffix alone makes no histogram
  EXPECT_DOUBLE_EQ(text.samples[1].value, 5);
  EXPECT_EQ(text.samples[1].label("le"), "+Inf");
  EXPECT_DOUBLE_EQ(text.samples[2].value, 1.25);
}

TEST(PrometheusText, SpecialValuesTimestampsAndExemplars) {
  const auto s = parse_prometheus("a NaN\nb +Inf\nc -Inf\nd 1.5e3 1700000000000\ne 2 # {trace_id=\"x\"} 1\nf{} 3\n");
  ASSERT_EQ(s.size(), 6u);
  EXPECT_TRUE(std::isnan(s[0].value));
  EXPECT_TRUE(std::isinf(s[1].value) && s[1].value > 0);
  EXPECT_TRUE(std::isinf(s[2].value) && s[2].value < 0);
  EXPECT_DOUBLE_EQ(s[3].value, 1500);
  EXPECT_DOUBLE_EQ(s[4].value, 2);
  EXPECT_TRUE(s[5].labels.empty());
  for (double v : {0.1, 1e-300, 123456789.125, -2.5}) {
    double back = 0;
    ASSERT_TRUE(parse_prometheus_number(prometheus_number(v), back));
    EXPECT_EQ(back, v);
  }
  EXPECT_EQ(prometheus_number(std::nan("")), "NaN");
  EXPECT_EQ(prometheus_number(-INFINITY), "-Inf");
  double v = 0;
  EXPECT_FALSE(parse_prometheus_number("0x10", v));
  EXPECT_FALSE(parse_prometheus_number("nan(1)", v));
  EXPECT_FALSE(parse_prometheus_number("", v));
}

TEST(PrometheusText, CommentsAndBlankLinesAreSkipped) {
  const auto text = parse_prometheus_text("# just a comment\n\n   \n#TYPE odd gauge\n# EOF\r\nx 1\r\n");
  ASSERT_EQ(text.samples.size(), 1u);
  EXPECT_EQ(text.samples[0].name, "x");
}

TEST(PrometheusText, MalformedLinesNameTheirNumber) {
  for (const auto& [input, why] : std::vector<std::pair<std::string, std::string>>{
           {"ok 1\nbad{a=\"1\" 2\n", "line 2"},
           {"x{a=1} 2\n", "expected label=\"value\""},
           {"x 1 2 3\n", "after the timestamp"},
           {"x 1 later\n", "the timestamp is not a number"},
           {"x{=\"v\"} 1\n", "a label without a name"},
           {"x one\n", "the value is not a number"}}) {
    try {
      parse_prometheus(input);
      FAIL() << "no error for " << input;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace inferlab::lab
