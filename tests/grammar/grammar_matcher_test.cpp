// The matcher over the real Qwen vocabulary (151k tokens): a corpus of schemas x random valid and
// invalid documents. Every valid document is accepted token by token (each token in the mask
// before it is taken); every invalid one is rejected exactly at its first wrong byte.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace inferlab
