#include "generation/planner.h"

#include <algorithm>

#include "inferlab/util/error.h"

namespace inferlab {

Planner::Planner(PlannerOptions options, KVPrefixManager& kv) : options_(options), kv_(kv) {
  if (options_.max_batch < 1) fail("max batch must be at least 1, got {}", options_.max_batch);
  if (options_.step_token_budget < 1) fail("step token budget must be at least 1, got {}", options_.step_token_budget);
}

std::vector<Admission> Planner::admit() {
  std::vector<Admission> admitted;
  const int bs = kv_.block_size();
  while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_batch) {
    Sequence& seq = *waiting_.front();
    if (!seq.embeds()) kv_.match_prefix(seq.tokens, seq.kv, seq.block_hashes);
    const int needed_blocks =
        static_cast<int>((seq.tokens.size() + bs - 1) / bs) - static_cast<int>(seq.kv.blocks.size());
    // Keep a few blocks back so running sequences can grow without preempting the newcomer.
    const int watermark = running_.empty() ? 0 : std::max(1, kv_.num_blocks() / 100);
    if (!kv_.make_room(needed_blocks + watermark) || !kv_.reserve(seq.kv, seq.uncomputed())) {
      kv_.release(seq.kv, seq.block_hashes);  // the matched prefix, if any
      break;  // first come, first served: it waits until blocks free up
    }
    admitted.push_back({&seq, seq.kv.length});
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return admitted;
}

Sequence* Planner::preempt_newest() {
  auto newest = std::max_element(running_.begin(), running_.end(),
                                 [](auto& a, auto& b) { return a->arrival < b->arrival; });
  std::unique_ptr<Sequence> seq = std::move(*newest);
  running_.erase(newest);
  // Recompute later from prompt + generated tokens; the sampler keeps its state, so the output
  // is the same as if it had never been interrupted.
  kv_.release(seq->kv, seq->block_hashes);
  ++seq->preemptions;
  Sequence* preempted = seq.get();
  waiting_.push_front(std::move(seq));
  return preempted;
}

StepPlan Planner::plan() {
  StepPlan step;
  // Decode first (one token each), then prompt chunks within the step's token budget.
  std::vector<Sequence*> decoding, prefilling;
  for (auto& seq : running_) (seq->uncomputed() == 1 && seq->generated > 0 ? decoding : prefilling).push_back(seq.get());
  // Every decoding sequence needs room for one more position; when the pool is dry, evict
  // prefix-cache blocks, then preempt the newest arrival (it recomputes later).
  for (std::size_t i = 0; i < decoding.size();) {
    Sequence* seq = decoding[i];
    if (kv_.reserve(seq->kv, 1)) {
      ++i;
      continue;
    }
    if (kv_.make_room(1)) continue;
    Sequence* victim = preempt_newest();
    ++step.preemptions;
    auto at = std::find(decoding.begin(), decoding.end(), victim);
    if (at != decoding.end()) {
      if (static_cast<std::size_t>(at - decoding.begin()) < i) --i;
      decoding.erase(at);
    }
    std::erase(prefilling, victim);
  }
  step.decoding = static_cast<int>(decoding.size());
  int budget = options_.step_token_budget;
  for (Sequence* seq : decoding) {
    PlannedChunk& chunk = step.chunks.emplace_back(PlannedChunk{seq, 1, {}});
    // A draft only where its positions fit the blocks free now (never evicting or preempting for
    // it) and never past max_tokens or the context; constrained or scripted sequences are not drafted.
    if (!options_.speculative.enabled() || seq->request.grammar || !seq->request.sampling.forced_tokens.empty() || budget <= 0) continue;
    const std::size_t context = options_.context;
    int room = std::min(seq->request.max_tokens - seq->generated - 1, budget);
    if (context > 0) room = std::min(room, static_cast<int>(context) - static_cast<int>(seq->tokens.size()) - 1);
    chunk.draft = ngram_draft(seq->tokens, options_.speculative, room);
    if (chunk.draft.empty()) continue;
    if (!kv_.reserve(seq->kv, 1 + static_cast<int>(chunk.draft.size()))) {
      chunk.draft.clear();
      continue;
    }
    chunk.count += static_cast<int>(chunk.draft.size());
    budget -= static_cast<int>(chunk.draft.size());
  }
  for (Sequence* seq : prefilling) {
    if (budget <= 0) break;
    int count = std::min(seq->uncomputed(), budget);
    if (seq->embeds() && count < seq->uncomputed()) {
      // An embedding's input runs whole: past the budget when it is the step's first prompt
      // chunk (so a long input is never starved), else in a later step.
      if (budget < options_.step_token_budget) continue;
      count = seq->uncomputed();
    }
    budget -= count;
    step.chunks.push_back({seq, count, {}});
  }
  return step;
}

}  // namespace inferlab
