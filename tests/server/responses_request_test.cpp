// POST /v1/responses' parser (responses_request.cpp): input items -> the chat template's messages,
// function tools, tool_choice and text.format -> their chat forms, previous_response_id through the
// store, each refusal with the Responses field it names; and the store itself (response_store.cpp):
// least recently used eviction, delete, and use from several threads.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "request_test_helpers.h"
#include "server/response_store.h"
#include "server/responses_request.h"

namespace {

using inferlab::api::ApiError;
using inferlab::api::json;
using inferlab::api::ResponseStore;
using inferlab::api::StoredResponse;
namespace api = inferlab::api;

using inferlab::api::test::error_of;

api::ModelContext context() { return api::test::qwen_context(512, 1024); }

json to_chat(const json& body, const api::StoredLookup& lookup = {}) {
  json conversation;
  return api::responses_to_chat(body, lookup, conversation);
}

TEST(ResponsesRequest, StringInputIsOneUserMessageAfterTheInstructions) {
  json chat = to_chat({{"input", "Hi"}, {"instructions", "Be brief."}, {"max_output_tokens", 7}, {"temperature", 0.5}});
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}])"));
  EXPECT_EQ(chat["max_completion_tokens"], 7);
  EXPECT_EQ(chat["temperature"], 0.5);
}

TEST(ResponsesRequest, ItemsBecomeMessagesWithToolCallsAndToolResults) {
  json input = json::parse(R"([
    {"role": "developer", "content": "Use tools."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather"}, {"type": "input_text", "text": "?"}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
    {"type": "function_call", "call_id": "call_1", "name": "w", "arguments": "{\"c\":1}"},
    {"type": "function_call", "call_id": "call_2", "name": "w", "arguments": "{}"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call_output", "call_id": "call_2", "output": "sunny"},
    {"type": "function_call_output", "call_id": "call_1", "output": [{"type": "input_text", "text": "rain"}]}
  ])");
  json chat = to_chat({{"input", input}});
  json expected = json::parse(R"([
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "Checking.", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "w", "arguments": "{\"c\":1}"}},
      {"id": "call_2", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_2", "content": "sunny"},
    {"role": "tool", "tool_call_id": "call_1", "content": "rain"}
  ])");
  EXPECT_EQ(chat["messages"], expected);
}

TEST(ResponsesRequest, ToolsToolChoiceAndTextFormatInTheirChatForms) {
  json body = json::parse(R"({
    "input": "x",
    "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": true}],
    "tool_choice": {"type": "function", "name": "f"},
    "text": {"format": {"type": "json_schema", "name": "p", "schema": {"type": "object"}, "strict": true}}
  })");
  json chat = to_chat(body);
  EXPECT_EQ(chat["tools"], json::parse(R"([{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}}])"));
  EXPECT_EQ(chat["tool_choice"], json::parse(R"({"type":"function","function":{"name":"f"}})"));
  EXPECT_EQ(chat["response_format"], json::parse(R"({"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object"},"strict":true}})"));
}

TEST(ResponsesRequest, RefusalsNameTheResponsesField) {
  struct Case {
    json body;
    int status;
    std::string param;
  };
  std::vector<Case> cases = {
      {{{"input", "x"}, {"tools", json::parse(R"([{"type":"web_search"}])")}}, 400, "tools"},
      {{{"input", json::parse(R"([{"type":"function_call_output","call_id":"c","output":"1"}])")}}, 400, "input"},
      {{{"input", json::array()}}, 400, "input"},
      {{{"input", ""}}, 400, "input"},
      {json::object(), 400, "input"},
      {{{"input", json::parse(R"([{"type":"item_reference","id":"x"}])")}}, 400, "input"},
      {{{"input", json::parse(R"([{"role":"tool","content":"x"}])")}}, 400, "input"},
      {{{"input", "x"}, {"text", json::parse(R"({"format":{"type":"json_schema","name":"n"}})")}}, 400, "text.format"},
      {{{"input", "x"}, {"tool_choice", json::parse(R"({"type":"file_search"})")}}, 400, "tool_choice"},
      {{{"input", "x"}, {"truncation", "auto"}}, 400, "truncation"},
      {{{"input", "x"}, {"background", true}}, 400, "background"},
      {{{"input", "x"}, {"include", json::array({"message.output_text.logprobs"})}}, 400, "include"},
      {{{"input", "x"}, {"metadata", {{"k", 1}}}}, 400, "metadata"},
      {{{"input", "x"}, {"previous_response_id", "resp_gone"}}, 404, "previous_response_id"},
  };
  for (const Case& c : cases) {
    ApiError e = error_of([&] { to_chat(c.body, [](const std::string&) { return std::nullopt; }); });
    EXPECT_EQ(e.status, c.status) << c.body.dump();
    EXPECT_EQ(e.param, c.param) << c.body.dump() << ": " << e.message;
  }
}

TEST(ResponsesRequest, ChatParserErrorsNameTheResponsesField) {
  const api::ModelContext model = context();
  ApiError e = error_of([&] { api::parse_responses_request({{"input", "x"}, {"max_output_tokens", 0}}, model, {}); });
  EXPECT_EQ(e.param, "max_output_tokens") << e.message;
  e = error_of([&] {
    api::parse_responses_request(json::parse(R"({"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object","properties":{"a":{"type":"nonsense"}}}}}})"),
                                 model, {});
  });
  EXPECT_EQ(e.param, "text.format") << e.message;
  e = error_of([&] { api::parse_responses_request({{"input", "x"}, {"model", "other"}}, model, {}); });
  EXPECT_EQ(e.status, 404);
}

TEST(ResponsesRequest, PreviousResponseIdPrependsTheStoredConversation) {
  ResponseStore store(4);
  json earlier = json::parse(R"([
    {"type":"message","role":"user","content":[{"type":"input_text","text":"My name is Ada."}]},
    {"type":"function_call","id":"fc_1","call_id":"call_9","name":"f","arguments":"{}","status":"completed"}
  ])");
  store.put("resp_1", StoredResponse{json::object(), earlier});
  api::StoredLookup lookup = [&](const std::string& id) { return store.get(id); };
  json conversation;
  json chat = api::responses_to_chat(
      {{"previous_response_id", "resp_1"}, {"input", json::parse(R"([{"type":"function_call_output","call_id":"call_9","output":"ok"}])")}},
      lookup, conversation);
  ASSERT_EQ(conversation.size(), 3u);
  EXPECT_EQ(conversation[0], earlier[0]);
  ASSERT_EQ(chat["messages"].size(), 3u);
  EXPECT_EQ(chat["messages"][0]["content"], "My name is Ada.");
  EXPECT_EQ(chat["messages"][1]["tool_calls"][0]["id"], "call_9");
  EXPECT_EQ(chat["messages"][2]["tool_call_id"], "call_9");

  const api::ModelContext model = context();
  auto alone = api::parse_responses_request({{"input", "What is my name?"}}, model, lookup);
  auto continued = api::parse_responses_request({{"input", "What is my name?"}, {"previous_response_id", "resp_1"}}, model, lookup);
  EXPECT_GT(continued.parsed.prompts[0].size(), alone.parsed.prompts[0].size());
  EXPECT_EQ(continued.echo["previous_response_id"], "resp_1");
  EXPECT_TRUE(continued.store);
  EXPECT_FALSE(api::parse_responses_request({{"input", "x"}, {"store", false}}, model, lookup).store);
}

TEST(ResponsesRequest, ReasoningItemsAreTheNextAssistantTurnsReasoningContent) {
  json input = json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Call it."}], "status": "completed"},
    {"type": "function_call", "call_id": "call_1", "name": "w", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    {"type": "reasoning", "id": "rs_2", "summary": [], "content": [{"type": "reasoning_text", "text": "Say it."}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]},
    {"type": "reasoning", "id": "rs_3", "summary": [], "content": [{"type": "reasoning_text", "text": "Nothing said."}]},
    {"role": "user", "content": "Thanks"}
  ])");
  json messages = to_chat({{"input", input}})["messages"];
  ASSERT_EQ(messages.size(), 6u) << messages;
  EXPECT_EQ(messages[1]["reasoning_content"], "Call it.");
  EXPECT_EQ(messages[1]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(messages[3], json({{"role", "assistant"}, {"content", "Sunny."}, {"reasoning_content", "Say it."}}));
  EXPECT_EQ(messages[4], json({{"role", "assistant"}, {"content", ""}, {"reasoning_content", "Nothing said."}}));
  EXPECT_EQ(messages[5]["role"], "user");

  // Rendered: the thoughts of the turn after the last query are in the prompt (Qwen3's template).
  const api::ModelContext model = context();
  json round = json::array({input[0], input[1], input[2], input[3]});
  const std::string prompt = api::parse_responses_request({{"input", round}}, model, {}).parsed.prompt_texts.front();
  EXPECT_NE(prompt.find("<think>\nCall it.\n</think>"), std::string::npos) << prompt;

  for (const char* bad : {R"({"type": "reasoning", "summary": [], "content": [{"type": "output_text", "text": "x"}]})",
                          R"({"type": "reasoning", "summary": [], "content": "x"})", R"({"type": "reasoning", "summary": "x"})"})
    EXPECT_EQ(error_of([&] { to_chat({{"input", json::array({json::parse(bad)})}}); }).param, "input") << bad;
}

TEST(ResponsesRequest, ReasoningEffortIsEchoedAndNoneOrMinimalTurnsThinkingOff) {
  // The effort goes on as chat's reasoning_effort; the chat parser gives the template what it takes
  // (harmony_request_test.cpp: gpt-oss's Reasoning line; here Qwen3's thinking off for none / minimal).
  for (const char* effort : {"none", "minimal", "high"}) {
    const json chat = to_chat({{"input", "x"}, {"reasoning", {{"effort", effort}}}});
    EXPECT_EQ(chat["reasoning_effort"], effort);
    EXPECT_FALSE(chat.contains("chat_template_kwargs"));
  }
  const api::ModelContext model = context();
  const auto off = api::parse_responses_request({{"input", "x"}, {"reasoning", {{"effort", "none"}}}}, model, {});
  EXPECT_TRUE(off.parsed.prompt_texts.front().ends_with("<think>\n\n</think>\n\n"));
  EXPECT_EQ(off.echo["reasoning"], json({{"effort", "none"}, {"summary", nullptr}}));
  const auto low = api::parse_responses_request({{"input", "x"}, {"reasoning", {{"effort", "low"}, {"summary", "auto"}}}}, model, {});
  EXPECT_EQ(low.echo["reasoning"], json({{"effort", "low"}, {"summary", "auto"}}));
  EXPECT_FALSE(low.parsed.prompt_texts.front().ends_with("</think>\n\n"));
  EXPECT_EQ(error_of([&] { to_chat({{"input", "x"}, {"reasoning", {{"effort", "huge"}}}}); }).param, "reasoning.effort");
  EXPECT_EQ(error_of([&] { to_chat({{"input", "x"}, {"reasoning", {{"summary", "long"}}}}); }).param, "reasoning.summary");
}

TEST(ResponsesRequest, InputItemsQueryHasOpenAIsDefaultsAndNamesABadParameter) {
  const api::InputItemsQuery defaults = api::parse_input_items_query({});
  EXPECT_EQ(defaults.limit, 20);
  EXPECT_FALSE(defaults.ascending);
  EXPECT_FALSE(defaults.after || defaults.before);
  const api::InputItemsQuery given = api::parse_input_items_query(
      api::parse_query("limit=5&limit=100&order=asc&after=msg_1&before=msg_2&before=msg_3&include[]=reasoning.encrypted_content&x=y"));
  EXPECT_EQ(given.limit, 100);  // the last value of a parameter given twice
  EXPECT_TRUE(given.ascending);
  EXPECT_EQ(given.after, "msg_1");
  EXPECT_EQ(given.before, "msg_3");
  for (const auto& [query, param] : std::vector<std::pair<const char*, const char*>>{
           {"limit=0", "limit"}, {"limit=101", "limit"}, {"limit=1e2", "limit"}, {"limit=+5", "limit"}, {"limit=", "limit"},
           {"limit=99999999999", "limit"}, {"order=DESC", "order"}, {"include=file_search_call.results", "include"},
           {"include%5B%5D=x", "include"}}) {
    const ApiError e = error_of([&] { api::parse_input_items_query(api::parse_query(query)); });
    EXPECT_EQ(e.status, 400) << query;
    EXPECT_EQ(e.param, param) << query;
  }
}

TEST(ResponseStore, EvictsTheLeastRecentlyUsed) {
  ResponseStore store(2);
  store.put("a", {json(1), json::array()});
  store.put("b", {json(2), json::array()});
  ASSERT_TRUE(store.get("a"));  // a is now the most recent: b goes next
  store.put("c", {json(3), json::array()});
  EXPECT_TRUE(store.get("a"));
  EXPECT_FALSE(store.get("b"));
  EXPECT_EQ(store.get("c")->response, json(3));
  EXPECT_EQ(store.size(), 2u);
  EXPECT_TRUE(store.remove("a"));
  EXPECT_FALSE(store.remove("a"));
  EXPECT_FALSE(store.get("a"));
  ResponseStore none(0);
  none.put("a", {json(1), json::array()});
  EXPECT_FALSE(none.get("a"));
}

TEST(ResponseStore, ManyThreadsKeepItWithinItsCapacity) {
  ResponseStore store(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const std::string id = std::to_string(t) + "-" + std::to_string(i);
        store.put(id, {json(i), json::array()});
        if (auto got = store.get(id)) {
          EXPECT_EQ(got->response, json(i));
        }
        if (i % 3 == 0) store.remove(id);
      }
    });
  for (auto& thread : threads) thread.join();
  EXPECT_LE(store.size(), 16u);
}

}  // namespace
