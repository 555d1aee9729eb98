// GPT-2 vocabulary from GGUF against llama.cpp's test vectors (ids from Hugging Face tokenizers).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"
#include "inferlab/loading/gguf.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace inferlab {
namespace {

std::filesystem::path gguf_path() { return test::shared_dir() / "data/gpt2-vocab/ggml-vocab-gpt-2.gguf"; }

using test::read_cases;
using test::read_ids;

TEST(GgufGpt2, ReaderSeesVocabularyMetadata) {
  REQUIRE_PATH(gguf_path(), "the shared GPT-2 vocabulary (../shared/data/gpt2-vocab)");
  GgufFile gguf = read_gguf(gguf_path());
  ASSERT_NE(gguf.find("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(gguf.find("tokenizer.ggml.tokens")->size(), 50257u);
  EXPECT_EQ(gguf.find("tokenizer.ggml.merges")->size(), 50000u);
  EXPECT_EQ(gguf.find("tokenizer.ggml.model")->get<std::string>(), "gpt2");
}

TEST(GgufGpt2, EveryTestVectorMatchesHuggingFace) {
  REQUIRE_PATH(gguf_path(), "the shared GPT-2 vocabulary (../shared/data/gpt2-vocab)");
  auto tokenizer = Tokenizer::from_gguf(gguf_path());
  auto cases = read_cases(gguf_path().string() + ".inp");
  auto expected = read_ids(gguf_path().string() + ".out");
  ASSERT_EQ(cases.size(), expected.size());
  ASSERT_GT(cases.size(), 40u);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(tokenizer->encode(cases[i]), expected[i]) << "case " << i << ": " << nlohmann::json(cases[i]).dump();
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(cases[i])), cases[i]) << "round trip, case " << i;
  }
}

TEST(GgufGpt2, EndOfTextIsSpecialAndMatchedBeforeBpe) {
  REQUIRE_PATH(gguf_path(), "the shared GPT-2 vocabulary (../shared/data/gpt2-vocab)");
  auto tokenizer = Tokenizer::from_gguf(gguf_path());
  auto ids = tokenizer->encode("Hello<|endoftext|> world");
  EXPECT_EQ(ids, (std::vector<int32_t>{15496, 50256, 995}));
  EXPECT_TRUE(tokenizer->is_special(50256));
  EXPECT_EQ(tokenizer->decode(ids, true), "Hello world");
  EXPECT_EQ(tokenizer->id_to_piece(995), "Ġworld");
  EXPECT_EQ(tokenizer->eos_token(), "<|endoftext|>");
}

TEST(Gguf, RejectsFilesThatAreNotGguf) {
  auto path = std::filesystem::temp_directory_path() / "inferlab_not_a.gguf";
  std::ofstream(path) << "definitely not gguf";
  EXPECT_THROW(read_gguf(path), Error);
  try {
    read_gguf(path);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad magic"), std::string::npos) << e.what();
  }
  std::ofstream(path, std::ios::binary) << std::string("GGUF\x03\0\0\0", 8) << std::string(4, '\xff');
  EXPECT_THROW(read_gguf(path), Error);  // truncated header
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace inferlab
