// The request parser's limits, each checked once in openai_request.cpp: the model's (context,
// vocabulary) and the server's configured ones (--max-n, --max-messages, --max-prompt-tokens,
// --max-tokens-limit), with the status, param and code the client sees.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "request_test_helpers.h"
#include "server/openai_request.h"

namespace {

using inferlab::api::ApiError;
using inferlab::api::json;
using inferlab::api::ModelContext;
namespace api = inferlab::api;

using inferlab::api::test::error_of;
using inferlab::api::test::qwen_text;

ModelContext context(api::RequestLimits limits = {}) { return api::test::qwen_context(256, 1024, limits); }

json user_messages(int count) {
  json messages = json::array();
  for (int i = 0; i < count; ++i) messages.push_back({{"role", "user"}, {"content", "Hi"}});
  return messages;
}

TEST(OpenAIRequest, NAboveTheLimitIsRefused) {
  const ModelContext model = context({.max_n = 2});
  EXPECT_EQ(api::parse_completion_request({{"prompt", "Hello"}, {"n", 2}}, model).n, 2);
  ApiError e = error_of([&] { api::parse_completion_request({{"prompt", "Hello"}, {"n", 3}}, model); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "n");
  EXPECT_EQ(e.message, "'n' may be at most 2 here, got 3");
}

TEST(OpenAIRequest, RepetitionPenaltyAndMinTokensAreTakenAndCheckedByName) {
  const ModelContext model = context();
  const api::ParsedRequest r =
      api::parse_completion_request({{"prompt", "Hello"}, {"repetition_penalty", 1.1}, {"min_tokens", 4}, {"max_tokens", 8}}, model);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.sampling.min_tokens, 4);
  ApiError zero = error_of([&] { api::parse_completion_request({{"prompt", "Hello"}, {"repetition_penalty", 0}}, model); });
  EXPECT_EQ(zero.status, 400);
  EXPECT_EQ(zero.param, "repetition_penalty");
  EXPECT_EQ(zero.message, "'repetition_penalty' must be greater than 0 (1 is off), got 0");
  ApiError beyond = error_of([&] {
    api::parse_completion_request({{"prompt", "Hello"}, {"min_tokens", 9}, {"max_tokens", 8}}, model);
  });
  EXPECT_EQ(beyond.param, "min_tokens");
  EXPECT_EQ(beyond.message, "'min_tokens' (9) may not exceed 'max_tokens' (8)");
  EXPECT_EQ(error_of([&] { api::parse_completion_request({{"prompt", "Hello"}, {"min_tokens", -1}}, model); }).param, "min_tokens");
}

TEST(OpenAIRequest, TypicalXtcAndDryFieldsAreTakenWithLlamaServerDefaultsAndCheckedByName) {
  const ModelContext model = context();
  const auto defaults = api::parse_chat_request({{"messages", user_messages(1)}}, model).sampling;
  EXPECT_EQ(defaults.typical_p, 1.0f);
  EXPECT_EQ(defaults.xtc_probability, 0.0f);
  EXPECT_FLOAT_EQ(defaults.xtc_threshold, 0.1f);
  EXPECT_EQ(defaults.dry_multiplier, 0.0f);
  EXPECT_FLOAT_EQ(defaults.dry_base, 1.75f);
  EXPECT_EQ(defaults.dry_allowed_length, 2);
  EXPECT_EQ(defaults.dry_penalty_last_n, 64);
  EXPECT_TRUE(defaults.dry_breakers.empty());  // DRY off: no pass over the vocabulary

  const auto s = api::parse_completion_request({{"prompt", "Hello"}, {"typical_p", 0.9}, {"xtc_probability", 0.5},
                                                {"xtc_threshold", 0.2}, {"dry_multiplier", 0.8}, {"dry_base", 2},
                                                {"dry_allowed_length", 3}, {"dry_penalty_last_n", 128}}, model).sampling;
  EXPECT_FLOAT_EQ(s.typical_p, 0.9f);
  EXPECT_FLOAT_EQ(s.xtc_probability, 0.5f);
  EXPECT_FLOAT_EQ(s.xtc_threshold, 0.2f);
  EXPECT_FLOAT_EQ(s.dry_multiplier, 0.8f);
  EXPECT_EQ(s.dry_base, 2.0f);
  EXPECT_EQ(s.dry_allowed_length, 3);
  EXPECT_EQ(s.dry_penalty_last_n, 128);
  // The default breakers as token ids: "\n" alone is a one-token breaker, so is every token holding ":".
  auto has = [](const std::vector<inferlab::DryBreaker>& breakers, int32_t head, std::vector<int32_t> tail) {
    return std::find(breakers.begin(), breakers.end(), inferlab::DryBreaker{head, tail}) != breakers.end();
  };
  const std::vector<int32_t> newline = qwen_text().tokenize("\n", false);
  ASSERT_EQ(newline.size(), 1u);
  EXPECT_TRUE(has(s.dry_breakers, newline[0], {}));
  const std::vector<int32_t> colon = qwen_text().tokenize(":", false);
  ASSERT_EQ(colon.size(), 1u);
  EXPECT_TRUE(has(s.dry_breakers, colon[0], {}));
  // A breaker of two tokens: its first token heads it, the second is the tail.
  const std::vector<int32_t> two = qwen_text().tokenize("Hello world", false);
  ASSERT_EQ(two.size(), 2u);
  const auto custom = api::parse_chat_request({{"messages", user_messages(1)}, {"dry_multiplier", 1},
                                               {"dry_sequence_breakers", {"Hello world"}}}, model).sampling;
  EXPECT_TRUE(has(custom.dry_breakers, two[0], {two[1]}));
  EXPECT_FALSE(has(custom.dry_breakers, newline[0], {}));  // the list replaces the defaults

  auto param_of = [&](json field) {
    json body = {{"prompt", "Hello"}};
    body.update(field);
    return error_of([&] { api::parse_completion_request(body, model); }).param;
  };
  EXPECT_EQ(param_of({{"typical_p", 0}}), "typical_p");
  EXPECT_EQ(param_of({{"typical_p", 1.5}}), "typical_p");
  EXPECT_EQ(param_of({{"typical_p", "high"}}), "typical_p");
  EXPECT_EQ(param_of({{"xtc_probability", 1.5}}), "xtc_probability");
  EXPECT_EQ(param_of({{"xtc_threshold", -0.1}}), "xtc_threshold");
  EXPECT_EQ(param_of({{"dry_multiplier", -1}}), "dry_multiplier");
  EXPECT_EQ(param_of({{"dry_base", 0.5}}), "dry_base");
  EXPECT_EQ(param_of({{"dry_allowed_length", -1}}), "dry_allowed_length");
  EXPECT_EQ(param_of({{"dry_allowed_length", 1.5}}), "dry_allowed_length");
  EXPECT_EQ(param_of({{"dry_penalty_last_n", -1}}), "dry_penalty_last_n");
  EXPECT_EQ(param_of({{"dry_sequence_breakers", json::array()}}), "dry_sequence_breakers");
  EXPECT_EQ(param_of({{"dry_sequence_breakers", "\n"}}), "dry_sequence_breakers");
  EXPECT_EQ(param_of({{"dry_sequence_breakers", {1, 2}}}), "dry_sequence_breakers");
  EXPECT_EQ(param_of({{"dry_sequence_breakers", std::vector<std::string>(33, "x")}}), "dry_sequence_breakers");
}

TEST(OpenAIRequest, TooManyCompletionsInOneRequestAreRefused) {
  const ModelContext model = context({.max_n = 1});
  ApiError e = error_of([&] { api::parse_completion_request({{"prompt", {"a", "b", "c", "d", "e"}}}, model); });
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("too many completions in one request (5 prompts x n=1)"), std::string::npos);
}

TEST(OpenAIRequest, MessagesAboveTheLimitAreRefusedBeforeAnythingElse) {
  const ModelContext model = context({.max_messages = 4});
  EXPECT_EQ(api::parse_chat_request({{"messages", user_messages(4)}}, model).prompts.size(), 1u);
  // Even an unknown model (404 otherwise) hears about the message count first.
  ApiError e = error_of([&] { api::parse_chat_request({{"messages", user_messages(5)}, {"model", "other"}}, model); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages");
  EXPECT_EQ(e.message, "5 messages; this server accepts at most 4 (--max-messages)");
}

TEST(OpenAIRequest, MaxTokensAboveTheLimitIsRefusedUnderEitherName) {
  const ModelContext model = context({.max_tokens = 8});
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    ApiError e = error_of([&] { api::parse_completion_request({{"prompt", "Hello"}, {name, 9}}, model); });
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, name);
    EXPECT_EQ(e.message, std::string("'") + name + "' is 9; this server allows at most 8 (--max-tokens-limit)");
  }
  EXPECT_EQ(api::parse_completion_request({{"prompt", "Hello"}, {"max_tokens", 8}}, model).max_tokens.front(), 8);
}

TEST(OpenAIRequest, TheDefaultMaxTokensIsCappedToTheLimit) {
  const ModelContext model = context({.max_tokens = 8});
  // Completions default to 16, chat to the rest of the context: both end at the limit.
  EXPECT_EQ(api::parse_completion_request({{"prompt", "Hello"}}, model).max_tokens.front(), 8);
  EXPECT_EQ(api::parse_chat_request({{"messages", user_messages(1)}}, model).max_tokens.front(), 8);
  EXPECT_EQ(api::parse_completion_request({{"prompt", "Hello"}}, context()).max_tokens.front(), 16);
}

TEST(OpenAIRequest, APromptAboveTheLimitIsAContextLengthError) {
  const ModelContext model = context({.max_prompt_tokens = 4});
  std::string long_prompt;
  for (int i = 0; i < 10; ++i) long_prompt += " word";
  ApiError e = error_of([&] { api::parse_completion_request({{"prompt", long_prompt}, {"max_tokens", 2}}, model); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_NE(e.message.find("this server accepts at most 4 (--max-prompt-tokens)"), std::string::npos);
  ApiError chat = error_of([&] { api::parse_chat_request({{"messages", user_messages(1)}}, model); });
  EXPECT_EQ(chat.param, "messages");
}

TEST(OpenAIRequest, PromptPlusMaxTokensBeyondTheContextIsRefusedInOpenAIsWords) {
  const ModelContext model = context();
  ApiError e = error_of([&] { api::parse_completion_request({{"prompt", "Hello"}, {"max_tokens", 256}}, model); });
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.message.rfind("This model's maximum context length is 256 tokens. However, you requested 257 tokens", 0), 0u);
  // The KV cache bounds it too when it is smaller than the context.
  ModelContext small_cache = context();
  small_cache.kv_capacity_tokens = 64;
  EXPECT_EQ(error_of([&] { api::parse_completion_request({{"prompt", "Hello"}, {"max_tokens", 64}}, small_cache); }).code,
            "context_length_exceeded");
}

TEST(OpenAIRequest, PerRequestListsHaveTheirLimits) {
  const ModelContext model = context();
  json stops = json::array();
  for (int i = 0; i < 17; ++i) stops.push_back("s" + std::to_string(i));
  EXPECT_EQ(error_of([&] { api::parse_completion_request({{"prompt", "Hello"}, {"stop", stops}}, model); }).message,
            "'stop' may hold at most 16 strings, got 17");
  EXPECT_EQ(error_of([&] { api::parse_completion_request({{"prompt", "Hello"}, {"logprobs", 21}}, model); }).param, "logprobs");
  EXPECT_EQ(error_of([&] { api::parse_completion_request({{"prompt", {model.vocab_size}}}, model); }).param, "prompt");
}

TEST(OpenAIRequest, TokenizeRendersChatsWithoutTheGenerationLimits) {
  const ModelContext model = context({.max_n = 2, .max_messages = 1, .max_prompt_tokens = 1});
  api::TokenizeRequest request = api::parse_tokenize_request({{"messages", user_messages(3)}}, model);
  EXPECT_GT(request.ids.size(), 1u);
  // n stays limited: the chat is parsed as for /v1/chat/completions.
  EXPECT_EQ(error_of([&] { api::parse_tokenize_request({{"messages", user_messages(1)}, {"n", 3}}, model); }).param, "n");
  EXPECT_EQ(api::parse_tokenize_request({{"prompt", "Hello"}, {"add_special_tokens", false}}, model).ids,
            qwen_text().tokenize("Hello", false));
}

TEST(OpenAIRequest, DetokenizeChecksEveryIdAgainstTheVocabulary) {
  const ModelContext model = context();
  EXPECT_EQ(api::parse_detokenize_request({{"tokens", {1, 2}}}, model), (std::vector<int32_t>{1, 2}));
  ApiError e = error_of([&] { api::parse_detokenize_request({{"tokens", {1, model.vocab_size}}}, model); });
  EXPECT_EQ(e.param, "tokens");
  EXPECT_EQ(e.message, "'tokens' must hold token ids 0.." + std::to_string(model.vocab_size - 1) + ", found " +
                           std::to_string(model.vocab_size));
}

}  // namespace

namespace {

std::string nested_arrays(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

}  // namespace

TEST(OpenAIRequest, JsonNestedDeeperThanTheLimitIsRefusedBeforeParsing) {
  // {"x": + arrays: one level for the object.
  EXPECT_NO_THROW(api::parse_json_object("{\"x\":" + nested_arrays(3) + "}", 4));
  ApiError e = error_of([&] { api::parse_json_object("{\"x\":" + nested_arrays(4) + "}", 4); });
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("more than 4 levels deep (at byte 8)"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("(--max-json-depth)"), std::string::npos);
  // A hundred thousand levels: refused by the scan, never parsed (no recursion, no stack overflow).
  EXPECT_EQ(error_of([&] { api::parse_json_object("{\"x\":" + nested_arrays(100000) + "}", 64); }).status, 400);
  // Brackets inside strings (escaped quotes too) are text, not nesting.
  EXPECT_NO_THROW(api::parse_json_object(R"({"x":"[[[[[[\"{{{{{{"})", 1));
  EXPECT_NO_THROW(api::parse_json_object(R"({"x":"\\","y":1})", 1));
  EXPECT_EQ(error_of([&] { api::parse_json_object(R"({"x":"\\","y":[1]})", 1); }).status, 400);
}

TEST(OpenAIRequest, APromptLongerThanTheByteBoundIsRefusedBeforeTokenizing) {
  ModelContext model = context({.max_prompt_tokens = 4});
  model.longest_token_bytes = 10;  // each token covers at most 10 bytes: 4 tokens, at most 40 bytes
  EXPECT_EQ(api::prompt_byte_limit(model, true), 40u);
  EXPECT_EQ(api::prompt_byte_limit(model, false), 256u * 10);  // /tokenize: the context
  ApiError e = error_of([&] { api::parse_completion_request({{"prompt", std::string(41, 'x')}, {"max_tokens", 2}}, model); });
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_NE(e.message.find("the prompt is 41 bytes; this server accepts at most 40 (--max-prompt-bytes"), std::string::npos)
      << e.message;
  // Within the byte bound the token limit decides.
  EXPECT_NE(error_of([&] { api::parse_completion_request({{"prompt", std::string(40, 'x')}, {"max_tokens", 2}}, model); })
                .message.find("(--max-prompt-tokens)"),
            std::string::npos);
  model.limits.max_prompt_bytes = 8;  // the flag wins, for /tokenize too
  EXPECT_EQ(api::prompt_byte_limit(model, false), 8u);
  EXPECT_EQ(error_of([&] { api::parse_tokenize_request({{"prompt", "123456789"}}, model); }).code, "context_length_exceeded");
  model.longest_token_bytes = 0;  // unknown: no derived bound
  model.limits.max_prompt_bytes = 0;
  EXPECT_EQ(api::prompt_byte_limit(model, true), 0u);
}
