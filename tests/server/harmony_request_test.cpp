// Requests to a gpt-oss (harmony) model and the reasoning effort: the effort as gpt-oss's template
// takes it (its system message's "Reasoning:" line) from chat's reasoning_effort, chat_template_kwargs
// and the Responses API's reasoning.effort, and as Qwen3's on/off switch; a forced tool call
// (tool_choice required / named) as a grammar that writes harmony's call, special tokens included.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "inferlab/grammar/grammar_matcher.h"
#include "request_test_helpers.h"
#include "server/harmony.h"
#include "server/openai_request.h"
#include "server/responses_request.h"

namespace inferlab::api {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A gpt-oss-shaped tokenizer, as harmony_test.py builds one for the server tests: the Qwen3 BPE with
// harmony's special tokens at their o200k_harmony ids, and gpt-oss's chat template beside it.
const EngineText& harmony_text() {
  static const std::unique_ptr<EngineText> text = [] {
    const fs::path dir = fs::temp_directory_path() / ("inferlab-harmony-tokenizer-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    json tokenizer = json::parse(read_file(fs::path(QWEN_TOKENIZER_DIR) / "tokenizer.json"));
    const std::pair<int, const char*> specials[] = {
        {199998, "<|startoftext|>"}, {199999, "<|endoftext|>"}, {200002, "<|return|>"}, {200003, "<|constrain|>"},
        {200005, "<|channel|>"},     {200006, "<|start|>"},     {200007, "<|end|>"},    {200008, "<|message|>"},
        {200012, "<|call|>"}};
    for (const auto& [id, content] : specials)
      tokenizer["added_tokens"].push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                                           {"rstrip", false}, {"normalized", false}, {"special", true}});
    std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
    std::ofstream(dir / "tokenizer_config.json")
        << json({{"tokenizer_class", "PreTrainedTokenizerFast"}, {"bos_token", "<|startoftext|>"}, {"eos_token", "<|return|>"}}).dump();
    std::ofstream(dir / "chat_template.jinja") << read_file(GPT_OSS_CHAT_TEMPLATE);
    auto loaded = std::make_unique<EngineText>(Tokenizer::from_folder(dir));
    fs::remove_all(dir);
    return loaded;
  }();
  return *text;
}

int32_t token_id(const EngineText& text, const char* marker) {
  const auto ids = text.tokenize(marker, false);
  EXPECT_EQ(ids.size(), 1u) << marker;
  return ids.empty() ? -1 : ids[0];
}

ModelContext harmony_context() {
  ModelContext c;
  c.text = &harmony_text();
  c.accepted_names = {"gpt-oss"};
  c.context_length = 4096;
  c.vocab_size = harmony_text().vocab_size();
  c.kv_capacity_tokens = 8192;
  c.reasoning = reasoning_markers_for(harmony_text().chat_template_source());
  c.reasoning_tokens = {token_id(harmony_text(), "<|channel|>"), token_id(harmony_text(), "<|message|>")};
  return c;
}

using test::error_of;
using test::qwen_text;

// Qwen3's template thinks: its <think> markers.
ModelContext qwen_context() {
  ModelContext c = test::qwen_context(1024, 2048);
  c.reasoning = reasoning_markers_for(qwen_text().chat_template_source());
  return c;
}

const json kUser = json::array({{{"role", "user"}, {"content", "What is 2 + 2?"}}});

std::string chat_prompt(const ModelContext& model, json body) {
  body["messages"] = kUser;
  return parse_chat_request(body, model).prompt_texts.front();
}

TEST(ReasoningEffort, GptOssTakesItAsItsTemplatesReasoningLine) {
  const ModelContext model = harmony_context();
  ASSERT_TRUE(model.reasoning && model.reasoning->harmony);
  EXPECT_NE(chat_prompt(model, json::object()).find("\nReasoning: medium\n\n"), std::string::npos);  // the template's default
  for (const char* effort : {"low", "medium", "high"}) {
    const std::string line = std::string("\nReasoning: ") + effort + "\n\n";
    // chat's reasoning_effort, the template variable itself, and both at once render the same prompt.
    const std::string by_field = chat_prompt(model, {{"reasoning_effort", effort}});
    EXPECT_NE(by_field.find(line), std::string::npos) << by_field;
    EXPECT_EQ(chat_prompt(model, {{"chat_template_kwargs", {{"reasoning_effort", effort}}}}), by_field);
    EXPECT_EQ(chat_prompt(model, {{"reasoning_effort", effort}, {"chat_template_kwargs", {{"reasoning_effort", effort}}}}), by_field);
    // The Responses API's reasoning.effort: the same prompt (instructions and input as the chat's).
    const auto responses = parse_responses_request({{"input", "What is 2 + 2?"}, {"reasoning", {{"effort", effort}}}}, model, {});
    EXPECT_EQ(responses.parsed.prompt_texts.front(), by_field);
    EXPECT_EQ(responses.echo["reasoning"]["effort"], effort);
  }
  // What gpt-oss cannot take is a 400 naming the field it came in, in each API's terms.
  for (const char* effort : {"none", "minimal", "xhigh", "max"}) {
    const ApiError chat = error_of([&] { chat_prompt(model, {{"reasoning_effort", effort}}); });
    EXPECT_EQ(chat.status, 400);
    EXPECT_EQ(chat.param, "reasoning_effort");
    EXPECT_NE(chat.message.find("low, medium or high"), std::string::npos) << chat.message;
    EXPECT_EQ(error_of([&] { chat_prompt(model, {{"chat_template_kwargs", {{"reasoning_effort", effort}}}}); }).param,
              "chat_template_kwargs");
    const ApiError responses =
        error_of([&] { parse_responses_request({{"input", "x"}, {"reasoning", {{"effort", effort}}}}, model, {}); });
    EXPECT_EQ(responses.status, 400);
    EXPECT_EQ(responses.param, "reasoning.effort");
    EXPECT_NE(responses.message.find("low, medium or high"), std::string::npos) << responses.message;
  }
  EXPECT_EQ(error_of([&] { chat_prompt(model, {{"reasoning_effort", "huge"}}); }).param, "reasoning_effort");
  EXPECT_EQ(error_of([&] { chat_prompt(model, {{"reasoning_effort", 3}}); }).param, "reasoning_effort");
  EXPECT_EQ(error_of([&] { chat_prompt(model, {{"chat_template_kwargs", {{"reasoning_effort", 3}}}}); }).param, "chat_template_kwargs");
  // Two different efforts in one request: which one was meant is not guessed.
  const ApiError both = error_of([&] { chat_prompt(model, {{"reasoning_effort", "low"}, {"chat_template_kwargs", {{"reasoning_effort", "high"}}}}); });
  EXPECT_EQ(both.param, "reasoning_effort");
  EXPECT_NE(both.message.find("give the effort once"), std::string::npos) << both.message;
}

TEST(ReasoningEffort, QwenThinkingIsOnOrOff) {
  const ModelContext model = qwen_context();
  ASSERT_TRUE(model.reasoning && !model.reasoning->harmony);
  const std::string thinking = chat_prompt(model, json::object());
  for (const char* effort : {"none", "minimal"}) {
    const std::string off = chat_prompt(model, {{"reasoning_effort", effort}});
    EXPECT_TRUE(off.ends_with("<think>\n\n</think>\n\n")) << off;
    EXPECT_EQ(off, chat_prompt(model, {{"chat_template_kwargs", {{"enable_thinking", false}}}}));
    EXPECT_EQ(chat_prompt(model, {{"chat_template_kwargs", {{"reasoning_effort", effort}}}}), off);
    EXPECT_EQ(parse_responses_request({{"input", "What is 2 + 2?"}, {"reasoning", {{"effort", effort}}}}, model, {})
                  .parsed.prompt_texts.front(),
              off);
  }
  for (const char* effort : {"low", "medium", "high", "xhigh", "max"})
    EXPECT_EQ(chat_prompt(model, {{"reasoning_effort", effort}}), thinking) << effort;
  const ApiError clash = error_of(
      [&] { chat_prompt(model, {{"reasoning_effort", "none"}, {"chat_template_kwargs", {{"enable_thinking", true}}}}); });
  EXPECT_EQ(clash.param, "reasoning_effort");
  EXPECT_EQ(error_of([&] { chat_prompt(model, {{"reasoning_effort", "huge"}}); }).param, "reasoning_effort");
}

const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}, {"enum", {"Paris", "Rome"}}}}}},
                           {"required", {"city"}},
                           {"additionalProperties", false}}}}}};
const json kTime = {{"type", "function"}, {"function", {{"name", "get_time"}, {"parameters", json::object()}}}};

// Whether the grammar takes the answer `text` token by token, each token in the mask first, and ends there.
bool grammar_writes(const ParsedRequest& request, const std::string& text) {
  GrammarMatcher matcher(request.grammar);
  TokenMask mask;
  for (int32_t id : harmony_text().tokenize(text, false)) {
    matcher.fill_mask(mask);
    if (!mask.test(id) || !matcher.accept_token(id)) return false;
  }
  return matcher.terminated();
}

TEST(HarmonyToolChoice, RequiredIsAGrammarOfHarmonysCall) {
  const ModelContext model = harmony_context();
  const ParsedRequest r = parse_chat_request({{"messages", kUser}, {"tools", {kWeather, kTime}}, {"tool_choice", "required"}}, model);
  ASSERT_TRUE(r.grammar);
  EXPECT_TRUE(r.harmony_calls);
  EXPECT_TRUE(r.harmony_forced_call);
  EXPECT_FALSE(r.reasoning_span) << "the grammar applies from the first token, not after the analysis";
  const std::string call =
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>";
  EXPECT_TRUE(grammar_writes(r, call));
  EXPECT_TRUE(grammar_writes(r, "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}<|call|>"));
  // The answer must open the call: the first token can only be <|channel|>, the channel only commentary.
  GrammarMatcher matcher(r.grammar);
  TokenMask mask;
  matcher.fill_mask(mask);
  EXPECT_EQ(mask.count(), 1);
  EXPECT_TRUE(mask.test(token_id(harmony_text(), "<|channel|>")));
  EXPECT_FALSE(grammar_writes(r, "<|channel|>final<|message|>It is 4.<|return|>"));
  EXPECT_FALSE(grammar_writes(r, "<|channel|>analysis<|message|>Hmm.<|end|>"));
  // The arguments follow the tool's schema; the spelled-out markers are not the special tokens.
  EXPECT_FALSE(grammar_writes(r, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|call|>"));
  EXPECT_FALSE(grammar_writes(r, "<|channel|>commentary to=functions.search <|constrain|>json<|message|>{}<|call|>"));
  GrammarMatcher spelled(r.grammar);
  EXPECT_FALSE(spelled.accept_bytes("<|channel|>"));
  // What the grammar writes, the splitter returns as the call.
  const HarmonyParsed parsed = parse_harmony(call, true);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(parsed.calls[0].arguments), json({{"city", "Paris"}}));
  EXPECT_TRUE(parsed.content.empty() && parsed.reasoning.empty());
}

TEST(HarmonyToolChoice, ANamedFunctionIsTheOnlyCall) {
  const ModelContext model = harmony_context();
  const json named = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  const ParsedRequest r = parse_chat_request({{"messages", kUser}, {"tools", {kWeather, kTime}}, {"tool_choice", named}}, model);
  EXPECT_TRUE(grammar_writes(r, "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}<|call|>"));
  EXPECT_FALSE(grammar_writes(r, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Rome\"}<|call|>"));
  // The Responses API's named choice and Anthropic-style strict tools reach the same grammar.
  const auto responses = parse_responses_request(
      {{"input", "x"}, {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"strict", true}, {"parameters", kWeather["function"]["parameters"]}}}},
       {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}},
      model, {});
  EXPECT_TRUE(grammar_writes(responses.parsed,
                             "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Rome\"}<|call|>"));
}

TEST(HarmonyToolChoice, WhatCannotBeForcedIsRefusedByName) {
  const ModelContext model = harmony_context();
  const json missing = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  EXPECT_EQ(error_of([&] { parse_chat_request({{"messages", kUser}, {"tools", {kWeather}}, {"tool_choice", missing}}, model); }).param,
            "tool_choice");
  const ApiError with_format = error_of([&] {
    parse_chat_request({{"messages", kUser}, {"tools", {kWeather}}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}},
                       model);
  });
  EXPECT_EQ(with_format.param, "tool_choice");
  // Strict tools with auto would need a grammar that waits for special tokens: refused, naming required.
  json strict = kWeather;
  strict["function"]["strict"] = true;
  const ApiError strict_auto = error_of([&] { parse_chat_request({{"messages", kUser}, {"tools", {strict}}}, model); });
  EXPECT_EQ(strict_auto.param, "tools");
  EXPECT_NE(strict_auto.message.find("tool_choice required"), std::string::npos) << strict_auto.message;
  EXPECT_TRUE(parse_chat_request({{"messages", kUser}, {"tools", {strict}}, {"tool_choice", "required"}}, model).grammar);
  // auto stays free: no grammar, calls parsed from whatever the model writes.
  const ParsedRequest free = parse_chat_request({{"messages", kUser}, {"tools", {kWeather}}}, model);
  EXPECT_FALSE(free.grammar);
  EXPECT_TRUE(free.harmony_calls && !free.harmony_forced_call && free.reasoning_span);
}

}  // namespace
}  // namespace inferlab::api
