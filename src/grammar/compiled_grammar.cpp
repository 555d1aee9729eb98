// The automaton behind constrained decoding (grammar_matcher.h): hash-consed stacks, interned
// parser states with a lazily filled transition table, and the per-state token mask cache.
#include <algorithm>

#include "inferlab/grammar/grammar_matcher.h"

namespace inferlab {
namespace {

// Far beyond what a request needs; a grammar that gets there (deep nesting) fails with a message.
constexpr std::size_t kMaxNodes = 4'000'000;
constexpr std::size_t kMaxStates = 200'000;
// Stacks alive at once: each byte of the output is checked against every one of them.
constexpr std::size_t kMaxStacks = 8192;
constexpr std::size_t kMaxMasks = 4096;        // masks kept per grammar (then the cache starts over)
constexpr std::size_t kListBelow = 4096;       // masks with fewer tokens are kept as a list

}  // namespace

int TokenMask::count() const {
  int n = 0;
  for (uint64_t w : words_) n += __builtin_popcountll(w);
  return n;
}

std::size_t CompiledGrammar::StateSetHash::operator()(const StackSet& s) const noexcept {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t v : s) h = (h ^ v) * 1099511628211ull;
  return static_cast<std::size_t>(h);
}

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)) {
  // A token element stands for a token no byte path reaches: one with bytes would be allowed two
  // ways (whole, and as its bytes), which the byte automaton does not track.
  for (const Grammar::Element& e : grammar_.elements)
    if (e.kind == Grammar::token &&
        (e.value >= static_cast<uint32_t>(vocabulary_->size()) || !vocabulary_->bytes(static_cast<int32_t>(e.value)).empty()))
      throw GrammarError(fmt::format("grammar: <[{}]> is not a special token of this vocabulary (a token with no text of its "
                                     "own); write an ordinary token's text as a literal", e.value));
  nodes_.push_back({UINT32_MAX, 0});  // node 0: the empty stack
  intern({});                          // state 0: no stack left, nothing matches
}

CompiledGrammar::CacheStats CompiledGrammar::cache_stats() const {
  std::lock_guard lock(mutex_);
  return {states_.size(), masks_.size(), mask_hits_, mask_misses_};
}

uint32_t CompiledGrammar::node(uint32_t position, uint32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(position) << 32) | parent;
  auto [it, inserted] = node_ids_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    if (nodes_.size() >= kMaxNodes)
      throw GrammarError(fmt::format("the grammar's parser grew beyond {} stack nodes (the output nests too deep)", kMaxNodes));
    nodes_.push_back({position, parent});
  }
  return it->second;
}

// The stacks the nodes in `todo` stand for once every rule reference on top is replaced by its
// alternatives: each has a byte element on top, or is the empty stack (0). A worklist, and each
// node once per expansion: recursion could overflow the stack on long chains of rules, and in
// nested optional repetitions ((("a"{0,40}){0,40}){0,40}) the paths to a node multiply per level
// (one such request took 10 GB and minutes before this).
CompiledGrammar::StackSet CompiledGrammar::expand(std::vector<uint32_t>& todo) {
  if (++epoch_ == 0) {  // wrapped: forget every old mark
    std::fill(seen_.begin(), seen_.end(), 0u);
    epoch_ = 1;
  }
  StackSet out;
  while (!todo.empty()) {
    const uint32_t id = todo.back();
    todo.pop_back();
    if (seen_.size() < nodes_.size()) seen_.resize(nodes_.size(), 0u);
    if (seen_[id] == epoch_) continue;
    seen_[id] = epoch_;
    const Node n = nodes_[id];
    if (id == 0 || grammar_.elements[n.position].kind == Grammar::bytes || grammar_.elements[n.position].kind == Grammar::token) {
      out.push_back(id);
      if (out.size() > kMaxStacks)
        throw GrammarError(fmt::format("the grammar is too ambiguous: more than {} ways to parse the output at once "
                                       "(nested optional repetitions multiply them)", kMaxStacks));
      continue;
    }
    // A reference: the continuation after it (none when it ends the alternative: a tail call, so
    // right recursion does not grow the stack), under each alternative of the rule.
    const Grammar::Element e = grammar_.elements[n.position];
    const uint32_t after = n.position + 1;
    const uint32_t continuation = grammar_.elements[after].kind == Grammar::end ? n.parent : node(after, n.parent);
    for (uint32_t start : grammar_.alternatives[e.value])
      todo.push_back(grammar_.elements[start].kind == Grammar::end ? continuation : node(start, continuation));
  }
  return out;
}

int32_t CompiledGrammar::intern(StackSet set) {
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  auto it = state_ids_.find(set);
  if (it != state_ids_.end()) return it->second;
  if (states_.size() >= kMaxStates)
    throw GrammarError(fmt::format("the grammar's parser reached {} states (the output nests too deep)", kMaxStates));
  const int32_t id = static_cast<int32_t>(states_.size());
  complete_.push_back(!set.empty() && set.front() == 0);
  states_.push_back(set);
  std::array<int32_t, 256> unknown;
  unknown.fill(-1);
  next_.push_back(unknown);
  state_ids_.emplace(std::move(set), id);
  return id;
}

int32_t CompiledGrammar::initial_state() {
  std::vector<uint32_t> todo;
  for (uint32_t start : grammar_.alternatives[grammar_.root])
    todo.push_back(grammar_.elements[start].kind == Grammar::end ? 0 : node(start, 0));
  return intern(expand(todo));
}

int32_t CompiledGrammar::next(int32_t state, uint8_t byte) {
  int32_t known = next_[state][byte];
  if (known >= 0) return known;
  std::vector<uint32_t>& todo = expand_todo_;
  todo.clear();
  for (uint32_t id : states_[state]) {
    if (id == 0) continue;
    const Node n = nodes_[id];
    if (!grammar_.matches(n.position, byte)) continue;
    const uint32_t after = n.position + 1;
    todo.push_back(grammar_.elements[after].kind == Grammar::end ? n.parent : node(after, n.parent));
  }
  const int32_t to = intern(expand(todo));
  next_[state][byte] = to;
  return to;
}

int32_t CompiledGrammar::next_token(int32_t state, int32_t token) {
  // Not in the transition table: special tokens are few and rare in an output.
  std::vector<uint32_t>& todo = expand_todo_;
  todo.clear();
  for (uint32_t id : states_[state]) {
    if (id == 0) continue;
    const Node n = nodes_[id];
    const Grammar::Element e = grammar_.elements[n.position];
    if (e.kind != Grammar::token || e.value != static_cast<uint32_t>(token)) continue;
    const uint32_t after = n.position + 1;
    todo.push_back(grammar_.elements[after].kind == Grammar::end ? n.parent : node(after, n.parent));
  }
  return intern(expand(todo));
}

const CompiledGrammar::Mask& CompiledGrammar::mask(int32_t state) {
  auto it = masks_.find(state);
  if (it != masks_.end()) {
    ++mask_hits_;
    return it->second;
  }
  ++mask_misses_;
  if (masks_.size() >= kMaxMasks) masks_.clear();
  // Depth-first over the trie: a child is entered only when its byte keeps some stack alive.
  const auto& trie = vocabulary_->trie();
  const auto& trie_tokens = vocabulary_->trie_tokens();
  std::vector<int32_t> tokens;
  struct Frame {
    uint32_t node;
    int32_t state;
  };
  std::vector<Frame> todo{{0, state}};
  while (!todo.empty()) {
    const Frame f = todo.back();
    todo.pop_back();
    const auto& t = trie[f.node];
    for (uint32_t c = t.first_child, end = t.first_child + t.child_count; c < end; ++c) {
      const int32_t to = next(f.state, trie[c].byte);
      if (to == 0) continue;
      tokens.insert(tokens.end(), trie_tokens.begin() + trie[c].tokens_begin, trie_tokens.begin() + trie[c].tokens_end);
      if (trie[c].child_count) todo.push_back({c, to});
    }
  }
  // The special tokens a stack waits for (token elements), which the trie of bytes cannot reach.
  const std::size_t from_trie = tokens.size();
  for (uint32_t id : states_[state])
    if (id != 0 && grammar_.elements[nodes_[id].position].kind == Grammar::token)
      tokens.push_back(static_cast<int32_t>(grammar_.elements[nodes_[id].position].value));
  if (tokens.size() > from_trie + 1) {
    std::sort(tokens.begin() + static_cast<std::ptrdiff_t>(from_trie), tokens.end());
    tokens.erase(std::unique(tokens.begin() + static_cast<std::ptrdiff_t>(from_trie), tokens.end()), tokens.end());
  }
  Mask m;
  if (tokens.size() >= kListBelow) {
    m.as_bits = true;
    m.bits.resize(vocabulary_->size());
    for (int32_t id : tokens) m.bits.set(id);
  } else {
    std::sort(tokens.begin(), tokens.end());
    m.tokens = std::move(tokens);
  }
  return masks_.emplace(state, std::move(m)).first->second;
}

}  // namespace inferlab
