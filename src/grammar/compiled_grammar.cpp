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
// A mask walk asks whether the state loops on a subtree's bytes only for subtrees of at least this
// many tokens: below it, stepping through costs less than finding out.
constexpr uint32_t kLoopCheckFrom = 8;
// Pairs (parser state, place in a UTF-8 character) explored to prove that each character leads
// from a state to one next state; a string body needs about ten.
constexpr std::size_t kMaxUtf8Pairs = 64;
// States followed along a string of bounded length to learn how many characters it takes for sure.
constexpr int kMaxRunDepth = 64;
// ASCII bytes a state must take alike (or every UTF-8 character) to be followed along a bounded run.
constexpr int kMinRunBytes = 3;

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
  runs_.emplace_back();
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

void CompiledGrammar::fill_row(int32_t state) {
  if (runs_[state].row_full) return;
  // Bytes matched by the same stacks lead to the same state: one step per such class of bytes
  // (a JSON string body has about ten), not one per byte.
  std::vector<uint32_t> stacks;
  for (uint32_t id : states_[state])
    if (id != 0 && grammar_.elements[nodes_[id].position].kind == Grammar::bytes) stacks.push_back(id);
  const std::size_t words = std::max<std::size_t>(1, (stacks.size() + 63) / 64);
  std::vector<uint64_t> matched(256 * words, 0);  // per byte: bit i when stacks[i] takes it
  for (std::size_t i = 0; i < stacks.size(); ++i) {
    const Grammar::ByteSet& set = grammar_.sets[grammar_.elements[nodes_[stacks[i]].position].value];
    for (int w = 0; w < 4; ++w)
      for (uint64_t bits = set[w]; bits; bits &= bits - 1)
        matched[(w * 64 + __builtin_ctzll(bits)) * words + i / 64] |= uint64_t{1} << (i % 64);
  }
  auto same = [&](int a, int b) { return std::equal(&matched[a * words], &matched[a * words] + words, &matched[b * words]); };
  auto none = [&](int b) { return std::all_of(&matched[b * words], &matched[b * words] + words, [](uint64_t w) { return w == 0; }); };
  std::vector<int> classes;  // a byte of each class met so far (its transition is in next_)
  for (int b = 0; b < 256; ++b) {
    if (none(b)) {
      next_[state][b] = 0;
      continue;
    }
    auto known = std::find_if(classes.begin(), classes.end(), [&](int c) { return same(c, b); });
    if (next_[state][b] >= 0) {
      if (known == classes.end()) classes.push_back(b);
    } else if (known != classes.end()) {
      next_[state][b] = next_[state][*known];
    } else {
      next(state, static_cast<uint8_t>(b));
      classes.push_back(b);
    }
  }
  runs_[state].row_full = true;
}

int32_t CompiledGrammar::finish_character(int32_t state, int place) {
  // Explored as pairs (parser state, place in the character).
  std::vector<std::pair<int32_t, int>> todo{{state, place}}, seen{{state, place}};
  int32_t finished = 0;
  while (!todo.empty()) {
    const auto [from, at] = todo.back();
    todo.pop_back();
    fill_row(from);
    for (int b = 0x80; b < 256; ++b) {
      const int next_place = utf8_decoder::step(at, static_cast<uint8_t>(b));
      if (next_place < 0) continue;
      const int32_t to = next_[from][b];
      if (to == 0) return 0;
      if (next_place == 0) {
        if (finished != 0 && to != finished) return 0;
        finished = to;
      } else if (std::find(seen.begin(), seen.end(), std::pair{to, next_place}) == seen.end()) {
        if (seen.size() >= kMaxUtf8Pairs) return 0;  // not plain text: the walk steps through it
        seen.push_back({to, next_place});
        todo.push_back({to, next_place});
      }
    }
  }
  return finished;
}

const CompiledGrammar::Run& CompiledGrammar::run(int32_t state, int depth) {
  if (runs_[state].known) return runs_[state];
  fill_row(state);
  // The state most ASCII bytes lead to.
  std::array<int32_t, 128> to{};
  for (int b = 0; b < 128; ++b) to[b] = next_[state][b];
  std::vector<std::pair<int32_t, int>> counts;  // target -> ASCII bytes leading there
  for (int b = 0; b < 128; ++b) {
    if (to[b] == 0) continue;
    auto c = std::find_if(counts.begin(), counts.end(), [&](const auto& p) { return p.first == to[b]; });
    if (c == counts.end()) counts.push_back({to[b], 1});
    else ++c->second;
  }
  int32_t most = 0;
  int most_count = 0;
  for (auto [target, n] : counts)
    if (n > most_count) most = target, most_count = n;
  Run r;
  r.row_full = true;
  r.next = most;
  for (int b = 0; b < 128; ++b)
    if (most != 0 && to[b] == most) r.ascii[b >> 6] |= uint64_t{1} << (b & 63);
  r.utf8 = most != 0 && finish_character(state, 0) == most;
  if (most == 0) {
    r.length = 0;
  } else if (most == state) {
    r.length = kUnbounded;
  } else if (depth >= kMaxRunDepth || (__builtin_popcountll(r.ascii[0]) + __builtin_popcountll(r.ascii[1]) < kMinRunBytes && !r.utf8)) {
    // Sure of one character; more would need a longer look ahead, not worth it for a literal or
    // bounded whitespace (the trie repeats their bytes in few tokens, and the walk is short).
    r.length = 1;
    r.end = most;
  } else {
    // A string of bounded length: one character here, then as many as the next state is sure of,
    // as long as it takes at least these bytes.
    const Run after = run(most, depth + 1);
    const bool same_text = (r.ascii[0] & ~after.ascii[0]) == 0 && (r.ascii[1] & ~after.ascii[1]) == 0 && (!r.utf8 || after.utf8);
    if (!same_text) {
      r.length = 1;
      r.end = most;
    } else if (after.length == kUnbounded) {
      r.length = kUnbounded;
    } else if (1 + after.length < kUnbounded) {
      r.length = static_cast<uint8_t>(1 + after.length);
      r.end = after.end;
    } else {
      r.length = kUnbounded - 1;  // sure of that many; where the run ends is not followed
      r.exact = 0;
    }
  }
  r.known = true;
  runs_[state] = r;
  return runs_[state];
}

bool CompiledGrammar::run_is_exact(int32_t state) {
  if (runs_[state].exact < 0) {
    // Every byte that starts a character of the text must be refused where the run ends.
    const Run r = runs_[state];
    bool refuses = r.end != 0;
    if (refuses) fill_row(r.end);
    for (int b = 0; b < 256 && refuses; ++b) {
      const bool starts = b < 128 ? ((r.ascii[b >> 6] >> (b & 63)) & 1) != 0 : r.utf8 && utf8_decoder::step(0, static_cast<uint8_t>(b)) > 0;
      if (starts && next_[r.end][b] != 0) refuses = false;
    }
    runs_[state].exact = refuses ? 1 : 0;
  }
  return runs_[state].exact == 1;
}

int CompiledGrammar::decide_below(int32_t state, int place, const TokenVocabulary::TrieNode& t) {
  if (place < 0 || !((t.utf8_below >> place) & 1)) {
    if (place != 0 || !t.only_ascii_below) return kWalk;
  }
  int32_t text = state;  // where plain text below the node starts
  if (place != 0) {
    // Inside a character: every way to finish it must lead to one state, and the text go on there.
    if (runs_[state].finish_place != place) {
      const int32_t finished = finish_character(state, place);
      runs_[state].finish_place = static_cast<int8_t>(place);
      runs_[state].finishes_to = finished;
    }
    text = runs_[state].finishes_to;
    if (text == 0) return kWalk;
  }
  const Run& r = run(text);
  if ((t.ascii_below[0] & ~r.ascii[0]) | (t.ascii_below[1] & ~r.ascii[1])) return kWalk;
  if (!t.only_ascii_below && !r.utf8) return kWalk;
  if (r.length == kUnbounded || t.chars_below <= r.length) return kAllBelow;
  const int length = r.length;
  return run_is_exact(text) ? length : kWalk;
}

const CompiledGrammar::Mask& CompiledGrammar::mask(int32_t state) {
  auto it = masks_.find(state);
  if (it != masks_.end()) {
    ++mask_hits_;
    return it->second;
  }
  ++mask_misses_;
  if (masks_.size() >= kMaxMasks) masks_.clear();
  // Depth-first over the trie, children in order: a child is entered only when its byte keeps some
  // stack alive; a subtree of plain text the state takes (a string's body) is decided at once,
  // whole or by its tokens' lengths, without a step. The tokens taken come out as runs of
  // trie_tokens(), in order.
  const auto& trie = vocabulary_->trie();
  const auto& trie_tokens = vocabulary_->trie_tokens();
  auto& runs = walk_runs_;
  runs.clear();
  auto take = [&](uint32_t begin, uint32_t end) {
    if (begin == end) return;
    if (!runs.empty() && runs.back().second == begin) runs.back().second = end;
    else runs.push_back({begin, end});
  };
  auto& frames = walk_frames_;
  const auto& token_chars = vocabulary_->trie_token_chars();
  frames.assign(1, {trie[0].first_child, trie[0].first_child + trie[0].child_count, state, 0, 0});
  fill_row(state);  // the root has a child for nearly every byte
  while (!frames.empty()) {
    Frame& f = frames.back();
    if (f.child == f.end) {
      frames.pop_back();
      continue;
    }
    const TokenVocabulary::TrieNode& t = trie[f.child++];
    const int32_t to = next(f.state, t.byte);
    if (to == 0) continue;
    const int place = f.place < 0 ? -1 : utf8_decoder::step(f.place, t.byte);
    const int chars = f.chars + (utf8_decoder::continues(t.byte) ? 0 : 1);
    if (t.subtree_tokens_end - t.tokens_begin >= kLoopCheckFrom) {
      const int below = decide_below(to, place, t);
      if (below == kAllBelow) {
        take(t.tokens_begin, t.subtree_tokens_end);
        continue;
      }
      if (below != kWalk) {  // a string of bounded length: its tokens that fit
        for (uint32_t k = t.tokens_begin, end = t.subtree_tokens_end; k < end;) {
          if (token_chars[k] - chars > below) {
            ++k;
            continue;
          }
          const uint32_t from = k;
          while (k < end && token_chars[k] - chars <= below) ++k;
          take(from, k);
        }
        continue;
      }
    }
    take(t.tokens_begin, t.tokens_end);
    if (t.child_count) frames.push_back({t.first_child, t.first_child + t.child_count, to, place, chars});
  }
  std::size_t taken = 0;
  for (auto [begin, end] : runs) taken += end - begin;
  // The special tokens a stack waits for (token elements), which the trie of bytes cannot reach.
  std::vector<int32_t> specials;
  for (uint32_t id : states_[state])
    if (id != 0 && grammar_.elements[nodes_[id].position].kind == Grammar::token)
      specials.push_back(static_cast<int32_t>(grammar_.elements[nodes_[id].position].value));
  Mask m;
  if (taken + specials.size() < kListBelow) {
    m.tokens.reserve(taken + specials.size());
    for (auto [begin, end] : runs) m.tokens.insert(m.tokens.end(), trie_tokens.begin() + begin, trie_tokens.begin() + end);
    m.tokens.insert(m.tokens.end(), specials.begin(), specials.end());
    std::sort(m.tokens.begin(), m.tokens.end());
    m.tokens.erase(std::unique(m.tokens.begin(), m.tokens.end()), m.tokens.end());
  } else {
    m.as_bits = true;
    if (taken * 2 > trie_tokens.size()) {  // most of the vocabulary: start from all of it, clear the rest
      m.bits.assign(vocabulary_->size(), vocabulary_->byte_token_bits());
      uint32_t from = 0;
      for (auto [begin, end] : runs) {
        for (uint32_t k = from; k < begin; ++k) m.bits.reset(trie_tokens[k]);
        from = end;
      }
      for (uint32_t k = from; k < trie_tokens.size(); ++k) m.bits.reset(trie_tokens[k]);
    } else {
      m.bits.resize(vocabulary_->size());
      for (auto [begin, end] : runs)
        for (uint32_t k = begin; k < end; ++k) m.bits.set(trie_tokens[k]);
    }
    for (int32_t id : specials) m.bits.set(id);
  }
  return masks_.emplace(state, std::move(m)).first->second;
}

}  // namespace inferlab
