// Hostile input never crashes: invalid UTF-8, NUL bytes, 1 MB texts, malformed tokenizer.json.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "inferlab/util/error.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace inferlab {
namespace {

std::shared_ptr<const Tokenizer> qwen() {
  static auto tokenizer = Tokenizer::from_folder(test::qwen_tokenizer_dir());
  return tokenizer;
}

#define REQUIRE_QWEN() REQUIRE_PATH(test::qwen_tokenizer_dir() / "tokenizer.json", "run scripts/setup (npm ci)")

// Invalid UTF-8 is not rejected: its bytes go through the byte-level alphabet one by one. GPT-2
// has no normalizer, so every byte string comes back exactly; Qwen NFC-normalizes the valid runs
// (random bytes sometimes hold a base letter + combining mark), so there the result is a fixed point.
TEST(Robustness, InvalidUtf8IsEncodedByteForByte) {
  REQUIRE_QWEN();
  auto tokenizer = qwen();
  auto gguf = test::shared_dir() / "data/gpt2-vocab/ggml-vocab-gpt-2.gguf";
  auto gpt2 = std::filesystem::exists(gguf) ? Tokenizer::from_gguf(gguf) : nullptr;
  std::mt19937 rng(42);
  for (int round = 0; round < 2000; ++round) {
    std::string text(1 + rng() % 64, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    if (gpt2) EXPECT_EQ(gpt2->decode_bytes(gpt2->encode(text)), text) << "round " << round;
    auto ids = tokenizer->encode(text);
    std::string once = tokenizer->decode_bytes(ids);
    EXPECT_EQ(tokenizer->decode_bytes(tokenizer->encode(once)), once) << "round " << round;
    std::string lossy = tokenizer->decode(ids);  // U+FFFD where the bytes are not UTF-8
    StreamDecoder stream(tokenizer, false);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    EXPECT_EQ(streamed, lossy) << "round " << round;
  }
}

TEST(Robustness, NulBytesAreOrdinaryCharacters) {
  REQUIRE_QWEN();
  auto tokenizer = qwen();
  std::string text("a\0b\0\0c", 6);
  auto ids = tokenizer->encode(text);
  EXPECT_GE(ids.size(), 4u);
  EXPECT_EQ(tokenizer->decode(ids), text);
}

TEST(Robustness, OneMegabyteInputs) {
  REQUIRE_QWEN();
  auto tokenizer = qwen();
  std::mt19937 rng(7);
  std::string words;
  while (words.size() < (1 << 20)) words += "token" + std::to_string(rng() % 1000) + (rng() % 5 ? " " : "\n");
  std::string random_bytes(1 << 20, '\0');
  for (char& c : random_bytes) c = static_cast<char>(rng() % 256);
  std::string chinese;
  while (chinese.size() < (1 << 20)) chinese += "大模型如何推理";
  for (const std::string& text : {words, chinese, std::string(1 << 20, 'a'), std::string(1 << 20, ' '),
                                  std::string(1 << 20, '\n'), std::string(1 << 20, '7')}) {
    auto ids = tokenizer->encode(text);
    EXPECT_FALSE(ids.empty());
    EXPECT_TRUE(tokenizer->decode_bytes(ids) == text) << "1 MB text starting " << text.substr(0, 20);
  }
  auto ids = tokenizer->encode(random_bytes);  // NFC may change valid runs; it must not crash
  EXPECT_FALSE(ids.empty());
}

TEST(Robustness, EncodeFromManyThreadsGivesTheSameIds) {
  REQUIRE_QWEN();
  auto tokenizer = qwen();
  std::vector<std::string> texts = {"Hello world, this is a test.", "大模型如何推理？", "def f(x):\n    return x\n",
                                    "😀 emoji 🚀 and numbers 12345"};
  std::vector<std::vector<int32_t>> expected;
  for (auto& t : texts) expected.push_back(tokenizer->encode(t));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 500; ++round) {
        std::size_t k = (t + round) % texts.size();
        std::string text = texts[k] + " " + std::to_string(round % 50);  // new words hit the cache from several threads
        auto ids = tokenizer->encode(text);
        if (std::vector<int32_t>(ids.begin(), ids.begin() + expected[k].size()) != expected[k]) ++failures;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Robustness, DecodeRejectsOutOfRangeIds) {
  REQUIRE_QWEN();
  auto tokenizer = qwen();
  std::vector<int32_t> ids = {1, 99999999};
  EXPECT_THROW(tokenizer->decode(ids), Error);
  ids = {-1};
  EXPECT_THROW(tokenizer->decode(ids), Error);
  EXPECT_THROW(tokenizer->id_to_piece(-5), Error);
}

std::string error_for(const std::string& content) {
  auto dir = std::filesystem::temp_directory_path() / "inferlab_bad_tokenizer";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << content;
  try {
    Tokenizer::from_tokenizer_json(dir / "tokenizer.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Robustness, MalformedTokenizerJsonGivesAClearError) {
  EXPECT_NE(error_for("{ not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_for("[]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(error_for("{}").find("model must be an object"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "Unigram", "vocab": []}})").find("Unigram"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": 3}})").find("merges must be an array"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})").find("integer token id"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})").find("missing from the vocabulary"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}})").find("two pieces"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [[1, 2]]}})").find("merges[0]"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Whitespace"}})").find("pre_tokenizer type \"Whitespace\" is not supported"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}})").find("does not compile"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"type": "Precompiled"}})").find("Precompiled"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"▁a": 0, "▁b": 1, "▁c": 2, "▁d": 3, "▁e": 4, "▁f": 5, "▁g": 6, "▁h": 7, "▁i": 8, "▁j": 9}, "merges": [], "byte_fallback": false}})").find("not byte-level"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {}, "merges": [], "byte_fallback": true}})").find("SentencePiece-style tokenizer needs a decoder"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "added_tokens": [{"id": 5}]})").find("content"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": {"type": 5, "vocab": {"a": 0}, "merges": []}})").find("malformed tokenizer.json"), std::string::npos);
  std::string nested = R"({"type": "NFC"})";
  for (int i = 0; i < 100; ++i) nested = R"({"type": "Sequence", "normalizers": [)" + nested + "]}";
  EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": )" + nested + "}").find("nested deeper"), std::string::npos);
}

TEST(Robustness, MissingFilesNameThePath) {
  try {
    Tokenizer::from_folder("/nonexistent/folder");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/folder"), std::string::npos);
  }
}

}  // namespace
}  // namespace inferlab
