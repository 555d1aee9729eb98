// The harmony splitter (gpt-oss's channels): analysis as reasoning, final as content, messages to
// functions.NAME as tool calls, at every chunking of the stream.
#include <gtest/gtest.h>

#include "server/harmony.h"
#include "server/reasoning.h"

namespace inferlab::api {
namespace {

constexpr const char* kThoughtsThenAnswer =
    "<|channel|>analysis<|message|>The user asks 2 + 2. That is 4.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>It is 4.<|return|>";
constexpr const char* kCall =
    "<|channel|>analysis<|message|>Need the weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>";

// What one run of the splitter gave, the text fed in the given pieces.
struct Output {
  std::string content, reasoning;
  std::vector<ToolCall> calls;
  json deltas = json::array();
};

Output split(const std::vector<std::string>& pieces, bool calls = true, bool separate = true) {
  HarmonySplitter splitter(calls, separate);
  Output run;
  for (const std::string& piece : pieces) run.content += splitter.feed(piece, run.reasoning, run.deltas);
  run.content += splitter.finish(run.reasoning, run.calls);
  return run;
}

// Every way of cutting the text in two, and the text fed one byte at a time.
std::vector<std::vector<std::string>> chunkings(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  for (std::size_t cut = 0; cut <= text.size(); ++cut) out.push_back({text.substr(0, cut), text.substr(cut)});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  out.push_back(bytes);
  return out;
}

TEST(Harmony, AnalysisIsReasoningAndFinalIsContentAtEveryChunking) {
  for (const auto& pieces : chunkings(kThoughtsThenAnswer)) {
    const Output run = split(pieces);
    EXPECT_EQ(run.reasoning, "The user asks 2 + 2. That is 4.");
    EXPECT_EQ(run.content, "It is 4.");
    EXPECT_TRUE(run.calls.empty());
    EXPECT_TRUE(run.deltas.empty());
  }
}

TEST(Harmony, TheAnswerStreamsBeforeItEnds) {
  // Nothing of the answer waits for <|return|>: only a possible marker's beginning is held back.
  HarmonySplitter splitter(false, true);
  std::string reasoning;
  json deltas = json::array();
  EXPECT_EQ(splitter.feed("<|channel|>analysis<|message|>Thinking", reasoning, deltas), "");
  EXPECT_EQ(reasoning, "Thinking");
  EXPECT_TRUE(splitter.in_reasoning());
  EXPECT_EQ(splitter.feed("<|end|><|start|>assistant<|channel|>final<|message|>Hello wor", reasoning, deltas), "Hello wor");
  EXPECT_FALSE(splitter.in_reasoning());
  EXPECT_EQ(splitter.feed("ld<|", reasoning, deltas), "ld");  // "<|" may be <|return|>
  EXPECT_EQ(splitter.feed("return|>", reasoning, deltas), "");
  std::vector<ToolCall> calls;
  EXPECT_EQ(splitter.finish(reasoning, calls), "");
  EXPECT_EQ(reasoning, "Thinking");
}

TEST(Harmony, ACommentaryMessageToAFunctionIsAToolCallAtEveryChunking) {
  for (const auto& pieces : chunkings(kCall)) {
    const Output run = split(pieces);
    EXPECT_EQ(run.reasoning, "Need the weather.");
    EXPECT_EQ(run.content, "");
    ASSERT_EQ(run.calls.size(), 1u);
    EXPECT_EQ(run.calls[0].name, "get_weather");
    EXPECT_EQ(run.calls[0].arguments, "{\"city\": \"Paris\"}");
    EXPECT_EQ(run.calls[0].id.rfind("call_", 0), 0u);
    // Announced once, whole: a header entry and an arguments entry, as OpenAI streams them.
    ASSERT_EQ(run.deltas.size(), 2u);
    EXPECT_EQ(run.deltas[0]["index"], 0);
    EXPECT_EQ(run.deltas[0]["id"], run.calls[0].id);
    EXPECT_EQ(run.deltas[0]["function"]["name"], "get_weather");
    EXPECT_EQ(run.deltas[1]["function"]["arguments"], "{\"city\": \"Paris\"}");
  }
}

TEST(Harmony, TheRecipientMayFollowTheRole) {
  // As gpt-oss's template renders earlier calls: <|start|>assistant to=functions.f<|channel|>commentary json.
  const Output run = split({"<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{}<|call|>"});
  ASSERT_EQ(run.calls.size(), 1u);
  EXPECT_EQ(run.calls[0].name, "get_weather");
  EXPECT_EQ(run.calls[0].arguments, "{}");
}

TEST(Harmony, ATwoCallsAnswerGivesTwoCalls) {
  const Output run = split({"<|channel|>commentary to=functions.a <|constrain|>json<|message|>{\"x\":1}<|end|>"
                         "<|start|>assistant<|channel|>commentary to=functions.b <|constrain|>json<|message|>{\"y\":2}<|call|>"});
  ASSERT_EQ(run.calls.size(), 2u);
  EXPECT_EQ(run.calls[0].name, "a");
  EXPECT_EQ(run.calls[1].name, "b");
  ASSERT_EQ(run.deltas.size(), 4u);
  EXPECT_EQ(run.deltas[2]["index"], 1);
}

TEST(Harmony, AToolCallWrittenInsideTheAnalysisIsNotACall) {
  const std::string text =
      "<|channel|>analysis<|message|>I could write <|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\": \"Rome\"} but I will not.<|end|><|start|>assistant<|channel|>final<|message|>No call.<|return|>";
  for (const auto& pieces : chunkings(text)) {
    const Output run = split(pieces);
    EXPECT_TRUE(run.calls.empty());
    EXPECT_TRUE(run.deltas.empty());
    EXPECT_EQ(run.reasoning,
              "I could write <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Rome\"} "
              "but I will not.");
    EXPECT_EQ(run.content, "No call.");
  }
}

TEST(Harmony, WithoutToolsAMessageToAFunctionIsContent) {
  const Output run = split({"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}<|call|>"}, false);
  EXPECT_TRUE(run.calls.empty());
  EXPECT_EQ(run.content, "{\"a\":1}");
}

TEST(Harmony, APreambleToTheUserIsContent) {
  const Output run = split({"<|channel|>commentary<|message|>Let me check. <|end|><|start|>assistant<|channel|>final<|message|>Done.<|return|>"});
  EXPECT_EQ(run.content, "Let me check. Done.");
  EXPECT_EQ(run.reasoning, "");
}

TEST(Harmony, MaxTokensInsideTheAnalysisGivesNoHalfAnswer) {
  const Output run = split({"<|channel|>analysis<|message|>Still think"});
  EXPECT_EQ(run.reasoning, "Still think");
  EXPECT_EQ(run.content, "");
}

TEST(Harmony, ACallCutShortIsNotACall) {
  const Output run = split({"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"city\": \"Pa"});
  EXPECT_TRUE(run.calls.empty());
  EXPECT_TRUE(run.deltas.empty());
  EXPECT_EQ(run.content, "{\"city\": \"Pa");
}

TEST(Harmony, MalformedArgumentsStayContent) {
  const Output run = split({"<|channel|>commentary to=functions.f <|constrain|>json<|message|>not json<|call|>"});
  EXPECT_TRUE(run.calls.empty());
  EXPECT_EQ(run.content, "not json");
}

TEST(Harmony, RawReasoningFormatPutsTheAnalysisInTheContent) {
  const Output run = split({kThoughtsThenAnswer}, true, false);
  EXPECT_EQ(run.reasoning, "");
  EXPECT_EQ(run.content, "The user asks 2 + 2. That is 4.It is 4.");
}

TEST(Harmony, TextWithNoHeaderIsShownAsItIs) {
  const Output run = split({"plain words"});
  EXPECT_EQ(run.content, "plain words");
}

TEST(Harmony, APromptThatOpenedTheAnswerStartsInIt) {
  HarmonySplitter splitter(false, true, true);
  std::string reasoning;
  json deltas = json::array();
  EXPECT_EQ(splitter.feed("Straight to it.<|return|>", reasoning, deltas), "Straight to it.");
  EXPECT_EQ(reasoning, "");
}

TEST(Harmony, ParseHarmonySplitsAWholeAnswer) {
  const HarmonyParsed parsed = parse_harmony(kCall, true);
  EXPECT_EQ(parsed.reasoning, "Need the weather.");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
}

// The server's view of a harmony template: its markers, where a prompt leaves the output, and the
// span the engine's grammar waits out.
TEST(Harmony, TemplatesPromptsAndTheEngineSpan) {
  const auto markers = reasoning_markers_for("{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content }}");
  ASSERT_TRUE(markers);
  EXPECT_TRUE(markers->harmony);
  EXPECT_EQ(markers->start, "<|channel|>");
  EXPECT_EQ(markers->end, "<|message|>");
  EXPECT_FALSE(reasoning_markers_for("<|im_start|>{{ message.content }}"));
  EXPECT_EQ(reasoning_start_of("<|start|>user<|message|>Hi<|end|><|start|>assistant", *markers), ReasoningStart::open);
  EXPECT_EQ(reasoning_start_of("<|start|>assistant<|channel|>final<|message|>", *markers), ReasoningStart::closed);
  const auto span = engine_reasoning_span(ReasoningStart::open, *markers, {200005, 200008});
  ASSERT_TRUE(span);
  EXPECT_TRUE(span->open);
  EXPECT_EQ(span->header_token, 200005);
  EXPECT_EQ(span->end_token, 200008);
  EXPECT_EQ(span->end, "final");
  EXPECT_FALSE(engine_reasoning_span(ReasoningStart::closed, *markers, {200005, 200008}));
  EXPECT_FALSE(engine_reasoning_span(ReasoningStart::open, *markers, {-1, 200008}));  // no ids: no span
}

}  // namespace
}  // namespace inferlab::api
