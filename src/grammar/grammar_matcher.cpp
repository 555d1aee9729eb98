// One sequence's place in a grammar (grammar_matcher.h).
#include <algorithm>
#include <cstring>

#include "inferlab/grammar/grammar_matcher.h"

namespace inferlab {

GrammarMatcher::GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  std::lock_guard lock(grammar_->mutex_);
  state_ = grammar_->initial_state();
}

void GrammarMatcher::fill_mask(TokenMask& out) {
  std::lock_guard lock(grammar_->mutex_);
  const auto& m = grammar_->mask(state_);
  if (m.as_bits) {
    out = m.bits;
    return;
  }
  if (out.size() != grammar_->vocabulary_->size()) out.resize(grammar_->vocabulary_->size());
  else out.clear();
  for (int32_t id : m.tokens) out.set(id);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  std::lock_guard lock(grammar_->mutex_);
  int32_t state = state_;
  for (char c : bytes) {
    state = grammar_->next(state, static_cast<uint8_t>(c));
    if (state == 0) return false;
  }
  state_ = state;
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (id < 0 || id >= grammar_->vocabulary_->size()) return false;
  const std::string& bytes = grammar_->vocabulary_->bytes(id);
  if (!bytes.empty()) return accept_bytes(bytes);
  // A token with no bytes (a special token) fits only where the grammar names it (<[id]>).
  std::lock_guard lock(grammar_->mutex_);
  const int32_t state = grammar_->next_token(state_, id);
  if (state == 0) return false;
  state_ = state;
  return true;
}

bool GrammarMatcher::can_finish() const {
  std::lock_guard lock(grammar_->mutex_);
  return grammar_->complete_[state_];
}

bool GrammarMatcher::terminated() const {
  std::lock_guard lock(grammar_->mutex_);
  return grammar_->states_[state_].size() == 1 && grammar_->complete_[state_];
}

}  // namespace inferlab
