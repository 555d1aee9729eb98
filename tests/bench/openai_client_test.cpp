// What one streamed chunk carries, error bodies, the API root.
#include <gtest/gtest.h>

#include "inferlab/bench/openai_client.h"
#include "inferlab/util/error.h"

using namespace inferlab::bench;

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
