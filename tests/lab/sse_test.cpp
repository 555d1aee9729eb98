// The incremental server-sent-events parser.
#include <gtest/gtest.h>

#include "inferlab/lab/sse.h"
#include "inferlab/util/error.h"

using namespace inferlab::lab;

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
