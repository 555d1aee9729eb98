// The matcher over the real Qwen vocabulary (151k tokens): a corpus of schemas x random valid and
// invalid documents. Every valid document is accepted token by token (each token in the mask
// before it is taken); every invalid one is rejected exactly at its first wrong byte.
#include <gtest/gtest.h>

#include <random>

#include "inferlab/grammar/grammar_matcher.h"
#include "inferlab/grammar/json_schema.h"
#include "inferlab/grammar/regex.h"
#include "schema_corpus.h"

namespace inferlab {
namespace {

using test::json;

std::shared_ptr<CompiledGrammar> compile(const std::string& gbnf) {
  return std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), test::qwen_vocabulary());
}

constexpr int kDocumentsPerSchema = 25;

TEST(GrammarMatcher, ValidDocumentsAreAcceptedTokenByToken) {
  auto tokenizer = test::qwen_tokenizer();
  auto corpus = test::schema_corpus();
  TokenMask mask;
  for (std::size_t s = 0; s < corpus.size(); ++s) {
    auto grammar = compile(json_schema_to_gbnf(corpus[s]));
    test::DocumentGenerator gen(corpus[s], 1000 + s);
    for (int d = 0; d < kDocumentsPerSchema; ++d) {
      const std::string doc = gen.valid();
      json parsed;
      ASSERT_NO_THROW(parsed = json::parse(doc)) << doc;
      GrammarMatcher matcher(grammar);
      std::string seen;
      for (int32_t id : tokenizer->encode(doc, false)) {
        matcher.fill_mask(mask);
        ASSERT_TRUE(mask.test(id)) << "schema " << s << ": token " << id << " '" << test::qwen_vocabulary()->bytes(id)
                                   << "' masked after '" << seen << "' in " << doc;
        ASSERT_TRUE(matcher.accept_token(id)) << doc;
        seen += test::qwen_vocabulary()->bytes(id);
      }
      EXPECT_TRUE(matcher.can_finish()) << "schema " << s << ": " << doc;
    }
  }
}

TEST(GrammarMatcher, InvalidDocumentsAreRejectedAtTheFirstWrongByte) {
  auto corpus = test::schema_corpus();
  for (std::size_t s = 0; s < corpus.size(); ++s) {
    auto grammar = compile(json_schema_to_gbnf(corpus[s]));
    test::DocumentGenerator gen(corpus[s], 2000 + s);
    for (int d = 0; d < kDocumentsPerSchema; ++d) {
      std::size_t offset = 0;
      const std::string doc = gen.invalid(offset);
      GrammarMatcher matcher(grammar);
      for (std::size_t i = 0; i < offset; ++i)
        ASSERT_TRUE(matcher.accept_bytes(doc.substr(i, 1))) << "schema " << s << ": byte " << i << " of " << doc
                                                            << " (the error is at " << offset << ")";
      EXPECT_FALSE(matcher.accept_bytes(doc.substr(offset, 1))) << "schema " << s << ": byte " << offset << " of " << doc;
    }
  }
}

TEST(GrammarMatcher, MaskMatchesAcceptForEveryToken) {
  // The cached mask must hold exactly the tokens that accept_token takes (properties come in the
  // order the schema object holds them: alphabetical).
  auto vocab = test::qwen_vocabulary();
  auto grammar = compile(json_schema_to_gbnf(test::schema_corpus()[0]));
  for (const std::string prefix : {"", "{\"active\":true,\"age\":12,\"name\":\"ab", "{\"age\":1", "{\"age\":-3, \"name\":\"x\",\"role\":\"us"}) {
    GrammarMatcher base(grammar);
    ASSERT_TRUE(base.accept_bytes(prefix));
    TokenMask mask;
    base.fill_mask(mask);
    int allowed = 0;
    for (int32_t id = 0; id < vocab->size(); id += 7) {  // a sample of the vocabulary keeps this quick
      GrammarMatcher probe = base;
      bool ok = probe.accept_token(id);
      ASSERT_EQ(mask.test(id), ok) << "after '" << prefix << "': token " << id << " '" << vocab->bytes(id) << "'";
      allowed += ok;
    }
    EXPECT_GT(mask.count(), 0) << prefix;
  }
}

TEST(GrammarMatcher, EndOfOutputOnlyWhereComplete) {
  auto grammar = compile(json_object_gbnf());
  GrammarMatcher m(grammar);
  EXPECT_FALSE(m.can_finish());
  ASSERT_TRUE(m.accept_bytes("{\"a\": [1, 2"));
  EXPECT_FALSE(m.can_finish());
  ASSERT_TRUE(m.accept_bytes("]}"));
  EXPECT_TRUE(m.can_finish());
  EXPECT_TRUE(m.terminated());
  EXPECT_FALSE(m.accept_bytes(" "));
}

TEST(GrammarMatcher, RegexOverTokens) {
  auto grammar = compile(regex_to_gbnf("(yes|no), [0-9]{2}"));
  auto tokenizer = test::qwen_tokenizer();
  GrammarMatcher m(grammar);
  TokenMask mask;
  for (int32_t id : tokenizer->encode("yes, 42", false)) {
    m.fill_mask(mask);
    ASSERT_TRUE(mask.test(id));
    ASSERT_TRUE(m.accept_token(id));
  }
  EXPECT_TRUE(m.terminated());
  GrammarMatcher fresh(grammar);
  fresh.fill_mask(mask);
  for (int32_t id : tokenizer->encode("maybe", false)) EXPECT_FALSE(mask.test(id));
}

// Every token of the vocabulary checked against its mask: the mask walk takes whole trie subtrees
// where the state loops on their bytes, and must take exactly the tokens accept_token takes.
void expect_mask_exact(GrammarMatcher& base, const TokenVocabulary& vocab, const std::string& where) {
  TokenMask mask;
  base.fill_mask(mask);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    GrammarMatcher probe = base;
    ASSERT_EQ(mask.test(id), probe.accept_token(id)) << where << ": token " << id << " '" << vocab.bytes(id) << "'";
  }
}

TEST(GrammarMatcher, MaskIsExactOverTheWholeVocabularyInsideStrings) {
  auto vocab = test::qwen_vocabulary();
  auto grammar = compile(json_schema_to_gbnf(json::parse(R"({"type":"object","properties":{"name":{"type":"string"},
      "code":{"type":"string","pattern":"^[a-z]+$"},"short":{"type":"string","minLength":2,"maxLength":5}},
      "required":["name","code","short"]})")));
  const std::string in_name = "{\"code\":\"a\",\"name\":\"";
  const std::string in_short = "{\"code\":\"a\",\"name\":\"x\",\"short\":\"";
  for (const std::string prefix : {std::string(), std::string("{\"code\":\""), std::string("{\"code\":\"ab"), in_name, in_name + "x y",
                                   in_name + "\xe4\xb8", in_name + "\\u00", in_short, in_short + "a", in_short + "\xc3\xa9" "b",
                                   in_short + "abcd"}) {
    GrammarMatcher base(grammar);
    ASSERT_TRUE(base.accept_bytes(prefix)) << prefix;
    expect_mask_exact(base, *vocab, "after '" + prefix + "'");
  }
}

TEST(GrammarMatcher, MaskIsExactOnTokensOfBrokenAndEdgeUtf8) {
  // Tokens from bytes that test the trie's summaries: quotes, escapes and control bytes inside
  // text, characters cut short, surrogates, overlong forms, bytes past U+10FFFF, lone continuations.
  const std::vector<std::string> alphabet = {"a", "b", " ", "\"", "\\", "\n", "{", "}", ":", ",", "0", "1", "\xc3", "\xa9",
                                             "\xe4", "\xbd", "\xa0", "\xed", "\x80", "\x9f", "\xf0", "\x9f", "\x98", "\xf4",
                                             "\x8f", "\x90", "\xbf", "\xc0", "\xe0", "\xff", "\xc3\xa9", "\xe4\xbd\xa0",
                                             "\xf0\x9f\x98\x80", "ab", "u00"};
  std::mt19937 rng(7);
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  tokens.push_back("");  // a special token
  for (int i = 0; i < 4000; ++i) {
    // Prefixes shared by many tokens make subtrees big enough for the walk to take them whole.
    std::string t = i % 3 == 0 ? "" : (i % 3 == 1 ? "ab" : "\xe4\xbd\xa0");
    const int length = 1 + static_cast<int>(rng() % 5);
    for (int j = 0; j < length; ++j) t += alphabet[rng() % alphabet.size()];
    tokens.push_back(t);
  }
  auto vocab = std::make_shared<TokenVocabulary>(tokens);
  const std::vector<std::string> grammars = {
      json_schema_to_gbnf(json::parse(R"({"type":"object","properties":{"s":{"type":"string"},"n":{"type":"integer"}}})")),
      json_schema_to_gbnf(json::parse(R"({"type":"array","items":{"type":"string","maxLength":6}})")),
      R"(root ::= [^a]* "a")",
      R"(root ::= "x" [a-z\u00e9\u4f60]* "y")",
      R"(root ::= .* "!")",
      R"(root ::= ( [ab] | "\u00e9" | [\U0001F600-\U0001F64F] )+ "}")",
  };
  for (const std::string& gbnf : grammars) {
    auto grammar = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), vocab);
    for (int walk = 0; walk < 6; ++walk) {
      GrammarMatcher m(grammar);
      std::string seen;
      for (int step = 0; step < 30; ++step) {
        expect_mask_exact(m, *vocab, gbnf + " after '" + seen + "'");
        if (HasFatalFailure()) return;
        TokenMask mask;
        m.fill_mask(mask);
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab->size(); ++id)
          if (mask.test(id)) allowed.push_back(id);
        if (allowed.empty()) break;
        const int32_t pick = allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.accept_token(pick));
        seen += vocab->bytes(pick);
      }
    }
  }
}

TEST(TokenVocabulary, TrieRunsHoldEachSubtreesTokens) {
  auto vocab = test::qwen_vocabulary();
  const auto& trie = vocab->trie();
  const auto& tokens = vocab->trie_tokens();
  ASSERT_EQ(trie[0].subtree_tokens_end, tokens.size());
  // Every node with its prefix: each own token has exactly those bytes, each token of the subtree
  // starts with them, and the children's runs tile the parent's run after its own tokens.
  std::vector<std::pair<uint32_t, std::string>> todo{{0, ""}};
  std::size_t nodes = 0;
  while (!todo.empty()) {
    const auto [i, prefix] = todo.back();
    todo.pop_back();
    ++nodes;
    const auto& t = trie[i];
    for (uint32_t k = t.tokens_begin; k < t.tokens_end; ++k) ASSERT_EQ(vocab->bytes(tokens[k]), prefix);
    for (uint32_t k = t.tokens_end; k < t.subtree_tokens_end; ++k) ASSERT_EQ(vocab->bytes(tokens[k]).compare(0, prefix.size(), prefix), 0);
    uint32_t at = t.tokens_end;
    for (uint32_t c = t.first_child; c < t.first_child + t.child_count; ++c) {
      ASSERT_EQ(trie[c].tokens_begin, at) << "'" << prefix << "'";
      at = trie[c].subtree_tokens_end;
      todo.push_back({c, prefix + static_cast<char>(trie[c].byte)});
    }
    ASSERT_EQ(at, t.subtree_tokens_end) << "'" << prefix << "'";
  }
  EXPECT_EQ(nodes, trie.size());
}

}  // namespace
}  // namespace inferlab
