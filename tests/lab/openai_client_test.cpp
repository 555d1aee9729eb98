// What one streamed chunk carries, error bodies, the API root.
#include <gtest/gtest.h>

#include "inferlab/lab/openai_client.h"
#include "inferlab/util/error.h"

using namespace inferlab::lab;

TEST(StreamChunk, ChatCompletionsUsageErrorsDone) {
  EXPECT_TRUE(parse_stream_chunk("[DONE]").done);
  auto role = parse_stream_chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})");
  EXPECT_EQ(role.content, "");
  auto piece = parse_stream_chunk(R"({"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]})");
  EXPECT_EQ(piece.content, "Hi");
  EXPECT_EQ(parse_stream_chunk(R"({"choices":[{"text":" there","index":0}]})").content, " there");
  auto usage = parse_stream_chunk(R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}})");
  EXPECT_EQ(*usage.prompt_tokens, 9);
  EXPECT_EQ(*usage.completion_tokens, 4);
  EXPECT_EQ(*parse_stream_chunk(R"({"error":{"message":"boom","type":"x"}})").error, "boom");
  EXPECT_THROW(parse_stream_chunk("{not json"), inferlab::Error);
  EXPECT_EQ(error_message_from_body(R"({"error":{"message":"max_tokens must be positive"}})"),
            "max_tokens must be positive");
  EXPECT_EQ(error_message_from_body("plain text\n"), "plain text");
}

TEST(OpenAiClient, ApiRoot) {
  EXPECT_EQ(api_root("http://127.0.0.1:30000"), "http://127.0.0.1:30000/v1");
  EXPECT_EQ(api_root("http://127.0.0.1:30000/v1/"), "http://127.0.0.1:30000/v1");
  try {
    api_root("127.0.0.1:30000");
    ADD_FAILURE() << "no error for a URL without a scheme";
  } catch (const inferlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("http://"), std::string::npos);
  }
}

TEST(StreamChunk, ServerTimingsInferlabLlamaCppAndUsage) {
  // inferlab's object: every figure as sent; usage's cached_tokens wins over cache_n.
  auto ours = parse_stream_chunk(
      R"({"choices":[],"timings":{"queue_ms":1.5,"prefill_ms":20.25,"decode_ms":60,"ttft_ms":21.75,"cache_n":3,)"
      R"("preemptions":2,"prompt_ms":20.25,"predicted_ms":60},"usage":{"prompt_tokens":9,"completion_tokens":4,)"
      R"("prompt_tokens_details":{"cached_tokens":8}}})");
  EXPECT_EQ(*ours.server.queue_ms, 1.5);
  EXPECT_EQ(*ours.server.prefill_ms, 20.25);
  EXPECT_EQ(*ours.server.decode_ms, 60);
  EXPECT_EQ(*ours.server.ttft_ms, 21.75);
  EXPECT_EQ(*ours.server.cached_tokens, 8);
  EXPECT_EQ(*ours.server.preemptions, 2);
  // llama.cpp's: prompt_ms is the prefill, predicted_ms the decode; no queue, so no server TTFT.
  auto llama = parse_stream_chunk(
      R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"timings":{"cache_n":5,"prompt_n":3,)"
      R"("prompt_ms":12.5,"prompt_per_second":240,"predicted_n":4,"predicted_ms":55.75,"predicted_per_second":71.7}})");
  EXPECT_EQ(*llama.server.prefill_ms, 12.5);
  EXPECT_EQ(*llama.server.decode_ms, 55.75);
  EXPECT_EQ(*llama.server.cached_tokens, 5);
  EXPECT_FALSE(llama.server.queue_ms || llama.server.ttft_ms || llama.server.preemptions);
  // Any server's usage details alone (vLLM, OpenAI).
  auto usage = parse_stream_chunk(R"({"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":4}}})");
  EXPECT_EQ(*usage.server.cached_tokens, 4);
  EXPECT_FALSE(usage.server.prefill_ms);
  // Later chunks add to what earlier ones said.
  ServerTimings merged = llama.server;
  merged.merge(usage.server);
  EXPECT_EQ(*merged.cached_tokens, 4);
  EXPECT_EQ(*merged.prefill_ms, 12.5);
}
