// Anthropic's message writer (responses/anthropic_message.cpp) over a Completion fed by hand (the
// real Qwen tokenizer, no model): the whole body and the named events for a text answer, a
// thinking model's thoughts and a Hermes tool call, stop_reason from the shared finish, and an error event.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "request_test_helpers.h"
#include "server/completion.h"
#include "server/response_writer.h"

namespace {

namespace api = inferlab::api;
using api::json;

using inferlab::api::test::qwen_text;

std::shared_ptr<api::Completion> completion_of(std::vector<std::string> stops, bool tools) {
  auto request = std::make_shared<api::ParsedRequest>();
  request->prompts = {qwen_text().tokenize("Hello", false)};
  request->stop = std::move(stops);
  if (tools) request->tool_format = api::make_hermes_format();
  auto completion = std::make_shared<api::Completion>(request, qwen_text(), 600, /*timings=*/false);
  completion->add_choice(0, std::make_shared<inferlab::RequestStream>());
  return completion;
}

struct Named {
  std::string event;
  json data;
};

// Feeds `text` token by token and then `finish` through the writer's stream; the events it wrote.
std::vector<Named> stream(api::Completion& completion, api::ResponseWriter& writer, const std::string& text,
                          inferlab::FinishReason finish) {
  std::string out;
  writer.stream_start(completion, out);
  api::Choice& choice = *completion.choices().front();
  std::vector<inferlab::StreamEvent> events;
  for (int32_t id : qwen_text().tokenize(text, false)) {
    inferlab::StreamEvent event;
    event.token = inferlab::SampledToken{.token = id};
    events.push_back(std::move(event));
  }
  inferlab::StreamEvent last;
  last.finish = finish;
  events.push_back(std::move(last));
  for (auto& event : events) {
    if (completion.all_done()) break;
    api::Delta delta;
    completion.absorb(choice, event, delta);
    writer.stream_delta(completion, choice, delta, out);
    if (delta.finished) writer.stream_finish(completion, choice, out);
  }
  writer.stream_end(completion, out);
  std::vector<Named> parsed;
  for (std::size_t at = 0; at < out.size();) {
    const std::size_t end = out.find("\n\n", at);
    const std::string block = out.substr(at, end - at);
    const std::size_t newline = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    EXPECT_EQ(block.compare(newline + 1, 6, "data: "), 0) << block;
    parsed.push_back({block.substr(7, newline - 7), json::parse(block.substr(newline + 7))});
    at = end + 2;
  }
  return parsed;
}

std::vector<std::string> names(const std::vector<Named>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.event);
  return out;
}

TEST(AnthropicMessage, TextAnswerWholeAndStreamed) {
  auto completion = completion_of({}, false);
  auto writer = api::anthropic_message_writer("demo");
  const auto events = stream(*completion, *writer, " world, hello", inferlab::FinishReason::length);
  EXPECT_EQ(names(events), (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                                      "content_block_delta", "content_block_delta", "content_block_stop",
                                                      "message_delta", "message_stop"}));
  std::string text;
  for (const auto& e : events) {
    EXPECT_EQ(e.data["type"], e.event);
    if (e.event == "content_block_delta") text += e.data["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(text, " world, hello");
  EXPECT_EQ(events[0].data["message"]["usage"]["input_tokens"], 1);
  EXPECT_EQ(events[7].data["delta"]["stop_reason"], "max_tokens");
  EXPECT_EQ(events[7].data["usage"]["output_tokens"], 3);
  const json body = writer->body(*completion);
  EXPECT_EQ(body["type"], "message");
  EXPECT_EQ(body["id"], events[0].data["message"]["id"]);
  EXPECT_EQ(body["content"], json::parse(R"([{"type": "text", "text": " world, hello"}])"));
  EXPECT_EQ(body["stop_reason"], "max_tokens");
  EXPECT_EQ(body["stop_sequence"], nullptr);
  EXPECT_EQ(body["usage"], json({{"input_tokens", 1}, {"output_tokens", 3}}));
}

TEST(AnthropicMessage, StopStringIsTheStopSequence) {
  auto completion = completion_of({"lo"}, false);
  auto writer = api::anthropic_message_writer("demo");
  const auto events = stream(*completion, *writer, " world, hello there", inferlab::FinishReason::stop);
  EXPECT_EQ(events[events.size() - 2].data["delta"], json({{"stop_reason", "stop_sequence"}, {"stop_sequence", "lo"}}));
  const json body = writer->body(*completion);
  EXPECT_EQ(body["content"][0]["text"], " world, hel");
  EXPECT_EQ(body["stop_reason"], "stop_sequence");
  EXPECT_EQ(body["stop_sequence"], "lo");
}

TEST(AnthropicMessage, ToolCallIsAToolUseBlockWithItsInputAsJsonDeltas) {
  auto completion = completion_of({}, true);
  auto writer = api::anthropic_message_writer("demo");
  const auto events = stream(*completion, *writer, "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                             inferlab::FinishReason::stop);
  EXPECT_EQ(names(events).front(), "message_start");
  std::string partial;
  json start;
  for (const auto& e : events) {
    if (e.event == "content_block_start" && e.data["content_block"]["type"] == "tool_use") start = e.data;
    if (e.event == "content_block_delta" && e.data["delta"]["type"] == "input_json_delta") {
      EXPECT_EQ(e.data["index"], start["index"]);
      partial += e.data["delta"]["partial_json"].get<std::string>();
    }
  }
  EXPECT_EQ(start["index"], 1);  // after the text block
  EXPECT_EQ(start["content_block"]["name"], "get_weather");
  EXPECT_EQ(start["content_block"]["input"], json::object());
  EXPECT_EQ(json::parse(partial), json({{"city", "Paris"}}));
  EXPECT_EQ(events[events.size() - 2].data["delta"]["stop_reason"], "tool_use");
  const json body = writer->body(*completion);
  ASSERT_EQ(body["content"].size(), 2u);
  EXPECT_EQ(body["content"][0], json({{"type", "text"}, {"text", "Sure."}}));
  EXPECT_EQ(body["content"][1]["type"], "tool_use");
  EXPECT_EQ(body["content"][1]["id"], start["content_block"]["id"]);
  EXPECT_EQ(body["content"][1]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(body["content"][1]["input"], json({{"city", "Paris"}}));
  EXPECT_EQ(body["stop_reason"], "tool_use");
}

TEST(AnthropicMessage, ThoughtsAreAThinkingBlockBeforeTheText) {
  auto completion = completion_of({}, false);
  auto request = std::make_shared<api::ParsedRequest>(completion->request());
  request->reasoning = api::ReasoningMarkers{};
  request->reasoning_start = api::ReasoningStart::may_open;
  request->separate_reasoning = true;
  completion = std::make_shared<api::Completion>(request, qwen_text(), 600, /*timings=*/false);
  completion->add_choice(0, std::make_shared<inferlab::RequestStream>());
  auto writer = api::anthropic_message_writer("demo");
  const auto events = stream(*completion, *writer, "<think>\nTwo and two.\n</think>\n\nFour.", inferlab::FinishReason::stop);
  std::string thinking, text;
  std::vector<std::string> order;  // block starts, the signature and stops, by index
  for (const auto& e : events) {
    if (e.event == "content_block_start")
      order.push_back(fmt::format("start {} {}", e.data["index"].get<int>(), e.data["content_block"]["type"].get<std::string>()));
    if (e.event == "content_block_stop") order.push_back(fmt::format("stop {}", e.data["index"].get<int>()));
    if (e.event != "content_block_delta") continue;
    const json& delta = e.data["delta"];
    if (delta["type"] == "thinking_delta") thinking += delta["thinking"].get<std::string>();
    if (delta["type"] == "text_delta") text += delta["text"].get<std::string>();
    if (delta["type"] == "signature_delta") order.push_back(fmt::format("signature {}", e.data["index"].get<int>()));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"start 0 thinking", "signature 0", "stop 0", "start 1 text", "stop 1"}));
  EXPECT_EQ(thinking, "Two and two.");
  EXPECT_EQ(text, "Four.");
  const json body = writer->body(*completion);
  EXPECT_EQ(body["content"], json::parse(R"([{"type": "thinking", "thinking": "Two and two.", "signature": ""},
                                             {"type": "text", "text": "Four."}])"));
  const int thought_tokens = static_cast<int>(qwen_text().tokenize("<think>\nTwo and two.\n</think>", false).size());
  EXPECT_EQ(body["usage"]["output_tokens_details"], json({{"thinking_tokens", thought_tokens}}));
  EXPECT_EQ(events[events.size() - 2].data["usage"], body["usage"]);
}

TEST(AnthropicMessage, AnErrorAfterTheHeadersIsAnErrorEvent) {
  auto writer = api::anthropic_message_writer("demo");
  std::string out;
  writer->stream_error(api::ApiError(503, "the queue is full", "", "overloaded", "server_error"), out);
  EXPECT_EQ(out, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"the queue is full\"}}\n\n");
}

}  // namespace
