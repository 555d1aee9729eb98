// Tool-call parsing per format and the streaming split (src/server/tool_call_*.cpp).
#include <gtest/gtest.h>

#include "server/tool_call_format.h"

namespace inferlab::api {
namespace {

TEST(ToolCalls, FormatFollowsTheChatTemplate) {
  EXPECT_STREQ(tool_call_format_for("... <tool_call>\n{{ tool_call | tojson }} ...")->name(), "hermes");
  EXPECT_STREQ(tool_call_format_for("{% if message.role == 'ipython' %}<|python_tag|>")->name(), "llama3_json");
  EXPECT_STREQ(tool_call_format_for("{{ messages }}")->name(), "hermes");  // the documented fallback
}

TEST(ToolCalls, HermesParallelCallsAndContent) {
  auto f = make_hermes_format();
  ParsedOutput out = f->parse(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"now\"}\n</tool_call>");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.content, "Let me check.\n\n");
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(out.calls[0].arguments), nlohmann::json::parse(R"({"city":"Paris"})"));
  EXPECT_EQ(out.calls[1].arguments, "{}");  // a parameterless call still has JSON arguments
  EXPECT_NE(out.calls[0].id, out.calls[1].id);
}

TEST(ToolCalls, MalformedCallsStayContent) {
  auto f = make_hermes_format();
  const std::string bad = "<tool_call>\n{\"name\": oops}\n</tool_call>";
  ParsedOutput out = f->parse(bad);
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.content, bad);
  // A last call cut short by max_tokens: the finished ones count, the rest is text.
  out = f->parse("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"argu");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_NE(out.content.find("<tool_call>\n{\"name\": \"b\""), std::string::npos);
}

TEST(ToolCalls, Llama3Json) {
  auto f = make_llama3_format();
  ParsedOutput out = f->parse("<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"x\"}}");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "search");
  EXPECT_EQ(out.calls[0].arguments, R"({"q":"x"})");
  EXPECT_TRUE(f->parse("Just text.").calls.empty());
}

TEST(ToolCalls, StreamingHoldsPartialTagsAndSendsHeaderThenArguments) {
  auto f = make_hermes_format();
  ToolCallStream stream(*f);
  const std::string answer = "Hi <tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  std::string content;
  json deltas = json::array();
  for (char c : answer) {
    content += stream.feed(std::string(1, c), deltas);
    EXPECT_EQ(content.find('<'), std::string::npos) << "a tag leaked as content: " << content;
  }
  std::vector<ToolCall> calls;
  content += stream.finish(deltas, calls);
  EXPECT_EQ(content, "Hi ");
  ASSERT_EQ(deltas.size(), 2u) << deltas.dump();
  EXPECT_EQ(deltas[0]["function"]["name"], "f");
  EXPECT_EQ(deltas[0]["type"], "function");
  EXPECT_EQ(deltas[0]["function"]["arguments"], "");
  EXPECT_EQ(deltas[1]["index"], 0);
  EXPECT_EQ(json::parse(deltas[1]["function"]["arguments"].get<std::string>()), json::parse(R"({"x":1})"));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].id, deltas[0]["id"]);
}

TEST(ToolCalls, StreamingNeverAnnouncesACallThatMaxTokensCutShort) {
  auto f = make_hermes_format();
  ToolCallStream stream(*f);
  const std::string whole = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  const std::string cut = "\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x";
  std::string content;
  json deltas = json::array();
  for (char c : whole + cut) content += stream.feed(std::string(1, c), deltas);
  std::vector<ToolCall> calls;
  content += stream.finish(deltas, calls);
  // The whole call: a header and its arguments; the cut one: no header (a client would finish it
  // with arguments that are not JSON), its text is content, as parse() says for the whole answer.
  ASSERT_EQ(deltas.size(), 2u) << deltas.dump();
  for (const json& d : deltas) EXPECT_EQ(d["index"], 0) << deltas.dump();
  ASSERT_EQ(calls.size(), 1u);
  const ParsedOutput parsed = f->parse(whole + cut);
  EXPECT_EQ(content, parsed.content);
  EXPECT_NE(content.find("<tool_call>"), std::string::npos) << content;
}

TEST(ToolCalls, StreamingAnnouncesEachCallWhenItsClosingTagArrives) {
  auto f = make_hermes_format();
  ToolCallStream stream(*f);
  std::string answer, content;
  std::vector<std::size_t> closes;  // where each call's closing tag ends
  for (int i = 0; i < 3; ++i) {
    answer += fmt::format("<tool_call>\n{{\"name\": \"f{}\", \"arguments\": {{\"i\": {}}}}}\n</tool_call>\n", i, i);
    closes.push_back(answer.size() - 1);
  }
  json deltas = json::array();
  for (std::size_t n = 0; n < answer.size(); ++n) {
    content += stream.feed(answer.substr(n, 1), deltas);
    const auto done = static_cast<std::size_t>(std::count_if(closes.begin(), closes.end(), [&](std::size_t c) { return c <= n + 1; }));
    ASSERT_EQ(deltas.size(), 2 * done) << "after " << n + 1 << " bytes: " << deltas.dump();
  }
  std::vector<ToolCall> calls;
  content += stream.finish(deltas, calls);
  EXPECT_EQ(content, "");
  ASSERT_EQ(calls.size(), 3u);
  ASSERT_EQ(deltas.size(), 6u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(deltas[2 * i]["index"], i);
    EXPECT_EQ(deltas[2 * i]["function"]["name"], fmt::format("f{}", i));
    EXPECT_EQ(deltas[2 * i]["id"], calls[static_cast<std::size_t>(i)].id);
    EXPECT_EQ(json::parse(deltas[2 * i + 1]["function"]["arguments"].get<std::string>()), json({{"i", i}}));
  }
}

TEST(ToolCalls, AMalformedBlockAfterACallKeepsTheCallStreamedOrNot) {
  // A streamed call cannot be taken back: the whole-answer parse keeps it too, and the malformed
  // block after it (and all that follows) is content either way.
  auto f = make_hermes_format();
  const std::string good = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>";
  const std::string rest = "\n<tool_call>\n{\"name\": oops}\n</tool_call>\n<tool_call>\n{\"name\": \"c\"}\n</tool_call>";
  const ParsedOutput parsed = f->parse(good + rest);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "a");
  EXPECT_EQ(parsed.content, rest);
  ToolCallStream stream(*f);
  json deltas = json::array();
  std::string content;
  for (char c : good + rest) content += stream.feed(std::string(1, c), deltas);
  EXPECT_EQ(deltas.size(), 2u) << "only the call before the malformed block is announced: " << deltas.dump();
  std::vector<ToolCall> calls;
  content += stream.finish(deltas, calls);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].id, deltas[0]["id"]);
  EXPECT_EQ(deltas.size(), 2u) << deltas.dump();
  EXPECT_EQ(content, rest);
}

TEST(ToolCalls, ForcedGrammarsCompile) {
  std::vector<ToolDefinition> tools = {{"get_weather", json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"), true},
                                       {"now", json::object(), false}};
  for (auto* f : {make_hermes_format().release(), make_llama3_format().release()}) {
    std::unique_ptr<ToolCallFormat> owned(f);
    EXPECT_NO_THROW(parse_gbnf(f->forced_grammar(tools, true, {}))) << f->name();
    if (!f->trigger().empty()) EXPECT_NO_THROW(parse_gbnf(f->triggered_grammar(tools, false, {}))) << f->name();
  }
}

}  // namespace
}  // namespace inferlab::api
