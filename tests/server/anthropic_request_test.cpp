// Anthropic's Messages API request parser (anthropic_request.cpp) with the real Qwen tokenizer and
// chat template: blocks onto the template's messages, tools and tool_choice onto the shared paths
// (the same prompt /v1/chat/completions renders for the same chat), refusals by name, and the
// error shape of Anthropic's routes.
#include <gtest/gtest.h>

#include <string>

#include "request_test_helpers.h"
#include "server/anthropic_request.h"
#include "server/response_writer.h"

namespace {

using inferlab::api::ApiError;
using inferlab::api::json;
using inferlab::api::ModelContext;
namespace api = inferlab::api;

using inferlab::api::test::error_of;

ModelContext context(api::RequestLimits limits = {}) { return api::test::qwen_context(2048, 4096, limits); }

json request(json messages) { return {{"model", "demo"}, {"max_tokens", 16}, {"messages", std::move(messages)}}; }

const json kWeather = {{"type", "object"},
                       {"properties", {{"city", {{"type", "string"}}}}},
                       {"required", {"city"}}};

TEST(AnthropicRequest, FieldsLandInTheSharedRequest) {
  json body = request({{{"role", "user"}, {"content", "Hi"}}});
  body["temperature"] = 0.5;
  body["top_p"] = 0.9;
  body["top_k"] = 40;
  body["stop_sequences"] = {"END", "\n\n"};
  body["stream"] = true;
  body["metadata"] = {{"user_id", "u-1"}};
  const api::ParsedRequest r = api::parse_messages_request(body, context());
  EXPECT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.max_tokens, std::vector<int>{16});
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.tool_format);
}

TEST(AnthropicRequest, MaxTokensAndModelAreRequired) {
  json body = request({{{"role", "user"}, {"content", "Hi"}}});
  body.erase("max_tokens");
  ApiError e = error_of([&] { api::parse_messages_request(body, context()); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "max_tokens");
  // count_tokens takes the same body without it.
  EXPECT_GT(api::count_messages_tokens(body, context()), 0u);
  body.erase("model");
  EXPECT_EQ(error_of([&] { api::count_messages_tokens(body, context()); }).param, "model");
  body["model"] = "claude-elsewhere";
  EXPECT_EQ(error_of([&] { api::count_messages_tokens(body, context()); }).status, 404);
}

TEST(AnthropicRequest, SystemAndBlocksRenderAsTheSameChatCompletionsChat) {
  json body = request({{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hello"}}}}},
                       {{"role", "assistant"}, {"content", "Hi there"}},
                       {{"role", "user"}, {"content", "Bye"}}});
  body["system"] = {{{"type", "text"}, {"text", "Be brief."}}};
  const json openai = {{"model", "demo"},
                       {"max_tokens", 16},
                       {"messages", {{{"role", "system"}, {"content", "Be brief."}},
                                     {{"role", "user"}, {"content", "Hello"}},
                                     {{"role", "assistant"}, {"content", "Hi there"}},
                                     {{"role", "user"}, {"content", "Bye"}}}}};
  EXPECT_EQ(api::parse_messages_request(body, context()).prompt_texts,
            api::parse_chat_request(openai, context()).prompt_texts);
}

TEST(AnthropicRequest, ToolUseAndToolResultBecomeToolCallsAndToolMessages) {
  json body = request({{{"role", "user"}, {"content", "Weather in Paris?"}},
                       {{"role", "assistant"},
                        {"content", {{{"type", "text"}, {"text", "Let me look."}},
                                     {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}}}}},
                       {{"role", "user"},
                        {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "Sunny"}}}}}});
  body["tools"] = {{{"name", "get_weather"}, {"description", "Weather"}, {"input_schema", kWeather}}};
  const json openai = {
      {"model", "demo"},
      {"max_tokens", 16},
      {"tools", {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"description", "Weather"}, {"parameters", kWeather}}}}}},
      {"messages",
       {{{"role", "user"}, {"content", "Weather in Paris?"}},
        {{"role", "assistant"},
         {"content", "Let me look."},
         {"tool_calls", {{{"id", "toolu_1"}, {"type", "function"},
                          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"name", "get_weather"}, {"content", "Sunny"}}}}};
  const std::string prompt = api::parse_messages_request(body, context()).prompt_texts.front();
  EXPECT_EQ(prompt, api::parse_chat_request(openai, context()).prompt_texts.front());
  EXPECT_NE(prompt.find("Sunny"), std::string::npos);
  EXPECT_NE(prompt.find("get_weather"), std::string::npos);
}

TEST(AnthropicRequest, ToolChoiceMapsOntoTheSharedModes) {
  json body = request({{{"role", "user"}, {"content", "Weather?"}}});
  body["tools"] = {{{"name", "get_weather"}, {"input_schema", kWeather}}};
  const api::ParsedRequest automatic = api::parse_messages_request(body, context());
  EXPECT_TRUE(automatic.tool_format);
  EXPECT_FALSE(automatic.grammar);
  body["tool_choice"] = {{"type", "any"}};
  const api::ParsedRequest any = api::parse_messages_request(body, context());
  EXPECT_TRUE(any.tool_format);
  EXPECT_TRUE(any.grammar);
  body["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}, {"disable_parallel_tool_use", true}};
  EXPECT_TRUE(api::parse_messages_request(body, context()).grammar);
  body["tool_choice"] = {{"type", "none"}};
  const api::ParsedRequest none = api::parse_messages_request(body, context());
  EXPECT_FALSE(none.tool_format);
  EXPECT_FALSE(none.grammar);
  body["tool_choice"] = {{"type", "tool"}, {"name", "get_time"}};
  EXPECT_EQ(error_of([&] { api::parse_messages_request(body, context()); }).param, "tool_choice");
  body["tool_choice"] = {{"type", "required"}};
  EXPECT_EQ(error_of([&] { api::parse_messages_request(body, context()); }).param, "tool_choice");
}

TEST(AnthropicRequest, RefusalsNameWhatIsRefused) {
  auto refused = [](json body) { return error_of([&] { api::parse_messages_request(body, context()); }); };
  ApiError e = refused(request({{{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_x"}, {"content", "x"}}}}}}));
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("toolu_x"), std::string::npos);
  e = refused(request({{{"role", "user"}, {"content", {{{"type", "image"}, {"source", json::object()}}}}}}));
  EXPECT_NE(e.message.find("'image'"), std::string::npos) << e.message;
  e = refused(request(json::array()));
  EXPECT_EQ(e.param, "messages");
  e = refused(request({{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Hel"}}}));
  EXPECT_NE(e.message.find("last message"), std::string::npos);
  e = refused(request({{{"role", "user"}, {"content", ""}}}));
  EXPECT_NE(e.message.find("must not be empty"), std::string::npos);
  e = refused(request({{{"role", "developer"}, {"content", "x"}}}));
  EXPECT_NE(e.message.find("'developer'"), std::string::npos);
  json body = request({{{"role", "user"}, {"content", "Hi"}}});
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};  // not less than max_tokens (16)
  EXPECT_NE(refused(body).message.find("less than max_tokens"), std::string::npos);
  body["thinking"] = {{"type", json::array()}};  // not a string: still a 400, never a JSON type error
  EXPECT_EQ(refused(body).param, "thinking");
  body.erase("thinking");
  body["temperature"] = 1.5;  // Anthropic's range is 0..1
  EXPECT_EQ(refused(body).param, "temperature");
  body.erase("temperature");
  body["tools"] = {{{"type", "web_search_20250305"}, {"name", "web_search"}}};
  EXPECT_EQ(refused(body).param, "tools");
  body["tools"] = {{{"name", "bad name"}, {"input_schema", kWeather}}};
  EXPECT_EQ(refused(body).param, "tools");
  body.erase("tools");
  body["max_tokens"] = 0;
  EXPECT_EQ(refused(body).param, "max_tokens");
  body["max_tokens"] = 5000;  // past the context of 2048
  EXPECT_EQ(refused(body).code, "context_length_exceeded");
  body["max_tokens"] = 16;
  EXPECT_EQ(error_of([&] { api::parse_messages_request(body, context({.max_tokens = 8})); }).param, "max_tokens");
}

TEST(AnthropicRequest, ErrorBodyIsAnthropicsShapeWithTheTypeOfTheStatus) {
  const std::pair<int, const char*> cases[] = {{400, "invalid_request_error"}, {401, "authentication_error"},
                                               {403, "permission_error"},      {404, "not_found_error"},
                                               {408, "invalid_request_error"}, {413, "request_too_large"},
                                               {429, "rate_limit_error"},      {500, "api_error"},
                                               {503, "overloaded_error"},      {504, "api_error"}};
  for (const auto& [status, type] : cases) {
    const json body = api::anthropic_error_body(ApiError(status, "why"));
    EXPECT_EQ(body, json({{"type", "error"}, {"error", {{"type", type}, {"message", "why"}}}})) << status;
  }
}

ApiError refused(const json& body) {
  return error_of([&] { api::parse_messages_request(body, context()); });
}

TEST(AnthropicRequest, ThinkingSwitchesTheTemplateAndItsBudgetFollowsAnthropicsRules) {
  json body = request({{{"role", "user"}, {"content", "Hi"}}});
  body["max_tokens"] = 1500;
  auto prompt_of = [&](const json& b) { return api::parse_messages_request(b, context()).prompt_texts.front(); };
  const std::string by_default = prompt_of(body);
  body["thinking"] = {{"type", "disabled"}};
  const std::string disabled = prompt_of(body);
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
  const std::string enabled = prompt_of(body);
  // Qwen3's template: thinking off writes an empty span for the model to go on after.
  EXPECT_TRUE(disabled.ends_with("<think>\n\n</think>\n\n")) << disabled;
  EXPECT_EQ(enabled, by_default);
  EXPECT_FALSE(enabled.ends_with("</think>\n\n")) << enabled;
  for (const json& thinking : {json{{"type", "enabled"}, {"budget_tokens", 1023}}, json{{"type", "enabled"}},
                               json{{"type", "enabled"}, {"budget_tokens", 2048}}, json{{"type", "sometimes"}},
                               json{{"type", "enabled"}, {"budget_tokens", 1024}, {"display", "omitted"}}}) {
    body["thinking"] = thinking;
    EXPECT_EQ(refused(body).param, "thinking") << thinking;
  }
}

TEST(AnthropicRequest, ThinkingBlocksGoBackAsTheTurnsReasoning) {
  // After the last user query (a tool round), Qwen3's template renders an assistant's reasoning.
  json turn = {{"role", "assistant"}, {"content", {{{"type", "thinking"}, {"thinking", "Look it up."}, {"signature", ""}},
                                                   {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "w"}, {"input", {{"city", "Paris"}}}}}}};
  json body = request({{{"role", "user"}, {"content", "Weather?"}}, turn,
                       {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "sunny"}}}}}});
  body["tools"] = {{{"name", "w"}, {"input_schema", kWeather}}};
  const std::string prompt = api::parse_messages_request(body, context()).prompt_texts.front();
  EXPECT_NE(prompt.find("<think>\nLook it up.\n</think>"), std::string::npos) << prompt;
  turn["content"][0]["thinking"] = 7;
  body["messages"][1] = turn;
  EXPECT_EQ(refused(body).param, "messages");
  body["messages"][1]["content"][0] = {{"type", "redacted_thinking"}, {"data", "x"}};
  EXPECT_NE(refused(body).message.find("redacted_thinking"), std::string::npos);
}

}  // namespace
