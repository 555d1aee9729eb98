// Random sampling under each schema of the corpus, over the real Qwen vocabulary. At every step
// the candidates are, in turn at random, the whole mask, its one-byte tokens, or its tokens that
// hold a JSON delimiter (so that strings and arrays end as a model's would, within the token cap);
// one candidate is drawn uniformly, and the end of output is one more choice where the grammar
// allows it.
// Writes one JSON line per generation, {"schema": i, "output": text, "finished": bool}, for
// validate_samples.mjs to check with ajv (an independent JSON Schema validator).
// usage: grammar_sampling OUT.jsonl COUNT
#include <cstdio>
#include <fstream>
#include <iostream>

#include "inferlab/grammar/grammar_matcher.h"
#include "inferlab/grammar/json_schema.h"
#include "schema_corpus.h"

using namespace inferlab;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: grammar_sampling OUT.jsonl COUNT\n";
    return 2;
  }
  const int count = std::atoi(argv[2]);
  constexpr int kMaxTokens = 2000;
  auto vocab = test::qwen_vocabulary();
  auto corpus = test::schema_corpus();
  std::vector<std::shared_ptr<CompiledGrammar>> grammars;
  for (const auto& schema : corpus) grammars.push_back(std::make_shared<CompiledGrammar>(parse_gbnf(json_schema_to_gbnf(schema)), vocab));
  std::ofstream out(argv[1]);
  std::mt19937_64 rng(42);
  std::vector<int32_t> one_byte, delimiters;
  for (int32_t id = 0; id < vocab->size(); ++id) {
    const std::string& b = vocab->bytes(id);
    if (b.size() == 1) one_byte.push_back(id);
    if (!b.empty() && b.find_first_of("\"}],") != std::string::npos) delimiters.push_back(id);
  }
  TokenMask mask;
  std::vector<int32_t> allowed;
  int unfinished = 0;
  long tokens = 0;
  for (int g = 0; g < count; ++g) {
    const int s = g % static_cast<int>(corpus.size());
    GrammarMatcher matcher(grammars[s]);
    std::string text;
    bool finished = false;
    for (int step = 0; step < kMaxTokens && !finished; ++step) {
      matcher.fill_mask(mask);
      allowed.clear();
      const int mode = std::uniform_int_distribution<int>(0, 2)(rng);
      if (mode > 0)
        for (int32_t id : mode == 1 ? one_byte : delimiters)
          if (mask.test(id)) allowed.push_back(id);
      if (allowed.empty()) {
        const auto& words = mask.words();
        for (std::size_t w = 0; w < words.size(); ++w)
          for (uint64_t bits = words[w]; bits; bits &= bits - 1) allowed.push_back(static_cast<int32_t>(w * 64 + __builtin_ctzll(bits)));
      }
      const bool can_end = matcher.can_finish();
      const std::size_t choices = allowed.size() + (can_end ? 1 : 0);
      if (choices == 0) break;
      const std::size_t pick = std::uniform_int_distribution<std::size_t>(0, choices - 1)(rng);
      if (pick == allowed.size()) {
        finished = true;
        break;
      }
      if (!matcher.accept_token(allowed[pick])) {
        std::cerr << "a masked-in token was refused\n";
        return 1;
      }
      text += vocab->bytes(allowed[pick]);
      ++tokens;
      finished = matcher.terminated();
    }
    unfinished += !finished;
    out << test::json{{"schema", s}, {"output", text}, {"finished", finished}}.dump(-1, ' ', false, test::json::error_handler_t::replace) << "\n";
  }
  std::cout << count << " generations, " << tokens << " tokens, " << unfinished << " hit the " << kMaxTokens << "-token cap\n";
  return unfinished == 0 ? 0 : 1;
}
