// The WordPiece pieces one by one: BertNormalizer, BertPreTokenizer, greedy longest-match-first,
// the [UNK] rules, the decoder's cleanup, loading variants and refusals. A tiny hand-made
// tokenizer.json, so each expectation follows from the definitions.
#include <gtest/gtest.h>
#include <unistd.h>

#include "inferlab/tokenizer/tokenizer.h"
#include "test_paths.h"
#include "tokenizer/wordpiece_tokenizer.h"

namespace inferlab {
namespace {

using tokenizer_detail::bert_normalize;
using tokenizer_detail::bert_pre_tokenize;
using tokenizer_detail::BertNormalizerOptions;
using tokenizer_detail::is_bert_punctuation;
using tokenizer_detail::wordpiece_cleanup;
using nlohmann::json;

// A folder holding one tokenizer.json (or other files), removed afterwards; unique per process, as
// CTest runs the tests of this binary in parallel processes.
class TempFolder {
 public:
  explicit TempFolder(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + "_" + std::to_string(next_++))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempFolder() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path_ / name) << text; }

 private:
  static inline int next_ = 0;
  std::filesystem::path path_;
};

// ids: [PAD]0 [UNK]1 [CLS]2 [SEP]3 un4 ##aff5 ##able6 aff7 a8 ##b9 é10 ##é11 hello12 ,13 .14 '15 s16 do17 not18
json tiny_tokenizer_json() {
  json vocab = json::object();
  const char* pieces[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "aff", "a", "##b",
                          "\u00e9", "##\u00e9", "hello", ",", ".", "'", "s", "do", "not"};
  for (int id = 0; id < static_cast<int>(std::size(pieces)); ++id) vocab[pieces[id]] = id;
  json added = json::array();
  for (int id : {0, 1, 2, 3})
    added.push_back({{"id", id}, {"content", pieces[id]}, {"special", true}, {"normalized", false}});
  return {
      {"added_tokens", added},
      {"normalizer", {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
                      {"strip_accents", nullptr}, {"lowercase", true}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor", {{"type", "TemplateProcessing"},
                          {"single", {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
                                      {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                      {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
                          {"special_tokens", {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
                                              {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
                 {"max_input_chars_per_word", 9}, {"vocab", vocab}}},
  };
}

std::shared_ptr<const Tokenizer> load(const json& root, const std::string& folder = "inferlab_wordpiece_unit") {
  TempFolder dir(folder);
  dir.write("tokenizer.json", root.dump());
  return Tokenizer::from_tokenizer_json(dir.path() / "tokenizer.json");
}

std::string load_error(const json& root) {
  try {
    load(root, "inferlab_wordpiece_refused");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "loaded";
}

using Ids = std::vector<int32_t>;

TEST(BertNormalizer, CleanTextDropsControlsAndMakesWhitespaceSpaces) {
  BertNormalizerOptions keep_case{.clean_text = true, .handle_chinese_chars = false, .strip_accents = false, .lowercase = false};
  EXPECT_EQ(bert_normalize(std::string("a\0b\xEF\xBF\xBD" "c\x01" "d\x7F" "e", 11), keep_case), "abcde");  // NUL, U+FFFD, C0, DEL
  EXPECT_EQ(bert_normalize("a\tb\nc\rd", keep_case), "a b c d");
  EXPECT_EQ(bert_normalize("a\vb\fc", keep_case), "abc");  // \v and \f are control characters first
  EXPECT_EQ(bert_normalize("a\u00a0b\u3000c\u2028d", keep_case), "a b c d");
  EXPECT_EQ(bert_normalize("a\u200bb\u00adc\ufeffd\u0085e\ue000f", keep_case), "abcdef");  // Cf, Cc, Co
  EXPECT_EQ(bert_normalize("a\u0378b", keep_case), "a\u0378b");  // unassigned (Cn) stays
  EXPECT_EQ(bert_normalize("\xFF" "a\xC3", keep_case), "a");  // invalid UTF-8 counts as U+FFFD
  BertNormalizerOptions raw{.clean_text = false, .handle_chinese_chars = false, .strip_accents = false, .lowercase = false};
  EXPECT_EQ(bert_normalize("a\tb\x01", raw), "a\tb\x01");
}

TEST(BertNormalizer, ChineseCharactersGetSpacesAroundThem) {
  BertNormalizerOptions only_chinese{.clean_text = false, .handle_chinese_chars = true, .strip_accents = false, .lowercase = false};
  EXPECT_EQ(bert_normalize("中文ok", only_chinese), " 中  文 ok");
  EXPECT_EQ(bert_normalize("\U00020000x", only_chinese), " \U00020000 x");  // extension B
  EXPECT_EQ(bert_normalize("かな한국", only_chinese), "かな한국");            // kana and Hangul are not
}

TEST(BertNormalizer, StripAccentsThenLowercase) {
  BertNormalizerOptions bert{};  // all on: uncased BERT
  EXPECT_EQ(bert_normalize("Café NAÏVE Ångström", bert), "cafe naive angstrom");
  EXPECT_EQ(bert_normalize("e\u0301", bert), "e");
  EXPECT_EQ(bert_normalize("İ", bert), "i");  // NFD gives I + U+0307; the mark goes, then lowercase
  EXPECT_EQ(bert_normalize("ﬁ Ⅻ", bert), "ﬁ ⅻ");  // NFD is canonical: compatibility forms stay
  BertNormalizerOptions lower_only{.clean_text = true, .handle_chinese_chars = true, .strip_accents = false, .lowercase = true};
  EXPECT_EQ(bert_normalize("Café", lower_only), "café");
  EXPECT_EQ(bert_normalize("İ", lower_only), "i\u0307");  // Rust's full lowercase mapping
  EXPECT_EQ(bert_normalize("ΣΑΣ", lower_only), "σασ");    // char by char: no final sigma
  BertNormalizerOptions strip_only{.clean_text = true, .handle_chinese_chars = true, .strip_accents = true, .lowercase = false};
  EXPECT_EQ(bert_normalize("Café", strip_only), "Cafe");
}

std::vector<std::string> words(std::string_view text) {
  std::vector<std::string_view> views;
  bert_pre_tokenize(text, views);
  return {views.begin(), views.end()};
}

TEST(BertPreTokenizer, SplitsOnWhitespaceAndIsolatesPunctuation) {
  EXPECT_EQ(words("Hey friend!     How are you?!?"),
            (std::vector<std::string>{"Hey", "friend", "!", "How", "are", "you", "?", "!", "?"}));
  EXPECT_EQ(words("$5 a€b ¿qué? x—y"), (std::vector<std::string>{"$", "5", "a€b", "¿", "qué", "?", "x", "—", "y"}));
  EXPECT_EQ(words("a\u3000b\u00a0c"), (std::vector<std::string>{"a", "b", "c"}));  // Unicode whitespace
  EXPECT_EQ(words("  "), std::vector<std::string>{});
  EXPECT_EQ(words("##"), (std::vector<std::string>{"#", "#"}));
}

TEST(BertPreTokenizer, PunctuationIsAsciiSymbolsAndUnicodeP) {
  for (char32_t cp : {U'!', U'/', U':', U'@', U'[', U'`', U'{', U'~', U'$', U'+', U'<', U'^', U'|'})
    EXPECT_TRUE(is_bert_punctuation(cp)) << static_cast<uint32_t>(cp);
  for (char32_t cp : {U'\u00bf', U'\u2014', U'\u00a7', U'\u3001', U'\u300c', U'\u201c', U'\uff01'})  // Po Pd Po Po Ps Pi Po
    EXPECT_TRUE(is_bert_punctuation(cp)) << static_cast<uint32_t>(cp);
  for (char32_t cp : {U'a', U'0', U' ', U'\u20ac', U'\u00b1', U'\u00a9', U'\u4e2d', U'\U0001F600'})  // Sc Sm So ...
    EXPECT_FALSE(is_bert_punctuation(cp)) << static_cast<uint32_t>(cp);
}

TEST(WordPiece, GreedyLongestMatchFirst) {
  auto t = load(tiny_tokenizer_json());
  EXPECT_EQ(t->encode("unaffable"), (Ids{4, 5, 6}));  // un ##aff ##able
  EXPECT_EQ(t->encode("affable"), (Ids{7, 6}));
  EXPECT_EQ(t->encode("ab"), (Ids{8, 9}));
  EXPECT_EQ(t->encode("Hello, UNAFFABLE."), (Ids{12, 13, 4, 5, 6, 14}));
  EXPECT_EQ(t->encode("hello", true), (Ids{2, 12, 3}));
}

TEST(WordPiece, UnknownWordsBecomeOneUnk) {
  auto t = load(tiny_tokenizer_json());
  EXPECT_EQ(t->encode("unx"), (Ids{1}));        // a remainder that matches nothing: the whole word
  EXPECT_EQ(t->encode("abab"), (Ids{1}));       // "a" would follow as "##a", which is missing
  EXPECT_EQ(t->encode("x hello"), (Ids{1, 12}));
  EXPECT_EQ(t->encode("abbbbbbbb"), (Ids{8, 9, 9, 9, 9, 9, 9, 9, 9}));  // 9 characters: max_input_chars_per_word
  EXPECT_EQ(t->encode("abbbbbbbbb"), (Ids{1}));                          // 10: over it
  EXPECT_EQ(t->encode("\u00c9\u00e9"), (Ids{1}));  // accents stripped: "ee", and "e" is not in the vocabulary
}

TEST(WordPiece, CharactersNotBytesCountTowardTheLimit) {
  // Without strip_accents "é" stays a 2-byte character: 9 of them (18 bytes) are within the limit.
  json root = tiny_tokenizer_json();
  root["normalizer"]["strip_accents"] = false;
  auto t = load(root);
  EXPECT_EQ(t->encode("ééééééééé"), (Ids{10, 11, 11, 11, 11, 11, 11, 11, 11}));
  EXPECT_EQ(t->encode("éééééééééé"), (Ids{1}));
}

TEST(WordPiece, AddedTokensAreMatchedInTheRawText) {
  auto t = load(tiny_tokenizer_json());
  EXPECT_EQ(t->encode("[CLS]un[SEP]"), (Ids{2, 4, 3}));
  EXPECT_EQ(t->encode("a [UNK] a"), (Ids{8, 1, 8}));
  EXPECT_EQ(t->encode("[cls]"), (Ids{1, 1, 1}));  // lowercase is not the token: "[", "cls", "]", none in the vocab
}

TEST(WordPiece, DecodeGluesContinuationsAndCleansUp) {
  auto t = load(tiny_tokenizer_json());
  EXPECT_EQ(t->decode(Ids{4, 5, 6, 8}), "unaffable a");
  EXPECT_EQ(t->decode(Ids{9, 8}), "##b a");  // the first token keeps its prefix
  EXPECT_EQ(t->decode(Ids{12, 13, 8, 14}), "hello, a.");
  EXPECT_EQ(t->decode(Ids{17, 15, 16}), "do ' s");  // cleanup sees one token at a time: " '" and " s"
  EXPECT_EQ(t->decode(Ids{2, 12, 3}), "[CLS] hello [SEP]");
  EXPECT_EQ(t->decode(Ids{2, 12, 3}, true), "hello");
  EXPECT_EQ(t->decode(Ids{2, 9}, true), "##b");  // skipped tokens do not count as the first
  EXPECT_EQ(t->decode_bytes_after(Ids{5}), "aff");
  EXPECT_EQ(t->decode_bytes_after(Ids{12}), " hello");
  EXPECT_THROW(t->decode(Ids{19}), Error);
  json no_cleanup = tiny_tokenizer_json();
  no_cleanup["decoder"]["cleanup"] = false;
  EXPECT_EQ(load(no_cleanup)->decode(Ids{12, 13, 8, 14}), "hello , a .");
  json no_decoder = tiny_tokenizer_json();
  no_decoder["decoder"] = nullptr;
  EXPECT_EQ(load(no_decoder)->decode(Ids{4, 5, 13}), "un ##aff ,");  // Hugging Face joins with spaces
}

TEST(WordPiece, CleanupReplacesAsHuggingFaceDoes) {
  auto clean = [](std::string s) {
    wordpiece_cleanup(s);
    return s;
  };
  EXPECT_EQ(clean(" ."), ".");
  EXPECT_EQ(clean(" ?"), "?");
  EXPECT_EQ(clean(" !"), "!");
  EXPECT_EQ(clean(" ,"), ",");
  EXPECT_EQ(clean(" n't"), "n't");
  EXPECT_EQ(clean(" 's"), "'s");
  EXPECT_EQ(clean(" 've"), "'ve");
  EXPECT_EQ(clean(" 're"), "'re");
  EXPECT_EQ(clean(" 'm"), "'m");
  EXPECT_EQ(clean("a ' b"), "a'b");
  EXPECT_EQ(clean(" do not"), " don't");
  EXPECT_EQ(clean("x . y , z"), "x. y, z");
  EXPECT_EQ(clean("hello"), "hello");
  EXPECT_EQ(clean(" hello"), " hello");
}

TEST(WordPiece, StreamingEqualsDecode) {
  auto t = load(tiny_tokenizer_json());
  Ids ids = t->encode("[CLS] Unaffable, hello. [SEP] ab x", true);
  for (bool skip : {true, false}) {
    StreamDecoder stream(t, skip);
    std::string out;
    for (int32_t id : ids) out += stream.push(id);
    out += stream.flush();
    EXPECT_EQ(out, t->decode(ids, skip)) << skip;
  }
}

TEST(WordPiece, WithoutNormalizerOrPreTokenizer) {
  json root = tiny_tokenizer_json();
  root["normalizer"] = nullptr;
  auto no_normalizer = load(root);
  EXPECT_EQ(no_normalizer->encode("Hello hello"), (Ids{1, 12}));  // case kept: "Hello" is unknown
  root["pre_tokenizer"] = nullptr;
  auto whole = load(root);
  EXPECT_EQ(whole->encode("unaff"), (Ids{4, 5}));
  EXPECT_EQ(whole->encode("un aff"), (Ids{1}));  // the space is part of the one word
  EXPECT_EQ(whole->encode("\xFF"), (Ids{1}));    // invalid UTF-8: U+FFFD, not in the vocabulary
}

TEST(WordPiece, UnsupportedVariantsAreRefusedByName) {
  auto with = [](const char* key, json value) {
    json root = tiny_tokenizer_json();
    root[key] = std::move(value);
    return load_error(root);
  };
  EXPECT_NE(with("normalizer", {{"type", "Precompiled"}}).find("normalizer type \"Precompiled\" is not supported for a WordPiece tokenizer"),
            std::string::npos);
  EXPECT_NE(with("normalizer", {{"type", "Sequence"}, {"normalizers", json::array()}}).find("normalizer type \"Sequence\""),
            std::string::npos);
  EXPECT_NE(with("pre_tokenizer", {{"type", "Whitespace"}}).find("pre_tokenizer type \"Whitespace\" is not supported for a WordPiece"),
            std::string::npos);
  EXPECT_NE(with("decoder", {{"type", "ByteLevel"}}).find("decoder type \"ByteLevel\" is not supported for a WordPiece"),
            std::string::npos);
  EXPECT_NE(with("post_processor", {{"type", "Weird"}}).find("post_processor type \"Weird\" is not supported"), std::string::npos);
  json root = tiny_tokenizer_json();
  root["model"]["unk_token"] = "<unk>";
  EXPECT_NE(load_error(root).find("model.unk_token \"<unk>\" is not in model.vocab"), std::string::npos);
  root = tiny_tokenizer_json();
  root["model"]["max_input_chars_per_word"] = -1;
  EXPECT_NE(load_error(root).find("max_input_chars_per_word must be a non-negative integer"), std::string::npos);
  root = tiny_tokenizer_json();
  root["normalizer"]["lowercase"] = "yes";
  EXPECT_NE(load_error(root).find("normalizer(BertNormalizer).lowercase must be true or false"), std::string::npos);
}

TEST(WordPiece, VocabTxtFolder) {
  TempFolder dir("inferlab_wordpiece_vocab");
  dir.write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s\nworld\n.\n");
  dir.write("tokenizer_config.json", R"({"tokenizer_class": "BertTokenizer", "do_lower_case": true})");
  auto t = Tokenizer::from_folder(dir.path());
  EXPECT_EQ(t->encode("Hellos WORLD.", true), (Ids{2, 5, 6, 7, 8, 3}));
  EXPECT_EQ(t->encode("[MASK] x"), (Ids{4, 1}));
  EXPECT_TRUE(t->is_special(4));
  EXPECT_EQ(t->decode(Ids{2, 5, 6, 7, 8, 3}, true), "hellos world.");
  dir.write("tokenizer_config.json", R"({"tokenizer_class": "BertTokenizer", "do_lower_case": false})");
  EXPECT_EQ(Tokenizer::from_folder(dir.path())->encode("Hello hello"), (Ids{1, 5}));
  // added_tokens_decoder: a token added after training (id 9, past vocab.txt), not special, so
  // normalized: matched in the lowercased text and decoded lowercased, as transformers does.
  dir.write("tokenizer_config.json", R"({"tokenizer_class": "BertTokenizerFast",
      "added_tokens_decoder": {"9": {"content": "<Entity>", "special": false}, "4": {"content": "[MASK]", "special": true}}})");
  auto extended = Tokenizer::from_folder(dir.path());
  EXPECT_EQ(extended->encode("hello<Entity>world"), (Ids{5, 9, 7}));
  EXPECT_EQ(extended->encode("HELLO <entity> World"), (Ids{5, 9, 7}));
  EXPECT_EQ(extended->vocab_size(), 10);
  EXPECT_FALSE(extended->is_special(9));
  EXPECT_EQ(extended->decode(Ids{5, 9, 7}, true), "hello <entity> world");
  EXPECT_EQ(extended->piece_to_id("<entity>"), 9);

  auto error = [&](const std::string& config) {
    dir.write("tokenizer_config.json", config);
    try {
      Tokenizer::from_folder(dir.path());
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  EXPECT_NE(error(R"({"tokenizer_class": "XLNetTokenizer"})").find("tokenizer_class \"XLNetTokenizer\" with vocab.txt is not supported"),
            std::string::npos);
  EXPECT_NE(error(R"({"tokenizer_class": "BertTokenizer", "do_basic_tokenize": false})").find("do_basic_tokenize false"),
            std::string::npos);
  EXPECT_NE(error(R"({"tokenizer_class": "BertTokenizer", "never_split": ["hello"]})").find("never_split"), std::string::npos);
  EXPECT_NE(error(R"({"tokenizer_class": "BertTokenizer", "cls_token": "<s>"})").find("cls_token \"<s>\" is not in vocab.txt"),
            std::string::npos);
  std::filesystem::remove(dir.path() / "tokenizer_config.json");
  try {
    Tokenizer::from_folder(dir.path());
    ADD_FAILURE() << "vocab.txt without tokenizer_config.json loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a tokenizer_config.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace inferlab
