// Reasoning split out of streamed text: every way of cutting the same answer into pieces gives the
// same thoughts and content; where a prompt leaves the output; the markers of a thinking template.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/reasoning.h"

using namespace inferlab;
using namespace inferlab::api;

namespace {

struct Split {
  std::string reasoning, content;
};

Split split_in_pieces(std::string_view text, ReasoningStart start, std::size_t piece) {
  ReasoningSplitter splitter(ReasoningMarkers{}, start);
  Split out;
  for (std::size_t at = 0; at < text.size(); at += piece) out.content += splitter.feed(text.substr(at, piece), out.reasoning);
  out.content += splitter.finish(out.reasoning);
  return out;
}

void expect_split(std::string_view text, ReasoningStart start, const std::string& reasoning, const std::string& content) {
  for (std::size_t piece = 1; piece <= text.size() + 1; ++piece) {
    Split got = split_in_pieces(text, start, piece);
    EXPECT_EQ(got.reasoning, reasoning) << "pieces of " << piece << " bytes: " << text;
    EXPECT_EQ(got.content, content) << "pieces of " << piece << " bytes: " << text;
  }
}

}  // namespace

TEST(ReasoningSplitter, ThoughtsAndAnswerApartInEveryChunking) {
  expect_split("<think>\nLet me see.\n2 + 2 = 4\n</think>\n\nIt is 4.", ReasoningStart::may_open, "Let me see.\n2 + 2 = 4", "It is 4.");
  expect_split("<think>a < b </thin k></think>answer", ReasoningStart::may_open, "a < b </thin k>", "answer");
  expect_split("\n<think>not first</think>", ReasoningStart::may_open, "", "\n<think>not first</think>");
  expect_split("Just an answer, <think> inside it.", ReasoningStart::may_open, "", "Just an answer, <think> inside it.");
  expect_split("<thin", ReasoningStart::may_open, "", "<thin");  // a cut marker at the end is the answer's text
  expect_split("still thinking\n</think>\n\nanswer\n", ReasoningStart::open, "still thinking", "answer\n");
  expect_split("<think>cut short by max_tokens  \n", ReasoningStart::may_open, "cut short by max_tokens", "");
  expect_split("thoughts </thi", ReasoningStart::open, "thoughts </thi", "");
  expect_split("<think>x</think>as written", ReasoningStart::closed, "", "<think>x</think>as written");
  expect_split("\n\nafter a closed span", ReasoningStart::closed, "", "\n\nafter a closed span");
  expect_split("<think></think>\n\nempty thoughts", ReasoningStart::may_open, "", "empty thoughts");
}

TEST(ReasoningSplitter, InsideSaysWhetherTheAnswerHasStarted) {
  ReasoningSplitter splitter(ReasoningMarkers{}, ReasoningStart::may_open);
  std::string reasoning;
  EXPECT_FALSE(splitter.inside());
  splitter.feed("<think>", reasoning);
  EXPECT_TRUE(splitter.inside());
  splitter.feed("hm", reasoning);
  EXPECT_TRUE(splitter.inside());
  splitter.feed("</think>", reasoning);
  EXPECT_FALSE(splitter.inside());
  EXPECT_EQ(reasoning, "hm");
}

TEST(ReasoningStart, OnlyAMarkerAtThePromptsEndCounts) {
  const ReasoningMarkers markers;
  EXPECT_EQ(reasoning_start_of("<|im_start|>assistant\n", markers), ReasoningStart::may_open);
  EXPECT_EQ(reasoning_start_of("<｜Assistant｜><think>\n", markers), ReasoningStart::open);  // DeepSeek-R1 distills
  EXPECT_EQ(reasoning_start_of("<|im_start|>assistant\n<think>\n\n</think>\n\n", markers), ReasoningStart::closed);  // Qwen3, enable_thinking false
  // Earlier turns' thoughts, or a user quoting a marker, say nothing about this answer.
  EXPECT_EQ(reasoning_start_of("<think>\na\n</think>\n\nold answer<|im_end|>\n<|im_start|>assistant\n", markers), ReasoningStart::may_open);
  EXPECT_EQ(reasoning_start_of("what is <think>?<|im_end|>\n<|im_start|>assistant\n", markers), ReasoningStart::may_open);
}

TEST(ReasoningStart, TheEngineSpanFollowsThePrompt) {
  const ReasoningMarkers markers;
  EXPECT_FALSE(engine_reasoning_span(ReasoningStart::closed, markers, {7, 8}));
  auto open = engine_reasoning_span(ReasoningStart::open, markers, {7, 8});
  ASSERT_TRUE(open);
  EXPECT_TRUE(open->open);
  EXPECT_EQ(open->end, "</think>");
  EXPECT_EQ(open->end_token, 8);
  auto may = engine_reasoning_span(ReasoningStart::may_open, markers, {7, 8});
  ASSERT_TRUE(may);
  EXPECT_FALSE(may->open);
  EXPECT_EQ(may->start_token, 7);
  EXPECT_FALSE(engine_reasoning_span(ReasoningStart::may_open, markers, {-1, 8})) << "a start marker of several tokens cannot be told apart";
}

TEST(ReasoningMarkers, TheQwen3TemplateThinksAndChatMLDoesNot) {
  std::ifstream file(std::string(QWEN_TOKENIZER_DIR) + "/tokenizer_config.json");
  ASSERT_TRUE(file) << QWEN_TOKENIZER_DIR;
  const std::string qwen3 = nlohmann::json::parse(file)["chat_template"].get<std::string>();
  EXPECT_TRUE(reasoning_markers_for(qwen3));
  EXPECT_FALSE(reasoning_markers_for("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"));
}
