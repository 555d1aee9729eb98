// Constrained decoding over a byte-level BPE vocabulary. A CompiledGrammar is a Grammar joined to a
// TokenVocabulary: a pushdown automaton whose stacks are hash-consed nodes (equal stacks share one
// id), byte transitions memoised per node, and, per grammar position a stack can have on top, the
// tokens accepted or rejected whatever lies below that position (the context-independent tokens,
// computed once by walking the sorted vocabulary) plus the few that depend on the context, as
// XGrammar's adaptive token mask cache does. A GrammarMatcher is one sequence's state: a set of
// stacks. Each decoding step: fill_mask() (context-independent tokens from the cache, the rest
// checked against the real stacks), sample, accept_token().
//
// One CompiledGrammar may serve many matchers (the n choices of a request, repeated requests);
// its caches are guarded by a mutex, so matchers of one grammar may run on different threads.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inferlab/grammar/grammar.h"
#include "inferlab/grammar/token_vocabulary.h"

namespace inferlab {

// One bit per token id.
class TokenMask {
 public:
  explicit TokenMask(int size = 0) { resize(size); }
  void resize(int size) {
    size_ = size;
    words_.assign((static_cast<std::size_t>(size) + 63) / 64, 0);
  }
  void clear() { std::fill(words_.begin(), words_.end(), 0); }
  void set(int32_t id) { words_[id >> 6] |= uint64_t{1} << (id & 63); }
  bool test(int32_t id) const { return (words_[id >> 6] >> (id & 63)) & 1; }
  int size() const { return size_; }
  int count() const;
  void merge(const TokenMask& other) {
    for (std::size_t i = 0; i < words_.size(); ++i) words_[i] |= other.words_[i];
  }
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  int size_ = 0;
  std::vector<uint64_t> words_;
};

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary);
  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocabulary() const { return *vocabulary_; }

  // Computes the per-position token caches of every position now (else each is computed the first
  // time a stack has it on top). For the compile-time figure of `bench grammar`.
  void precompute_all();
  std::size_t cached_positions() const;

 private:
  friend class GrammarMatcher;
  using State = std::vector<uint32_t>;  // sorted stack node ids; node 0 is the empty stack
  struct Node {
    uint32_t position;  // a `bytes` element of the grammar
    uint32_t parent;
  };
  struct PositionCache {
    TokenMask accepted;               // consumed whole from this position, whatever lies below
    std::vector<int32_t> uncertain;   // reach the end of the position's rule with bytes left: checked at run time
  };

  // Caller holds mutex_.
  uint32_t node(uint32_t position, uint32_t parent);
  void expand(uint32_t node, State& out);
  State initial_state();
  const std::vector<uint32_t>& step(uint32_t node, uint8_t byte);
  void step_state(const State& in, uint8_t byte, State& out);
  const PositionCache& position_cache(uint32_t position);
  // Walks `tokens` (ids in the vocabulary's sorted order) from `start`: sets the surviving ones in
  // `accepted`; with `uncertain`, collects those that died after some path reached node 0 (the
  // end of the start's rule).
  void walk(const State& start, const std::vector<int32_t>& tokens, const std::vector<uint32_t>* lcp, TokenMask& accepted,
            std::vector<int32_t>* uncertain);

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  mutable std::mutex mutex_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> steps_;
  std::unordered_map<uint32_t, std::unique_ptr<PositionCache>> positions_;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar);

  // The tokens that keep the output a valid prefix (EOS is not among them: see can_finish()).
  void fill_mask(TokenMask& mask);
  // Advances by the token's bytes; false (state unchanged) when they do not fit the grammar.
  bool accept_token(int32_t id);
  bool accept_bytes(std::string_view bytes);
  bool can_finish() const;  // the output so far is a complete sentence of the grammar
  bool terminated() const;  // complete, and nothing may follow
  bool dead() const { return state_.empty(); }

 private:
  std::shared_ptr<CompiledGrammar> grammar_;
  CompiledGrammar::State state_;
  CompiledGrammar::State scratch_, scratch2_;
  std::vector<int32_t> uncertain_;
};

}  // namespace inferlab
