// The automaton behind constrained decoding (grammar_matcher.h): hash-consed stacks, memoised byte
// steps, and the per-position cache of context-independent tokens.
#include <algorithm>

#include "inferlab/grammar/grammar_matcher.h"

namespace inferlab {
namespace {

// Stacks beyond this many nodes mean a grammar (or an output) far outside what a request needs.
constexpr std::size_t kMaxNodes = 4'000'000;

bool has_empty(const std::vector<uint32_t>& state) { return !state.empty() && state.front() == 0; }

}  // namespace

int TokenMask::count() const {
  int n = 0;
  for (uint64_t w : words_) n += __builtin_popcountll(w);
  return n;
}

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)) {
  nodes_.push_back({UINT32_MAX, 0});  // node 0: the empty stack
}

uint32_t CompiledGrammar::node(uint32_t position, uint32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(position) << 32) | parent;
  auto [it, inserted] = node_ids_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    if (nodes_.size() >= kMaxNodes)
      throw GrammarError(fmt::format("the grammar's parser state grew beyond {} stack nodes (nesting too deep)", kMaxNodes));
    nodes_.push_back({position, parent});
  }
  return it->second;
}

// The stacks `node` stands for once every rule reference on top is replaced by its alternatives:
// each has a byte element on top, or is the empty stack (0).
void CompiledGrammar::expand(uint32_t id, State& out) {
  if (id == 0) {
    out.push_back(0);
    return;
  }
  const Node n = nodes_[id];
  const Grammar::Element e = grammar_.elements[n.position];
  if (e.kind == Grammar::bytes) {
    out.push_back(id);
    return;
  }
  // A reference: the continuation after it (nothing when it ends the alternative: a tail call, so
  // right recursion does not grow the stack), under each alternative of the rule.
  const uint32_t after = n.position + 1;
  const uint32_t continuation = grammar_.elements[after].kind == Grammar::end ? n.parent : node(after, n.parent);
  for (uint32_t start : grammar_.alternatives[e.value]) {
    if (grammar_.elements[start].kind == Grammar::end) expand(continuation, out);
    else expand(node(start, continuation), out);
  }
}

CompiledGrammar::State CompiledGrammar::initial_state() {
  State state;
  for (uint32_t start : grammar_.alternatives[grammar_.root]) {
    if (grammar_.elements[start].kind == Grammar::end) state.push_back(0);
    else expand(node(start, 0), state);
  }
  std::sort(state.begin(), state.end());
  state.erase(std::unique(state.begin(), state.end()), state.end());
  return state;
}

const std::vector<uint32_t>& CompiledGrammar::step(uint32_t id, uint8_t byte) {
  const uint64_t key = (static_cast<uint64_t>(id) << 8) | byte;
  auto it = steps_.find(key);
  if (it != steps_.end()) return it->second;
  State next;
  const Node n = nodes_[id];
  if (grammar_.matches(n.position, byte)) {
    const uint32_t after = n.position + 1;
    expand(grammar_.elements[after].kind == Grammar::end ? n.parent : node(after, n.parent), next);
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
  }
  return steps_.emplace(key, std::move(next)).first->second;
}

void CompiledGrammar::step_state(const State& in, uint8_t byte, State& out) {
  out.clear();
  for (uint32_t id : in) {
    if (id == 0) continue;
    const auto& next = step(id, byte);
    out.insert(out.end(), next.begin(), next.end());
  }
  if (in.size() > 1) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
}

void CompiledGrammar::walk(const State& start, const std::vector<int32_t>& tokens, const std::vector<uint32_t>* lcp,
                           TokenMask& accepted, std::vector<int32_t>* uncertain) {
  // levels[d]: the state after the first d bytes of the current token; boundary[d]: some state up
  // to depth d held the empty stack (the start's rule had ended there).
  thread_local std::vector<State> levels;
  thread_local std::vector<uint8_t> boundary;
  if (levels.empty()) levels.resize(1);
  levels[0] = start;
  boundary.assign(1, has_empty(start));
  std::size_t computed = 0;              // levels[0..computed] are those of the previous token
  std::size_t dead_at = SIZE_MAX;        // the previous token's prefix of this length matched nothing
  const std::string* previous = nullptr;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const int32_t id = tokens[i];
    if (accepted.test(id)) continue;
    const std::string& bytes = vocabulary_->bytes(id);
    std::size_t common = 0;
    if (previous) {
      if (lcp) {
        common = (*lcp)[i];
      } else {
        while (common < bytes.size() && common < previous->size() && bytes[common] == (*previous)[common]) ++common;
      }
    }
    previous = &bytes;
    if (dead_at <= common) {  // shares a prefix that already matched nothing
      if (uncertain && boundary[dead_at - 1]) uncertain->push_back(id);
      continue;
    }
    dead_at = SIZE_MAX;
    std::size_t d = std::min(common, computed);
    if (levels.size() < bytes.size() + 1) levels.resize(bytes.size() + 1);
    if (boundary.size() < bytes.size() + 1) boundary.resize(bytes.size() + 1);
    for (; d < bytes.size(); ++d) {
      step_state(levels[d], static_cast<uint8_t>(bytes[d]), levels[d + 1]);
      boundary[d + 1] = boundary[d] || has_empty(levels[d + 1]);
      if (levels[d + 1].empty()) {
        dead_at = d + 1;
        break;
      }
    }
    computed = dead_at == SIZE_MAX ? bytes.size() : dead_at;
    if (dead_at == SIZE_MAX) accepted.set(id);
    else if (uncertain && boundary[dead_at - 1]) uncertain->push_back(id);
  }
}

const CompiledGrammar::PositionCache& CompiledGrammar::position_cache(uint32_t position) {
  auto it = positions_.find(position);
  if (it != positions_.end()) return *it->second;
  auto cache = std::make_unique<PositionCache>();
  cache->accepted.resize(vocabulary_->size());
  // The position alone on an otherwise empty stack: node 0 is then the end of its rule.
  State start{node(position, 0)};
  walk(start, vocabulary_->sorted(), &vocabulary_->lcp(), cache->accepted, &cache->uncertain);
  return *positions_.emplace(position, std::move(cache)).first->second;
}

void CompiledGrammar::precompute_all() {
  std::lock_guard lock(mutex_);
  for (uint32_t p = 0; p < grammar_.elements.size(); ++p)
    if (grammar_.elements[p].kind == Grammar::bytes) position_cache(p);
}

std::size_t CompiledGrammar::cached_positions() const {
  std::lock_guard lock(mutex_);
  return positions_.size();
}

}  // namespace inferlab
