// One sequence's place in a grammar (grammar_matcher.h).
#include <algorithm>

#include "inferlab/grammar/grammar_matcher.h"

namespace inferlab {

GrammarMatcher::GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  std::lock_guard lock(grammar_->mutex_);
  state_ = grammar_->initial_state();
}

void GrammarMatcher::fill_mask(TokenMask& mask) {
  std::lock_guard lock(grammar_->mutex_);
  if (mask.size() != grammar_->vocabulary_->size()) mask.resize(grammar_->vocabulary_->size());
  else mask.clear();
  uncertain_.clear();
  for (uint32_t id : state_) {
    if (id == 0) continue;
    const auto& cache = grammar_->position_cache(grammar_->nodes_[id].position);
    mask.merge(cache.accepted);
    uncertain_.insert(uncertain_.end(), cache.uncertain.begin(), cache.uncertain.end());
  }
  // The tokens that leave their position's rule: only the real stacks below can say.
  if (!uncertain_.empty()) grammar_->walk(state_, uncertain_, nullptr, mask, nullptr);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  std::lock_guard lock(grammar_->mutex_);
  scratch_ = state_;
  for (char c : bytes) {
    grammar_->step_state(scratch_, static_cast<uint8_t>(c), scratch2_);
    if (scratch2_.empty()) return false;
    std::swap(scratch_, scratch2_);
  }
  std::swap(state_, scratch_);
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (id < 0 || id >= grammar_->vocabulary_->size()) return false;
  const std::string& bytes = grammar_->vocabulary_->bytes(id);
  if (bytes.empty()) return false;
  return accept_bytes(bytes);
}

bool GrammarMatcher::can_finish() const { return !state_.empty() && state_.front() == 0; }

bool GrammarMatcher::terminated() const { return state_.size() == 1 && state_.front() == 0; }

}  // namespace inferlab
