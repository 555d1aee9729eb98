// Constrained decoding over a byte-level BPE vocabulary. A CompiledGrammar is a Grammar joined to a
// TokenVocabulary: a pushdown automaton whose stacks are hash-consed nodes (equal stacks share one
// id), whose parser states (sets of stacks) are interned and stepped through a lazily built
// transition table (one array lookup per byte once a transition is known), and a per-state cache
// of token masks: the mask of a state is computed once, by walking the vocabulary's byte trie
// against the automaton (a subtree is left the moment its prefix fails, and taken whole, without
// a step, when the state loops on every byte below it: the body of a JSON string loops on its
// ASCII characters and returns to itself after each well-formed UTF-8 character), and reused whenever a
// sequence is in that state again: every character of a string, every repeat of a schema, every
// request with the same grammar. A GrammarMatcher is one sequence's state. Each decoding step:
// fill_mask(), sample, accept_token().
//
// One CompiledGrammar may serve many matchers (the n choices of a request, repeated requests);
// its tables are guarded by a mutex, so matchers of one grammar may run on different threads.
#pragma once
#include <array>
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
  void reset(int32_t id) { words_[id >> 6] &= ~(uint64_t{1} << (id & 63)); }
  // The bits of `words` (one per id, as words() gives them) for `size` ids.
  void assign(int size, const std::vector<uint64_t>& words) {
    size_ = size;
    words_ = words;
  }
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

  struct CacheStats {
    std::size_t states = 0;        // parser states interned
    std::size_t masks = 0;         // masks held
    uint64_t mask_hits = 0, mask_misses = 0;
  };
  CacheStats cache_stats() const;

 private:
  friend class GrammarMatcher;
  using StackSet = std::vector<uint32_t>;  // sorted stack node ids; node 0 is the empty stack
  struct Node {
    uint32_t position;  // an element of the grammar (bytes, or a reference not yet expanded)
    uint32_t parent;
  };
  struct StateSetHash {
    std::size_t operator()(const StackSet& s) const noexcept;
  };
  struct Mask {
    std::vector<int32_t> tokens;  // few tokens: the list
    TokenMask bits;               // many: the bitmap
    bool as_bits = false;
  };
  // What a state does on plain text, found when a mask walk first needs it: the ASCII bytes that
  // lead to one state (`next`: itself in a string body, the next position in a string of bounded
  // length), whether each well-formed UTF-8 character >= 0x80 leads there too (its prefixes
  // alive), and how many such characters in a row are sure to be taken (kUnbounded: any number).
  // A bounded run ends in state `end`; exact (1, 0, -1 not asked yet): `end` refuses the text, so a
  // token longer than `length` characters is refused too.
  // For a state inside a character: where every way to finish it from `finish_place` leads.
  struct Run {
    bool row_full = false;  // every byte's transition is in next_
    bool known = false;
    bool utf8 = false;
    int8_t exact = -1;
    uint8_t length = 0;
    int8_t finish_place = -1;
    int32_t next = 0;
    int32_t end = 0;
    int32_t finishes_to = 0;
    std::array<uint64_t, 2> ascii{};
  };
  static constexpr uint8_t kUnbounded = 255;

  // Caller holds mutex_.
  uint32_t node(uint32_t position, uint32_t parent);
  StackSet expand(std::vector<uint32_t>& todo);  // empties todo
  int32_t intern(StackSet set);
  int32_t initial_state();
  int32_t next(int32_t state, uint8_t byte);
  int32_t next_token(int32_t state, int32_t token);  // through a token element (a special token)
  void fill_row(int32_t state);                      // every byte's transition, bytes that act alike computed once
  const Run& run(int32_t state, int depth = 0);
  bool run_is_exact(int32_t state);  // run(state) was asked for first
  // The state every well-formed way to finish a UTF-8 character from `place` (utf8_decoder; 0: a
  // whole character) leads to, each byte keeping a stack alive; 0 when some way dies or they part.
  int32_t finish_character(int32_t state, int place);
  // How trie node `t`'s subtree is decided from `state` without a step (`place`: where the node's
  // prefix ends in a UTF-8 character, -1 where not well-formed): kAllBelow, every string below is
  // taken; n >= 0, exactly those of at most n characters are; kWalk, it must be walked.
  static constexpr int kAllBelow = 1 << 20, kWalk = -1;
  int decide_below(int32_t state, int place, const TokenVocabulary::TrieNode& t);
  const Mask& mask(int32_t state);

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  mutable std::mutex mutex_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<uint32_t> seen_;         // per node: the expansion (epoch_) that last reached it
  uint32_t epoch_ = 0;
  std::vector<uint32_t> expand_todo_;  // next()'s worklist, kept for its capacity
  std::vector<StackSet> states_;                   // state 0: the empty set (no way on)
  std::vector<std::array<int32_t, 256>> next_;     // -1: not computed yet
  std::vector<uint8_t> complete_;                  // the state holds the empty stack
  std::vector<Run> runs_;                          // per state
  std::unordered_map<StackSet, int32_t, StateSetHash> state_ids_;
  std::unordered_map<int32_t, Mask> masks_;
  uint64_t mask_hits_ = 0, mask_misses_ = 0;
  struct Frame {
    uint32_t child, end;  // the trie node's children still to visit
    int32_t state;        // the state its prefix leads to
    int place;            // where its prefix ends in a UTF-8 character (-1: not well-formed)
    int chars;            // characters in its prefix (bytes that do not continue one)
  };
  std::vector<Frame> walk_frames_;                         // mask()'s, kept for their capacity
  std::vector<std::pair<uint32_t, uint32_t>> walk_runs_;   // runs of trie_tokens() a mask takes
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

 private:
  std::shared_ptr<CompiledGrammar> grammar_;
  int32_t state_ = 0;
};

}  // namespace inferlab
