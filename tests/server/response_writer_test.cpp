// The API shapes over one shared Completion: the same generated tokens written as OpenAI's
// chat.completion and text_completion, whole and streamed (the real Qwen tokenizer, no model:
// the engine's events are made here).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "request_test_helpers.h"
#include "server/completion.h"
#include "server/handlers/routes.h"
#include "server/response_store.h"
#include "server/response_writer.h"

namespace {

namespace api = inferlab::api;
using api::json;

using inferlab::api::test::qwen_text;

// A one-choice completion of "Hello" that generated " world" and ran out of tokens, with logprobs.
std::shared_ptr<api::Completion> generated(bool echo) {
  auto request = std::make_shared<api::ParsedRequest>();
  request->prompt_texts = {"Hello"};
  request->prompts = {qwen_text().tokenize("Hello", false)};
  request->logprobs = true;
  request->echo = echo;
  auto completion = std::make_shared<api::Completion>(request, qwen_text(), 600, /*timings=*/false);
  completion->add_choice(0, std::make_shared<inferlab::RequestStream>());
  return completion;
}

// Feeds the tokens of `text` and a length finish, one event per poll, to the writer's stream.
std::vector<json> stream_events(api::Completion& completion, api::ResponseWriter& writer, const std::string& text) {
  std::string out;
  writer.stream_start(completion, out);
  api::Choice& choice = *completion.choices().front();
  std::vector<inferlab::StreamEvent> events;
  for (int32_t id : qwen_text().tokenize(text, false)) {
    inferlab::StreamEvent event;
    event.token = inferlab::SampledToken{.token = id, .logprob = -0.5f, .top = {{.token = id, .logprob = -0.5f}}};
    events.push_back(std::move(event));
  }
  inferlab::StreamEvent finish;
  finish.finish = inferlab::FinishReason::length;
  events.push_back(std::move(finish));
  for (auto& event : events) {
    api::Delta delta;
    completion.absorb(choice, event, delta);
    writer.stream_delta(completion, choice, delta, out);
    if (delta.finished) writer.stream_finish(completion, choice, out);
  }
  EXPECT_TRUE(completion.all_done());
  writer.stream_end(completion, out);
  std::vector<json> parsed;
  std::size_t at = 0;
  while ((at = out.find("data: ", at)) != std::string::npos) {
    std::size_t end = out.find("\n\n", at);
    const std::string data = out.substr(at + 6, end - at - 6);
    parsed.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
    at = end;
  }
  return parsed;
}

TEST(ResponseWriter, ChatCompletionStreamsTheRoleThenContentDeltasThenTheFinish) {
  auto completion = generated(false);
  auto writer = api::chat_completion_writer("demo", "fp_test");
  std::vector<json> events = stream_events(*completion, *writer, " world");
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.front()["object"], "chat.completion.chunk");
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  for (std::size_t i = 1; i + 2 < events.size(); ++i) {
    content += events[i]["choices"][0]["delta"]["content"].get<std::string>();
    EXPECT_FALSE(events[i]["choices"][0]["logprobs"]["content"].empty());
  }
  EXPECT_EQ(content, " world");
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events.back(), "[DONE]");

  json body = writer->body(*completion);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], "demo");
  EXPECT_EQ(body["system_fingerprint"], "fp_test");
  EXPECT_EQ(body["choices"][0]["message"]["content"], " world");
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"][0]["bytes"].size(),
            body["choices"][0]["logprobs"]["content"][0]["token"].get<std::string>().size());
  EXPECT_EQ(body["usage"]["prompt_tokens"], completion->request().prompts[0].size());
  EXPECT_EQ(body["usage"]["completion_tokens"], completion->choices().front()->completion_tokens);
}

// The role chunk waits for the first token: written when the request arrives (before its prompt is
// computed), it is what a client timing the first chunk (vLLM's bench serve) took for the TTFT.
TEST(ResponseWriter, ChatRoleChunkGoesOutWithTheFirstTokenNotBefore) {
  auto completion = generated(false);
  auto writer = api::chat_completion_writer("demo", "fp_test");
  std::string out;
  writer->stream_start(*completion, out);
  EXPECT_EQ(out, "");  // the request is queued or its prompt computed: nothing to say yet

  api::Choice& choice = *completion->choices().front();
  inferlab::StreamEvent first;
  const int32_t id = qwen_text().tokenize(" world", false).front();
  first.token = inferlab::SampledToken{.token = id, .logprob = -0.5f, .top = {{.token = id, .logprob = -0.5f}}};
  api::Delta delta;
  completion->absorb(choice, first, delta);
  writer->stream_delta(*completion, choice, delta, out);
  const std::size_t split = out.find("\n\ndata: ");
  ASSERT_NE(split, std::string::npos) << out;  // two events: the role, then the token
  json role = json::parse(out.substr(6, split - 6));
  json token = json::parse(out.substr(split + 8, out.size() - split - 10));
  EXPECT_EQ(role["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(token["choices"][0]["delta"]["content"], " world");

  std::string later;
  inferlab::StreamEvent finish;
  finish.finish = inferlab::FinishReason::length;
  api::Delta last;
  completion->absorb(choice, finish, last);
  writer->stream_delta(*completion, choice, last, later);
  writer->stream_finish(*completion, choice, later);
  EXPECT_EQ(later.find("\"role\""), std::string::npos) << later;  // once per choice
}

TEST(ResponseWriter, TextCompletionEchoesThePromptAndWritesLegacyLogprobs) {
  auto completion = generated(true);
  auto writer = api::text_completion_writer("demo", "fp_test");
  std::vector<json> events = stream_events(*completion, *writer, " world");
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.front()["object"], "text_completion");
  EXPECT_EQ(events.front()["choices"][0]["text"], "Hello");  // echo: the prompt first

  json body = writer->body(*completion);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "Hello world");
  const json& logprobs = body["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), logprobs["text_offset"].size());
  std::size_t offset = 0;
  for (std::size_t i = 0; i < logprobs["tokens"].size(); ++i) {
    EXPECT_EQ(logprobs["text_offset"][i], offset);
    offset += logprobs["tokens"][i].get<std::string>().size();
    EXPECT_TRUE(logprobs["top_logprobs"][i].is_object());
  }
}

// /v1/responses on a thinking model: a reasoning item (reasoning_text) before the message, whole
// and streamed, with the stream's items, parts and sequence numbers in order.
TEST(ResponseWriter, ResponsesThoughtsAreAReasoningItemBeforeTheMessage) {
  auto request = std::make_shared<api::ParsedRequest>();
  request->prompts = {qwen_text().tokenize("Hello", false)};
  request->reasoning = api::ReasoningMarkers{};
  request->reasoning_start = api::ReasoningStart::may_open;
  request->separate_reasoning = true;
  auto completion = std::make_shared<api::Completion>(request, qwen_text(), 600, /*timings=*/false);
  completion->add_choice(0, std::make_shared<inferlab::RequestStream>());
  auto writer = api::openai_response_writer("demo", json::object(), json::array(), nullptr);
  const std::vector<json> events = stream_events(*completion, *writer, "<think>\nTwo and two.\n</think>\n\nFour.");
  std::vector<std::string> kinds;
  std::string thoughts;
  for (std::size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["sequence_number"], i);
    const std::string type = events[i]["type"];
    if (type == "response.reasoning_text.delta") {
      thoughts += events[i]["delta"].get<std::string>();
      EXPECT_EQ(events[i]["output_index"], 0);
      if (kinds.back() == type) continue;
    }
    if (type == "response.output_text.delta" && kinds.back() == type) continue;
    std::string kind = type;
    if (events[i].contains("item")) kind += " " + events[i]["item"]["type"].get<std::string>();
    if (events[i].contains("part")) kind += " " + events[i]["part"]["type"].get<std::string>();
    kinds.push_back(kind);
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{
                       "response.created", "response.in_progress", "response.output_item.added reasoning",
                       "response.content_part.added reasoning_text", "response.reasoning_text.delta", "response.reasoning_text.done",
                       "response.content_part.done reasoning_text", "response.output_item.done reasoning",
                       "response.output_item.added message", "response.content_part.added output_text", "response.output_text.delta",
                       "response.output_text.done", "response.content_part.done output_text", "response.output_item.done message",
                       "response.incomplete"}));  // stream_events ends on a length finish
  EXPECT_EQ(thoughts, "Two and two.");
  const json& final_output = events.back()["response"]["output"];
  ASSERT_EQ(final_output.size(), 2u);
  EXPECT_EQ(final_output[0]["content"], json::parse(R"([{"type": "reasoning_text", "text": "Two and two."}])"));
  EXPECT_EQ(final_output[0]["summary"], json::array());
  EXPECT_EQ(final_output[1]["content"][0]["text"], "Four.");
  const json body = writer->body(*completion);
  ASSERT_EQ(body["output"].size(), 2u);
  EXPECT_EQ(body["output"][0]["type"], "reasoning");
  EXPECT_EQ(body["output"][0]["id"].get<std::string>().rfind("rs_", 0), 0u);
  EXPECT_EQ(body["output"][0]["content"], final_output[0]["content"]);
  EXPECT_EQ(body["output"][1]["content"][0]["text"], "Four.");
  const int thought_tokens = static_cast<int>(qwen_text().tokenize("<think>\nTwo and two.\n</think>", false).size());
  EXPECT_EQ(body["usage"]["output_tokens_details"]["reasoning_tokens"], thought_tokens);
}

TEST(ResponseWriter, AStoredResponseKeepsItsInputItemsWithIdsInOpenAIsLayout) {
  auto store = std::make_shared<api::ResponseStore>(4);
  const json input = json::parse(R"([
      {"role": "user", "content": "Hi"},
      {"type": "message", "id": "msg_given", "role": "assistant", "content": [{"type": "output_text", "text": "Hello"}]},
      {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "1"}])");
  auto completion = generated(false);
  auto writer = api::openai_response_writer("demo", json::object(), input, store);
  stream_events(*completion, *writer, " world");
  const json body = writer->body(*completion);
  auto stored = store->get(body["id"].get<std::string>());
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->input_items, 4u);
  ASSERT_EQ(stored->conversation.size(), 4u + body["output"].size());
  const json& items = stored->conversation;
  EXPECT_EQ(items[0]["type"], "message");
  EXPECT_EQ(items[0]["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(items[0]["content"], json::parse(R"([{"type": "input_text", "text": "Hi"}])"));
  EXPECT_EQ(items[1]["id"], "msg_given");  // a client's id stays
  EXPECT_EQ(items[2]["id"].get<std::string>().rfind("fc_", 0), 0u);
  std::set<std::string> ids;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i < stored->input_items) EXPECT_EQ(items[i]["status"], "completed") << items[i].dump();
    EXPECT_TRUE(ids.insert(items[i]["id"].get<std::string>()).second) << "two items share an id: " << items[i].dump();
  }
}

TEST(ResponseWriter, AStreamErrorIsAnOpenAIErrorEventThenDone) {
  auto writer = api::chat_completion_writer("demo", "fp_test");
  std::string out;
  writer->stream_error(api::ApiError(504, "timed out", "", "timeout", "timeout_error"), out);
  EXPECT_EQ(out.rfind("data: {\"error\":", 0), 0u);
  EXPECT_TRUE(out.ends_with("data: [DONE]\n\n"));
}

TEST(RouteTable, EveryRouteIsListedOnceWithAMethodTheTransportServes) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const api::Route& route : api::server_routes()) {
    const std::string method = route.method;
    EXPECT_TRUE(method == "GET" || method == "POST" || method == "DELETE") << route.path;
    EXPECT_TRUE(seen.insert({route.method, route.path}).second) << route.method << " " << route.path << " twice";
  }
  EXPECT_TRUE(seen.count({"POST", "/v1/chat/completions"}));
  EXPECT_TRUE(seen.count({"POST", "/v1/completions"}));
  EXPECT_TRUE(seen.count({"DELETE", "/v1/responses/{id}"}));
  EXPECT_TRUE(seen.count({"GET", "/v1/responses/{id}/input_items"}));
}

}  // namespace
