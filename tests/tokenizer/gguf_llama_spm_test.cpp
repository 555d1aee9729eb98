// llama.cpp's SentencePiece vocabulary (tokenizer.ggml.model "llama": scores, byte tokens) from GGUF
// against llama.cpp's test vectors (ids from Hugging Face tokenizers), extracted at test time from
// the llama.cpp source node-llama-cpp bundles.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "inferlab/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace inferlab {
namespace {

std::filesystem::path gguf_path() { return test::llama_vocab_dir() / "ggml-vocab-llama-spm.gguf"; }

TEST(GgufLlamaSpm, EveryTestVectorMatches) {
  REQUIRE_PATH(gguf_path(), "llama.cpp's vocab files (ctest runs tokenizer_llama_vocab first)");
  auto tokenizer = Tokenizer::from_gguf(gguf_path());
  auto cases = test::read_cases(gguf_path().string() + ".inp");
  auto expected = test::read_ids(gguf_path().string() + ".out");
  ASSERT_EQ(cases.size(), expected.size());
  ASSERT_GT(cases.size(), 40u);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto ids = tokenizer->encode(cases[i], false);
    EXPECT_EQ(ids, expected[i]) << "case " << i << ": " << nlohmann::json(cases[i]).dump();
    // Decoding gives the text back (the space prefix added at encode is dropped again).
    EXPECT_EQ(tokenizer->decode(ids), cases[i]) << "round trip, case " << i;
  }
}

TEST(GgufLlamaSpm, SpecialTokensAndBos) {
  REQUIRE_PATH(gguf_path(), "llama.cpp's vocab files (ctest runs tokenizer_llama_vocab first)");
  auto tokenizer = Tokenizer::from_gguf(gguf_path());
  EXPECT_EQ(tokenizer->vocab_size(), 32000);
  EXPECT_EQ(tokenizer->bos_token(), "<s>");
  EXPECT_EQ(tokenizer->eos_token(), "</s>");
  EXPECT_TRUE(tokenizer->is_special(1));
  // Meta's Llama 2 ids: ▁Hello 15043, ▁world 3186; add_bos_token puts <s> (1) in front.
  EXPECT_EQ(tokenizer->encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(tokenizer->encode("Hello</s>", false), (std::vector<int32_t>{15043, 2}));
  EXPECT_EQ(tokenizer->id_to_piece(13), "<0x0A>");
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("a\nb", true), true), "a\nb");
}

}  // namespace
}  // namespace inferlab
